// POST /browsers/{id}/configure with the parts other modules add (extensions, profile), through the
// HTTP API against the real daemon and real Chromium, beside a start URL, a flag and a viewport:
// one restart (one new pid) with every part in effect (the extension enabled in Chromium, the
// profile's cookie is there); unknown references change nothing and are listed in `details`; a part
// not in effect after the restart (an extension whose verification fails, by the test hook) puts
// everything back, the previous profile's folder included. The policy folder is a temp folder here
// (the policy part is in configure.test.ts, which touches the machine's folder).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { chromiumExtensions, expectUploaded, indexed, upload } from '../helpers/extensions.js';
import { expectError } from '../helpers/http.js';
import { evalInTab, pageUrls } from '../helpers/settings.js';
import { fixtureZip } from '../helpers/zip.js';
import { browser, daemonCdp, waitBrowser } from '../kit/browser.js';
import { tempDir } from '../kit/cleanup.js';
import { keysFile, startDaemon, type Daemon } from '../kit/daemon.js';
import { until } from '../kit/wait.js';
import { startOrigin, type Origin } from '../kit/origin.js';

const UA = 'browserd-configure-parts/1.0';
/** A key with browser:configure but not profiles:read. */
const CONFIGURE_ONLY = 'configure-only-token-0123456789abcdef';
let d: Daemon;
let site: Origin;
let base: string;
let host: string;
let workerId: string;

before(async () => {
  site = await startOrigin();
  base = site.url;
  host = '127.0.0.1';
  // Not started: the uploads below are installed without a launch (so `doomed`, whose verification the hook fails, is installed).
  d = await startDaemon({ env: {
      BROWSERD_POLICY_DIR: tempDir('browserd-configure-parts-policy-'),
      BROWSERD_TEST_HOOKS: 'fail-activation=doomed',
      BROWSERD_KEYS_FILE: keysFile([{ id: 'c', token: CONFIGURE_ONLY, scopes: ['browser:configure', 'browser:read'] }]),
    }, });
  const up = await expectUploaded(await upload(d, indexed([['worker', fixtureZip('mv3-worker')], ['doomed', fixtureZip('content-script')]])));
  workerId = up.extensions.find((e) => e.name === 'worker')?.id ?? '';
  await d.call('/browsers/local/restart', { method: 'POST' });
  await waitBrowser(d, (s) => s.state === 'ready', 'ready');
  // A profile `p` holding a cookie (saved when Chromium stops), and an empty one loaded now.
  await d.call('/profiles', { method: 'POST', json: { name: 'p' } }, 201);
  await d.call('/profiles', { method: 'POST', json: { name: 'empty' } }, 201);
  await d.call('/browsers/local', { method: 'PATCH', json: { profile: { name: 'p', save_changes: true } } });
  await setCookie('k', 'from-p');
  await d.call('/browsers/local', { method: 'PATCH', json: { profile: { name: 'empty' } } });
  assert.deepEqual(await cookies(), [], 'the empty profile has no cookie');
});
after(async () => {
  await d.cleanup();
  await site.close();
});

async function setCookie(name: string, value: string): Promise<void> {
  const cdp = await daemonCdp(d);
  try {
    await cdp.send('Storage.setCookies', { cookies: [{ name, value, domain: host, path: '/', expires: Math.floor(Date.now() / 1000) + 3600 }] });
  } finally {
    cdp.close();
  }
}

/** The cookies of the site's host, as name=value. */
async function cookies(): Promise<string[]> {
  const cdp = await daemonCdp(d);
  try {
    const { cookies: all } = await cdp.send('Storage.getCookies', {});
    return all.filter((c) => c.domain === host).map((c) => `${c.name}=${c.value}`);
  } finally {
    cdp.close();
  }
}

const profileName = async (): Promise<string | null> => ((await browser(d)) as unknown as { profile?: { name: string | null } }).profile?.name ?? null;

const state = async (): Promise<Record<string, unknown>> => {
  const b = await browser(d);
  return {
    viewport: b.viewport,
    flags: (await d.call<{ flags: string[] }>('/browsers/local/chromium/flags')).flags,
    pid: b.chromium.pid,
    restarts: b.chromium.restarts,
    profile: await profileName(),
  };
};

