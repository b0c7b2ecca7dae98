// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The profile store: project keys see only their project's profiles (others are 404, lists are
// filtered), names are unique per project, pages as the SDK reads them, scopes; what a 201
// acknowledged survives kill -9 of the daemon.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { once } from 'node:events';
import { tempDir } from '../kit/cleanup.js';
import { keysFile, startDaemon, type Daemon } from '../kit/daemon.js';

const ADMIN = 'admin-token-aaaaaaaaaaaaaaaaaaaa';
const P1 = 'project1-token-bbbbbbbbbbbbbbbbbb';
const P2 = 'project2-token-cccccccccccccccccc';
const READER = 'reader-token-dddddddddddddddddddd';
const RW = ['profiles:read', 'profiles:write'];
const keys = keysFile([
  { id: 'admin', token: ADMIN, scopes: RW },
  { id: 'p1', token: P1, scopes: RW, project: 'p1' },
  { id: 'p2', token: P2, scopes: RW, project: 'p2' },
  { id: 'reader', token: READER, scopes: ['profiles:read'] },
]);
const stateDir = tempDir('browserd-profiles-store-');
let d: Daemon;

before(async () => {
  d = await startDaemon({ token: null, stateDir, env: { BROWSERD_KEYS_FILE: keys } });
});
after(() => d.cleanup());

const as = (token: string, init: RequestInit & { json?: unknown } = {}): RequestInit & { json?: unknown } => ({ ...init, headers: { authorization: `Bearer ${token}` } });
const create = async (token: string, name: string): Promise<Response> => d.fetch('/profiles', as(token, { method: 'POST', json: { name } }));

test('project keys see only their project\'s profiles; names are unique per project; scopes; pages', async () => {
  const mine = (await (await create(P1, 'login')).json()) as { id: string; name: string };
  assert.equal(mine.name, 'login');
  assert.equal((await create(P2, 'login')).status, 201, 'the same name in another project');
  const dup = await create(P1, 'login');
  assert.equal(dup.status, 409);
  assert.equal(((await dup.json()) as { code: string }).code, 'already_exists');
  assert.equal((await d.fetch(`/profiles/${mine.id}`, as(P2))).status, 404, 'another project\'s profile is not found');
  assert.equal((await d.fetch(`/profiles/${mine.id}/download`, as(P2))).status, 404);
  assert.equal((await d.fetch(`/profiles/${mine.id}`, as(P2, { method: 'DELETE' }))).status, 404);
  const p2List = (await (await d.fetch('/profiles', as(P2))).json()) as { name: string }[];
  assert.deepEqual(p2List.map((p) => p.name), ['login']);
  const all = await d.fetch('/profiles?limit=1', as(ADMIN));
  assert.equal(all.headers.get('x-has-more'), 'true');
  assert.equal(all.headers.get('x-next-offset'), '1');
  assert.equal(((await all.json()) as unknown[]).length, 1);
  assert.equal((await d.fetch('/profiles', as(READER, { method: 'POST', json: { name: 'x' } }))).status, 403, 'profiles:write is needed');
  assert.equal((await d.fetch('/profiles/login', as(P1))).status, 200, 'by name');
  const renamed = await d.fetch('/profiles/login', as(P1, { method: 'PATCH', json: { name: 'shop' } }));
  assert.equal(((await renamed.json()) as { name: string }).name, 'shop');
});

test('a created profile survives kill -9 of the daemon', async () => {
  const res = await create(ADMIN, 'kept');
  assert.equal(res.status, 201);
  const { id } = (await res.json()) as { id: string };
  d.proc.kill('SIGKILL');
  await once(d.proc, 'exit');
  d = await startDaemon({ token: null, stateDir, env: { BROWSERD_KEYS_FILE: keys } });
  const got = await d.fetch(`/profiles/${id}`, as(ADMIN));
  assert.equal(got.status, 200);
  assert.equal(((await got.json()) as { name: string }).name, 'kept');
});
