// docs/security.md's table "Each scope, and everything it can cause": for each row, a key holding only
// that scope tries the step just beyond it, through the HTTP API, and is refused; nothing changes.
import assert from 'node:assert/strict';
import zlib from 'node:zlib';
import { after, before, test } from 'node:test';
import { expectError } from '../helpers/http.js';
import { buildZip } from '../helpers/zip.js';
import { keysFile, startDaemon, type Daemon } from '../kit/daemon.js';

const SCOPES = ['browser:read', 'browser:configure', 'browser:write', 'extensions:write', 'profiles:write', 'cdp', 'computer', 'telemetry:read', 'proxies:read'] as const;
type Scope = (typeof SCOPES)[number];
const tokenOf = (s: Scope): string => `key-${s.replace(':', '-')}-0123456789abcdef`;
const PROXY_PASSWORD = 'proxy-pass-6f1e2d3c';
let d: Daemon;

before(async () => {
  d = await startDaemon({ env: { BROWSERD_KEYS_FILE: keysFile(SCOPES.map((s) => ({ id: s, token: tokenOf(s), scopes: [s] }))) } });
});
after(async () => {
  await d.cleanup();
});

const as = (s: Scope, path: string, init: Parameters<Daemon['fetch']>[1] = {}): Promise<Response> =>
  d.fetch(path, { ...init, headers: { ...(init.headers as Record<string, string> | undefined), authorization: `Bearer ${tokenOf(s)}` } });
const exec = (s: Scope): Promise<Response> => as(s, '/browsers/local/process/exec', { method: 'POST', json: { command: 'id' } });

test('every scope of the table but the process ones: running a command is 403', async () => {
  for (const s of SCOPES) await expectError(await exec(s), 403, 'forbidden');
});

test('browser:read cannot change the settings', async () => {
  assert.equal((await as('browser:read', '/browsers/local/chromium/flags')).status, 200);
  await expectError(await as('browser:read', '/browsers/local/chromium/flags', { method: 'PATCH', json: { flags: ['--lang=de'] } }), 403, 'forbidden');
  await expectError(await as('browser:read', '/browsers/local/chromium/policies', { method: 'PATCH', json: { policies: { BookmarkBarEnabled: true } } }), 403, 'forbidden');
});

test('browser:configure cannot run a command or load code through a flag or a policy', async () => {
  await expectError(await as('browser:configure', '/browsers/local/chromium/flags', { method: 'PATCH', json: { flags: ['--renderer-cmd-prefix=/bin/sh -c id'] } }), 400, 'bad_request');
  await expectError(await as('browser:configure', '/browsers/local/chromium/flags', { method: 'PATCH', json: { flags: ['--load-extension=/tmp'] } }), 400, 'bad_request');
  await expectError(await as('browser:configure', '/browsers/local/chromium/policies', { method: 'PATCH', json: { policies: { ExtensionInstallForcelist: ['a'.repeat(32)] } } }), 422, 'setting_refused');
  await expectError(await as('browser:configure', '/browsers/local/configure', { method: 'POST', body: '{"policies": {"__proto__": {}}}', headers: { 'content-type': 'application/json' } }), 400, 'bad_request');
  assert.deepEqual((await d.call<{ flags: string[] }>('/browsers/local/chromium/flags')).flags, []);
});

test('browser:write cannot set flags or policies', async () => {
  await expectError(await as('browser:write', '/browsers/local/chromium/flags', { method: 'PATCH', json: { flags: ['--lang=de'] } }), 403, 'forbidden');
  await expectError(await as('browser:write', '/browsers/local/chromium/policies', { method: 'PATCH', json: { policies: { BookmarkBarEnabled: true } } }), 403, 'forbidden');
});

test('extensions:write cannot write outside its folder', async () => {
  const zip = buildZip([{ name: 'manifest.json', data: JSON.stringify({ manifest_version: 3, name: 'x', version: '1.0' }) }, { name: '../../escape.txt', data: 'x' }]);
  const form = new FormData();
  form.append('extensions[][name]', 'x');
  form.append('extensions[][zip_file]', new Blob([zip], { type: 'application/zip' }), 'x.zip');
  const scoped = await as('extensions:write', '/browsers/local/extensions', { method: 'POST', body: form });
  const body = (await scoped.json()) as { code: string; inner_error?: { code: string } };
  assert.equal(scoped.status, 422, JSON.stringify(body));
  assert.equal(body.inner_error?.code, 'zip_slip');
});

test('profiles:write cannot unpack outside its folder or carry a symlink', async () => {
  const header = (name: string, type: string, link = ''): Buffer => {
    const h = Buffer.alloc(512);
    h.write(name, 0);
    h.write('0000644\0', 100);
    h.write('0000000\0', 108);
    h.write('0000000\0', 116);
    h.write('00000000000\0', 124);
    h.write('00000000000\0', 136);
    h.write('        ', 148);
    h.write(type, 156);
    h.write(link, 157);
    h.write('ustar\x0000', 257);
    let sum = 0;
    for (const b of h) sum += b;
    h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148);
    return h;
  };
  for (const [entry, code] of [[header('../zstd', '0'), 'zip_slip'], [header('zstd-error', '2', '/etc'), 'symlink']] as const) {
    const res = await as('profiles:write', '/profiles?name=p', { method: 'POST', headers: { 'content-type': 'application/zstd' }, body: zlib.zstdCompressSync(Buffer.concat([entry, Buffer.alloc(1024)])) });
    const body = (await res.json()) as { inner_error?: { code: string } };
    assert.equal(res.status, 422, JSON.stringify(body));
    assert.equal(body.inner_error?.code, code);
  }
  assert.deepEqual(await d.call('/profiles'), []);
});

test('telemetry:read cannot switch categories or post events', async () => {
  await expectError(await as('telemetry:read', '/telemetry', { method: 'PATCH', json: { browser: { console: { enabled: true } } } }), 403, 'forbidden');
  await expectError(await as('telemetry:read', '/telemetry/events', { method: 'POST', json: { type: 'x' } }), 403, 'forbidden');
});

test('proxies:read never reads a stored password', async () => {
  const p = await d.call<{ id: string }>('/proxies', { method: 'POST', json: { type: 'custom', name: 'sec', protocol: 'http', config: { host: '127.0.0.1', port: 9, username: 'u', password: PROXY_PASSWORD } } }, 201);
  const list = await (await as('proxies:read', '/proxies')).text();
  const one = await (await as('proxies:read', `/proxies/${p.id}`)).text();
  assert.ok(list.includes(p.id));
  assert.ok(!list.includes(PROXY_PASSWORD) && !one.includes(PROXY_PASSWORD));
  await expectError(await as('proxies:read', `/proxies/${p.id}`, { method: 'DELETE' }), 403, 'forbidden');
});

test('cdp and computer cannot change the browser\'s settings', async () => {
  for (const s of ['cdp', 'computer'] as const) {
    await expectError(await as(s, '/browsers/local/chromium/flags', { method: 'PATCH', json: { flags: ['--lang=de'] } }), 403, 'forbidden');
  }
});
