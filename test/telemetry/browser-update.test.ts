// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The SDK's browsers.update({telemetry}) (BrowserUpdateParams.Telemetry) sets the category switches
// with the SDK's rules, the record shows the active configuration, and PATCH /browsers/{id} answers
// with the same record as GET (base_url, jwt, browser_live_view_url included).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import Kernel from '@onkernel/sdk';
import { expectError } from '../helpers/http.js';
import { keysFile, startDaemon, TEST_TOKEN, type Daemon } from '../kit/daemon.js';

const NO_TELEMETRY = 'no-telemetry-token-aaaaaaaaaaa';
let d: Daemon;
let sdk: Kernel;
before(async () => {
  d = await startDaemon({
    token: null,
    bearer: TEST_TOKEN,
    env: {
      BROWSERD_KEYS_FILE: keysFile([
        { id: 'all', token: TEST_TOKEN, scopes: ['browser:read', 'browser:write', 'telemetry:read', 'telemetry:write'] },
        { id: 'no-telemetry', token: NO_TELEMETRY, scopes: ['browser:read', 'browser:write'] },
      ]),
    },
  });
  sdk = new Kernel({ apiKey: TEST_TOKEN, baseURL: d.url, maxRetries: 0 });
});
after(() => d.cleanup());

type Switches = Record<string, boolean>;
const DEFAULTS: Switches = { console: false, network: false, page: false, interaction: false, control: true, connection: true, system: true, screenshot: false, captcha: true };
const ALL_OFF: Switches = Object.fromEntries(Object.keys(DEFAULTS).map((c) => [c, false]));

async function switches(): Promise<Switches> {
  const got = await d.call<{ browser: Record<string, { enabled: boolean }> }>('/telemetry');
  return Object.fromEntries(Object.entries(got.browser).map(([k, v]) => [k, v.enabled]));
}
const asConfig = (s: Switches): { browser: Record<string, { enabled: boolean }> } => ({ browser: Object.fromEntries(Object.entries(s).map(([k, v]) => [k, { enabled: v }])) });

test("browsers.update({telemetry}): the SDK's rules for enabled and the categories; the record shows the active configuration", async () => {
  assert.deepEqual(await switches(), DEFAULTS);
  // Categories alone merge onto the current selection.
  let b = await sdk.browsers.update('local', { telemetry: { browser: { console: { enabled: true }, captcha: { enabled: false } } } });
  assert.deepEqual(await switches(), { ...DEFAULTS, console: true, captcha: false });
  assert.deepEqual(b.telemetry, asConfig({ ...DEFAULTS, console: true, captcha: false }));
  // Omitted, null and {} leave it unchanged.
  for (const telemetry of [undefined, null, {}]) await sdk.browsers.update('local', telemetry === undefined ? {} : { telemetry });
  assert.deepEqual(await switches(), { ...DEFAULTS, console: true, captcha: false });
  // enabled true: a fresh selection, the default set plus the named categories.
  await sdk.browsers.update('local', { telemetry: { enabled: true, browser: { network: { enabled: true } } } });
  assert.deepEqual(await switches(), { ...DEFAULTS, network: true });
  // enabled false stops capture; the record says so with null.
  b = await sdk.browsers.update('local', { telemetry: { enabled: false } });
  assert.deepEqual(await switches(), ALL_OFF);
  assert.equal(b.telemetry, null);
  assert.equal((await sdk.browsers.retrieve('local')).telemetry, null);
  // With nothing captured, categories alone start from the default set (as create does).
  await sdk.browsers.update('local', { telemetry: { browser: { page: { enabled: true } } } });
  assert.deepEqual(await switches(), { ...DEFAULTS, page: true });
  // A browser config that turns every category off stops capture.
  await sdk.browsers.update('local', { telemetry: { browser: Object.fromEntries(Object.keys(DEFAULTS).map((c) => [c, { enabled: false }])) } });
  assert.deepEqual(await switches(), ALL_OFF);
  await sdk.browsers.update('local', { telemetry: { enabled: true } });
  assert.deepEqual(await switches(), DEFAULTS);
  assert.deepEqual((await sdk.browsers.retrieve('local')).telemetry, asConfig(DEFAULTS));
});

test('bad telemetry updates are refused whole: enabled false with categories, unknown categories, no telemetry:write', async () => {
  const patch = (body: unknown, token = TEST_TOKEN): Promise<Response> => d.fetch('/browsers/local', { method: 'PATCH', json: body, headers: { authorization: `Bearer ${token}` } });
  const both = await expectError(await patch({ telemetry: { enabled: false, browser: { console: { enabled: true } } } }), 400, 'bad_request');
  assert.match(JSON.stringify(both.details), /telemetry\.enabled/);
  await expectError(await patch({ telemetry: { browser: { gpu: { enabled: true } } } }), 400, 'bad_request');
  await expectError(await patch({ telemetry: { enabled: 'yes' } }), 400, 'bad_request');
  const scope = await expectError(await patch({ telemetry: { enabled: false } }, NO_TELEMETRY), 403, 'forbidden');
  assert.match(String(scope.message), /telemetry:write/);
  assert.deepEqual(await switches(), DEFAULTS, 'nothing changed');
});

test('PATCH /browsers/{id} answers with the same record as GET: base_url, jwt, cdp_ws_url and browser_live_view_url included', async () => {
  const strip = (r: Record<string, unknown>): Record<string, unknown> => {
    const { jwt, cdp_ws_url, browser_live_view_url, ...rest } = r as Record<string, string>;
    assert.ok(typeof jwt === 'string' && jwt.length > 20);
    assert.equal(new URL(cdp_ws_url ?? '').searchParams.get('jwt'), jwt);
    assert.equal(new URL(browser_live_view_url ?? '').searchParams.get('jwt'), jwt);
    return { ...rest, cdp_ws_url: cdp_ws_url?.split('?')[0], browser_live_view_url: browser_live_view_url?.split('?')[0] };
  };
  const got = strip(await d.call<Record<string, unknown>>('/browsers/local'));
  const patched = await d.fetch('/browsers/local', { method: 'PATCH', json: {} });
  assert.equal(patched.status, 200);
  const body = strip((await patched.json()) as Record<string, unknown>);
  assert.deepEqual(Object.keys(body).sort(), Object.keys(got).sort());
  assert.deepEqual(body, got);
  assert.equal(body.base_url, d.url);
  // The SDK's own update answer feeds its route cache like retrieve does.
  const fresh = new Kernel({ apiKey: TEST_TOKEN, baseURL: d.url, maxRetries: 0 });
  const u = await fresh.browsers.update('local', {});
  assert.equal(u.base_url, d.url);
  assert.ok(u.browser_live_view_url?.includes('jwt='));
});
