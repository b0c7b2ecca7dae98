// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The 401/403 matrix, whoami, project-scoped keys and SIGHUP reload, through the real daemon.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { expectError } from '../helpers/http.js';
import { keysFile, startDaemon, type ApiKey, type Daemon } from '../kit/daemon.js';

const READER = 'reader-token-aaaaaaaaaaaaaaaa';
const NOSCOPE = 'noscope-token-bbbbbbbbbbbbbbbb';
const OTHER_PROJECT = 'project-token-cccccccccccccccc';
const SAME_PROJECT = 'project-token-dddddddddddddddd';
const LATER = 'later-token-eeeeeeeeeeeeeeeeeeee';
const OTHER_FETCH = 'project-fetch-token-ffffffffffff';

const keys: ApiKey[] = [
  { id: 'reader', token: READER, scopes: ['browser:read'] },
  { id: 'noscope', token: NOSCOPE, scopes: [] },
  { id: 'other', token: OTHER_PROJECT, scopes: ['browser:read', 'proxies:read'], project: 'p2' },
  { id: 'same', token: SAME_PROJECT, scopes: ['browser:read'], project: 'p1' },
  { id: 'other-fetch', token: OTHER_FETCH, scopes: ['browser:fetch'], project: 'p2' },
];
const file = keysFile(keys);
let d: Daemon;

before(async () => {
  d = await startDaemon({ token: null, env: { BROWSERD_KEYS_FILE: file, BROWSERD_PROJECT_ID: 'p1' } });
});
after(() => d.cleanup());

const as = (token: string | null, extra: Record<string, string> = {}): RequestInit => ({
  headers: token === null ? extra : { authorization: `Bearer ${token}`, ...extra },
});

test('no Authorization header: 401', async () => {
  await expectError(await d.fetch('/browsers/local', as(null)), 401, 'unauthorized');
});

test('Basic auth: 401', async () => {
  await expectError(await d.fetch('/browsers/local', { headers: { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` } }), 401, 'unauthorized');
});

test('empty bearer: 401', async () => {
  await expectError(await d.fetch('/browsers/local', { headers: { authorization: 'Bearer ' } }), 401, 'unauthorized');
});

test('unknown token: 401', async () => {
  await expectError(await d.fetch('/browsers/local', as('not-a-known-token-at-all')), 401, 'unauthorized');
});

test('valid token without the scope: 403 naming the scope', async () => {
  const body = await expectError(await d.fetch('/browsers/local', as(NOSCOPE)), 403, 'forbidden');
  assert.deepEqual(body.details, [{ code: 'missing_scope', message: 'browser:read' }]);
  await expectError(await d.fetch('/metrics', as(NOSCOPE)), 403, 'forbidden');
});

test('valid token with the scope: 200', async () => {
  const res = await d.fetch('/browsers/local', as(READER));
  assert.equal(res.status, 200);
  assert.equal(((await res.json()) as { id: string }).id, 'local');
});

test('another session id: 404', async () => {
  await expectError(await d.fetch('/browsers/other', as(READER)), 404, 'not_found');
});

test('project-scoped key of another project does not see the browser: 404', async () => {
  await expectError(await d.fetch('/browsers/local', as(OTHER_PROJECT)), 404, 'not_found');
  const res = await d.fetch('/browsers/local', as(SAME_PROJECT));
  assert.equal(res.status, 200);
  await res.text();
});

test('whoami shows the key, its scopes and project', async () => {
  const res = await d.fetch('/whoami', as(OTHER_PROJECT));
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { key_id: 'other', scopes: ['browser:read', 'proxies:read'], project: 'p2' });
  await expectError(await d.fetch('/whoami', as(null)), 401, 'unauthorized');
});

test('public routes need no token', async () => {
  const res = await d.fetch('/healthz', as(null));
  assert.deepEqual(await res.json(), { status: 'ok' });
  await expectError(await d.fetch('/readyz', as(null)), 503, 'browser_unavailable');
});

test('no token is ever logged', async () => {
  const all = JSON.stringify(d.logs);
  for (const t of [READER, NOSCOPE, OTHER_PROJECT]) assert.ok(!all.includes(t));
  assert.ok(d.logs.some((l) => l.event === 'request' && l.key_id === 'reader'));
});

test('SIGHUP re-reads the keys file; a broken file keeps the old keys', async () => {
  await expectError(await d.fetch('/whoami', as(LATER)), 401, 'unauthorized');
  keysFile([...keys, { id: 'later', token: LATER, scopes: ['cdp'] }], file);
  const seen = d.logs.length;
  d.proc.kill('SIGHUP');
  await d.waitLog((l) => l.event === 'keys_reload' && d.logs.indexOf(l) >= seen);
  const res = await d.fetch('/whoami', as(LATER));
  assert.equal(res.status, 200);
  await res.text();

  writeFileSync(file, '[{"id": broken');
  const seen2 = d.logs.length;
  d.proc.kill('SIGHUP');
  const line = await d.waitLog((l) => l.event === 'keys_reload' && d.logs.indexOf(l) >= seen2);
  assert.equal(line.outcome, 'kept_old');
  assert.match(String(line.reason), /JSON/);
  const still = await d.fetch('/whoami', as(LATER));
  assert.equal(still.status, 200, 'old keys stay in force');
  await still.text();
});

test('a key of another project cannot make requests through the browser: 404 on /curl and /curl/raw', async () => {
  await expectError(await d.fetch('/curl', { method: 'POST', headers: { authorization: `Bearer ${OTHER_FETCH}`, 'content-type': 'application/json' }, body: '{"url":"http://127.0.0.1:9/"}' }), 404, 'not_found');
  await expectError(await d.fetch('/curl/raw?url=http%3A%2F%2F127.0.0.1%3A9%2F', as(OTHER_FETCH)), 404, 'not_found');
});