test('start URL, flag, viewport, an extension and a profile: one restart, every part in effect', async () => {
  const was = await browser(d);
  const start = `${base}/start`;
  const res = await d.fetch('/browsers/local/configure', {
    method: 'POST',
    json: { start_url: start, flags: [`--user-agent=${UA}`], viewport: { width: 1024, height: 768 }, extensions: [{ name: 'worker' }], profile: { name: 'p' } },
  });
  assert.equal(res.status, 200, await res.clone().text());
  const body = (await res.json()) as { chromium: { restarted: boolean; pid: number } };
  const now = await browser(d);
  assert.equal(now.chromium.restarts, was.chromium.restarts + 1, 'one restart');
  assert.notEqual(now.chromium.pid, was.chromium.pid);
  assert.equal(now.chromium.pid, body.chromium.pid);
  assert.equal((await chromiumExtensions(d)).get(workerId), '1.0.0', 'the extension enabled in Chromium');
  assert.deepEqual(await cookies(), ['k=from-p'], "the profile's cookie");
  assert.equal(await profileName(), 'p');
  await until('the start page open', async () => (await pageUrls(d)).includes(start));
  assert.equal(await evalInTab<string>(d, `${base}/ua`, 'navigator.userAgent'), UA);
  assert.deepEqual(await evalInTab<number[]>(d, `${base}/size`, '[innerWidth, innerHeight]'), [1024, 768]);
});

test('an unknown extension or profile: nothing changes, each listed in details', async () => {
  const was = await state();
  const res = await d.fetch('/browsers/local/configure', {
    method: 'POST',
    json: { start_url: `${base}/other`, flags: ['--lang=de'], viewport: { width: 800, height: 600 }, extensions: [{ name: 'worker' }, { name: 'nope' }, { id: 'a'.repeat(32) }], profile: { name: 'missing' } },
  });
  const err = await expectError(res, 422, 'setting_refused');
  assert.deepEqual(
    (err.details as { message: string }[]).map((x) => x.message).sort(),
    ['extensions[1]: no installed extension named nope', `extensions[2]: no installed extension with id ${'a'.repeat(32)}`, 'profile: no profile named missing'],
  );
  assert.ok((err.details as { code: string }[]).every((x) => x.code === 'not_found'), JSON.stringify(err.details));
  assert.deepEqual(await state(), was);
  // Invalid shapes beside a bad flag: 400, every problem listed, nothing changes.
  const invalid = await expectError(
    await d.fetch('/browsers/local/configure', { method: 'POST', json: { flags: ['nodash'], extensions: [{ id: 'x', name: 'y' }], profile: { save_changes: true } } }),
    400,
    'bad_request',
  );
  const fields = (invalid.details as { message: string }[]).map((x) => /^(flags|extensions|profile)\b/.exec(x.message)?.[1] ?? x.message);
  assert.deepEqual(fields.sort(), ['extensions', 'flags', 'profile'], JSON.stringify(invalid.details));
  assert.deepEqual(await state(), was);
  // A profile needs profiles:read besides browser:configure.
  const forbidden = await expectError(
    await d.fetch('/browsers/local/configure', { method: 'POST', headers: { authorization: `Bearer ${CONFIGURE_ONLY}` }, json: { flags: ['--lang=de'], profile: { name: 'empty' } } }),
    403,
    'forbidden',
  );
  assert.match(String(forbidden.message), /profiles:read/);
  assert.deepEqual(await state(), was);
});

test('every problem is listed even beside an unknown field; a missing viewport.height says it is required', async () => {
  const was = await state();
  const invalid = await expectError(
    await d.fetch('/browsers/local/configure', { method: 'POST', json: { startUrl: 'about:blank', flags: ['nodash'], viewport: { width: 800 }, profile: { save_changes: true } } }),
    400,
    'bad_request',
  );
  const messages = (invalid.details as { message: string }[]).map((x) => x.message);
  assert.ok(messages.some((m) => /^startUrl: unknown field \(configure takes .*start_url/.test(m)), JSON.stringify(messages));
  assert.ok(messages.some((m) => m.startsWith('flags')), JSON.stringify(messages));
  assert.ok(messages.some((m) => m.startsWith('profile')), JSON.stringify(messages));
  assert.ok(messages.includes('viewport.height: height is required (a whole number of CSS pixels)'), JSON.stringify(messages));
  assert.deepEqual(await state(), was);
});

test('a part not in effect after the restart: everything is put back, the previous profile folder included', async () => {
  const was = await state();
  const res = await d.fetch('/browsers/local/configure', {
    method: 'POST',
    json: { flags: ['--user-agent=never'], viewport: { width: 900, height: 700 }, extensions: [{ name: 'doomed' }], profile: { name: 'empty' } },
  });
  const err = await expectError(res, 422, 'activation_failed');
  assert.match(String(err.message), /doomed/);
  const now = await state();
  assert.deepEqual({ ...now, pid: null, restarts: null }, { ...was, pid: null, restarts: null }, 'the settings and the loaded profile of before');
  assert.equal((await browser(d)).state, 'ready');
  assert.deepEqual(await cookies(), ['k=from-p'], "the previous profile's folder is back");
  assert.equal(await evalInTab<string>(d, `${base}/ua`, 'navigator.userAgent'), UA, 'Chromium runs with the flags of before');
});
