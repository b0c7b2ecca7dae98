// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The root paths of the browser routes (issue 37): each route under /browsers/{id}/… is also served
// at the rest of its path, as the SDK calls the VM's base_url directly (`{base_url}/{rest}?jwt=…`,
// no Authorization header): the same handler, scope, errors and OpenAPI entry, bound to the daemon's
// session (a session token must name it; a key works there too).
import assert from 'node:assert/strict';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { SignJWT, type JWTPayload } from 'jose';
import { expectError } from '../helpers/http.js';
import { agentTempDir } from '../kit/agent.js';
import { tempDir } from '../kit/cleanup.js';
import { keysFile, startDaemon, type Daemon } from '../kit/daemon.js';

const cp = generateKeyPairSync('ed25519');
const jwksFile = path.join(tempDir('browserd-jwks-'), 'jwks.json');
writeFileSync(jwksFile, JSON.stringify({ keys: [{ ...(cp.publicKey.export({ format: 'jwk' }) as object), kid: 'cp' }] }));
const ADMIN = 'root-paths-admin-token-0123456789';
const READER = 'root-paths-reader-token-012345678';
const keys = keysFile([
  { id: 'admin', token: ADMIN, scopes: ['browser:read', 'processes:exec', 'fs:read', 'fs:write', 'telemetry:read', 'telemetry:write'] },
  { id: 'reader', token: READER, scopes: ['browser:read'] },
]);

let d: Daemon;
before(async () => {
  d = await startDaemon({ token: null, bearer: ADMIN, env: { BROWSERD_KEYS_FILE: keys, BROWSERD_JWT_KEYS_FILE: jwksFile } });
});
after(() => d.cleanup());

const now = (): number => Math.floor(Date.now() / 1000);
const sign = (claims: JWTPayload, key: KeyObject = cp.privateKey): Promise<string> =>
  new SignJWT({ aud: 'browserd', exp: now() + 300, iat: now(), ...claims }).setProtectedHeader({ alg: 'EdDSA', kid: 'cp' }).sign(key);
const exec = (at: string, init: RequestInit = {}): Promise<Response> =>
  fetch(`${d.url}${at}`, { method: 'POST', ...init, headers: { 'content-type': 'application/json', ...(init.headers as Record<string, string>) }, body: JSON.stringify({ command: 'echo', args: ['hi'] }) });

test('a browser route answers at its root path as under /browsers/{id}, with a key', async () => {
  for (const at of ['/browsers/local/process/exec', '/process/exec']) {
    const res = await exec(at, { headers: { authorization: `Bearer ${ADMIN}` } });
    assert.equal(res.status, 200, at);
    const body = (await res.json()) as { exit_code: number; stdout_b64: string };
    assert.equal(body.exit_code, 0);
    assert.equal(Buffer.from(body.stdout_b64, 'base64').toString(), 'hi\n');
  }
  // A write at one path is read at the other: the same files API, the same folder.
  const file = path.join(agentTempDir('browserd-root-'), 'a.txt');
  const put = await d.fetch(`/fs/write_file?path=${encodeURIComponent(file)}`, { method: 'PUT', body: 'root' });
  assert.equal(put.status, 204, await put.clone().text());
  const read = await d.fetch(`/browsers/local/fs/read_file?path=${encodeURIComponent(file)}`);
  assert.equal(await read.text(), 'root');
});

test('the SDK\'s way: ?jwt= naming the session and no Authorization header', async () => {
  const jwt = await sign({ sub: 'local', scope: 'processes:exec telemetry:read' });
  const res = await exec(`/process/exec?jwt=${jwt}`);
  assert.equal(res.status, 200, await res.clone().text());
  await res.text();
  const t = await d.fetch('/telemetry', { headers: {} });
  assert.equal(t.status, 200);
  await t.text();
  const viaJwt = await fetch(`${d.url}/telemetry?jwt=${jwt}`);
  assert.deepEqual(await viaJwt.json(), await (await d.fetch('/browsers/local/telemetry')).json());
});

test('a root path keeps the route\'s scope and errors', async () => {
  const noScope = await sign({ sub: 'local', scope: 'browser:read' });
  const denied = await expectError(await exec(`/process/exec?jwt=${noScope}`), 403, 'forbidden');
  assert.deepEqual(denied.details, [{ code: 'missing_scope', message: 'processes:exec' }]);
  await expectError(await exec('/process/exec', { headers: { authorization: `Bearer ${READER}` } }), 403, 'forbidden');
  await expectError(await exec('/process/exec'), 401, 'unauthorized');
  // The same validation: one detail per problem.
  const bad = await fetch(`${d.url}/process/exec`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' }, body: '{"args":[1]}' });
  const body = await expectError(bad, 400, 'bad_request');
  assert.ok(Array.isArray(body.details) && body.details.length >= 2, JSON.stringify(body));
  await expectError(await d.fetch('/process/nope/status'), 404, 'not_found');
});

test('a root path is bound to the daemon\'s session: a token of another session, or of none, is 401', async () => {
  const other = await sign({ sub: 'other', scope: 'processes:exec' });
  const e1 = await expectError(await exec(`/process/exec?jwt=${other}`), 401, 'unauthorized');
  assert.match(String(e1.message), /session "other", not this daemon's "local"/);
  const none = await sign({ scope: 'processes:exec' });
  await expectError(await exec(`/process/exec?jwt=${none}`), 401, 'unauthorized');
});

test('a path that is neither a route nor a browser route\'s root path is still 404 no route', async () => {
  const err = await expectError(await d.fetch('/nope/exec', { method: 'POST' }), 404, 'not_found');
  assert.match(String(err.message), /no route/);
  // The record itself (GET /browsers/{id}) has no root path: `/` is no route.
  await expectError(await d.fetch('/'), 404, 'not_found');
});

test('the OpenAPI document has each root path, marked with the route it serves', async () => {
  const doc = (await (await fetch(`${d.url}/openapi.json`)).json()) as { paths: Record<string, Record<string, { operationId: string; summary: string; 'x-root-of'?: string; 'x-scope': string; parameters: { name: string }[] }>> };
  const root = doc.paths['/process/exec']?.post;
  const full = doc.paths['/browsers/{id}/process/exec']?.post;
  assert.ok(root !== undefined && full !== undefined);
  assert.equal(root['x-root-of'], '/browsers/{id}/process/exec');
  assert.equal(full['x-root-of'], undefined);
  assert.equal(root.summary, full.summary);
  assert.equal(root['x-scope'], full['x-scope']);
  assert.ok(!root.parameters.some((p) => p.name === 'id'), 'no {id} at the root');
  assert.notEqual(root.operationId, full.operationId);
  for (const [p, ops] of Object.entries(doc.paths)) {
    if (!p.startsWith('/browsers/{id}/')) continue;
    for (const m of Object.keys(ops)) assert.ok(doc.paths[p.slice('/browsers/{id}'.length)]?.[m] !== undefined, `${m.toUpperCase()} ${p} has its root path`);
  }
});
