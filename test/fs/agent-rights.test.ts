// The files API acts with the agent user's rights (issue 23, docs/security.md), through the HTTP
// API of the real daemon (as root, its agent user `browser`): what that user may not read or
// write is 403 path_forbidden with inner_error permission_denied, and nothing changes on disk;
// what the API creates (files, folders, uploads, unpacked archives) is that user's; the state dir
// is still refused as the state dir (its own code, named before the agent's rights).
import assert from 'node:assert/strict';
import { chmodSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { expectError } from '../helpers/http.js';
import { buildZip } from '../helpers/zip.js';
import { agentIds, agentScratchDirs } from '../kit/agent.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';

const scratch = agentScratchDirs('browserd-fs-agent-');
const F = '/browsers/local/fs';
const q = (p: string): string => `?path=${encodeURIComponent(p)}`;

let d: Daemon;
before(async () => {
  d = await startDaemon();
});
after(() => d.cleanup());

const put = (route: string, body: unknown): Promise<Response> => d.fetch(`${F}/${route}`, { method: 'PUT', json: body });

async function denied(res: Response, what: RegExp): Promise<void> {
  const body = await expectError(res, 403, 'path_forbidden');
  const inner = body.inner_error as { code: string; message: string };
  assert.equal(inner.code, 'permission_denied', JSON.stringify(body));
  assert.match(String(body.message), what);
  assert.match(String(body.message), /the agent user browser may not/);
  assert.equal(res.headers.get('x-should-retry'), 'false');
}

function zipForm(dest: string): FormData {
  const form = new FormData();
  form.append('dest_path', dest);
  form.append('zip_file', new Blob([buildZip([{ name: 'z.txt', data: 'z' }, { name: 'deep/er/y.txt', data: 'y' }])]), 'a.zip');
  return form;
}

test('what the agent user may not read or write is refused (403 permission_denied) and nothing changes', async () => {
  const dir = scratch();
  // Made by the test as root: a secret (0600), a public file (0644), a folder it may not write in (0755) and one it may not enter (0700).
  const secret = path.join(dir, 'secret.txt');
  writeFileSync(secret, 'root only');
  chmodSync(secret, 0o600);
  const open = path.join(dir, 'public.txt');
  writeFileSync(open, 'anyone may read');
  chmodSync(open, 0o644);
  const rootDir = path.join(dir, 'root-dir');
  mkdirSync(rootDir, { mode: 0o755 });
  writeFileSync(path.join(rootDir, 'inside.txt'), 'x');
  const closed = path.join(dir, 'closed');
  mkdirSync(closed, { mode: 0o700 });
  chmodSync(closed, 0o700);
  writeFileSync(path.join(closed, 'hidden.txt'), 'x');

  // Reading: the others' bits count for a file of root's.
  assert.equal(await (await d.fetch(`${F}/read_file${q(open)}`)).text(), 'anyone may read');
  await denied(await d.fetch(`${F}/read_file${q(secret)}`), /secret\.txt: .*may not read it/);
  await denied(await d.fetch(`${F}/list_files${q(closed)}`), /may not read it/);
  await denied(await d.fetch(`${F}/file_info${q(path.join(closed, 'hidden.txt'))}`), /may not enter .*closed/);
  await denied(await d.fetch(`${F}/download_dir_zip${q(closed)}`), /may not read it/);
  // An archive of a folder it may read leaves out what it may not read (the secret, the closed folder).
  const zip = Buffer.from(await (await d.fetch(`${F}/download_dir_zip${q(dir)}`)).arrayBuffer());
  assert.ok(zip.includes('public.txt') && zip.includes('root-dir/inside.txt'), 'what it may read is in');
  assert.ok(!zip.includes('secret.txt') && !zip.includes('closed/'), 'what it may not read is left out');

  // Writing: a file of root's, into a folder of root's, a folder in it, a delete, a move, an archive, a chmod.
  await denied(await d.fetch(`${F}/write_file${q(open)}`, { method: 'PUT', body: 'changed' }), /may not write it/);
  await denied(await d.fetch(`${F}/write_file${q(path.join(rootDir, 'new.txt'))}`, { method: 'PUT', body: 'new' }), /may not write in .*root-dir/);
  await denied(await put('create_directory', { path: path.join(rootDir, 'sub', 'deeper') }), /may not create a folder in .*root-dir/);
  await denied(await put('delete_file', { path: path.join(rootDir, 'inside.txt') }), /may not write in .*root-dir/);
  await denied(await put('delete_directory', { path: rootDir }), /may not empty .*root-dir/);
  await denied(await put('move', { src_path: path.join(rootDir, 'inside.txt'), dest_path: path.join(dir, 'moved.txt') }), /may not write in .*root-dir/);
  await denied(await d.fetch(`${F}/upload_zip`, { method: 'POST', body: zipForm(path.join(rootDir, 'unpacked')) }), /may not write in .*root-dir/);
  await denied(await d.fetch(`${F}/upload_zip`, { method: 'POST', body: zipForm(path.join(rootDir, 'a', 'b')) }), /may not create a folder in .*root-dir/);
  const upload = new FormData();
  upload.append('files[0][dest_path]', path.join(rootDir, 'up.txt'));
  upload.append('files[0][file]', new Blob(['up']), 'up.txt');
  await denied(await d.fetch(`${F}/upload`, { method: 'POST', body: upload }), /may not write in .*root-dir/);
  await denied(await put('set_file_permissions', { path: open, mode: '666' }), /may not change its permissions/);

  assert.equal(readFileSync(open, 'utf8'), 'anyone may read');
  assert.equal(statSync(open).mode & 0o777, 0o644);
  assert.deepEqual(readdirSync(rootDir), ['inside.txt'], 'nothing made or removed in the folder of root');
  assert.equal(existsSync(path.join(dir, 'moved.txt')), false);

  // The state dir stays refused as the state dir (inner_error state_dir), not merely as a folder the agent user cannot enter.
  const token = path.join(d.stateDir, 'token');
  for (const res of [
    await d.fetch(`${F}/read_file${q(token)}`),
    await d.fetch(`${F}/list_files${q(d.stateDir)}`),
    await d.fetch(`${F}/write_file${q(path.join(d.stateDir, 'new.txt'))}`, { method: 'PUT', body: 'x' }),
    await put('create_directory', { path: path.join(d.stateDir, 'new-dir') }),
  ]) {
    const body = await expectError(res, 403, 'path_forbidden');
    assert.equal((body.inner_error as { code: string }).code, 'state_dir', JSON.stringify(body));
  }
  assert.equal(existsSync(path.join(d.stateDir, 'new.txt')), false);
  assert.equal(existsSync(path.join(d.stateDir, 'new-dir')), false);
});

test('chown through the API: of the agent user\'s own files, to itself and its groups only', async () => {
  const dir = scratch();
  const file = path.join(dir, 'mine.txt');
  assert.equal((await d.fetch(`${F}/write_file${q(file)}`, { method: 'PUT', body: 'mine' })).status, 204);
  await denied(await put('set_file_permissions', { path: file, mode: '644', owner: 'nobody' }), /may not give it away/);
  await denied(await put('set_file_permissions', { path: file, mode: '644', group: '0' }), /may not give it away/);
  assert.equal(statSync(file).uid, agentIds().uid);
  assert.equal((await put('set_file_permissions', { path: file, mode: '600', owner: 'browser', group: String(agentIds().gid) })).status, 204);
  assert.equal(statSync(file).mode & 0o777, 0o600);
});

test('what the API creates is the agent user\'s: files, folders on the way, uploads, unpacked archives', async () => {
  const dir = scratch();
  const { uid, gid } = agentIds();
  const owned = (p: string): void => {
    const st = lstatSync(p);
    assert.deepEqual([st.uid, st.gid], [uid, gid], `${p} is the agent user's`);
  };
  const file = path.join(dir, 'a', 'b', 'c.txt');
  assert.equal((await d.fetch(`${F}/write_file${q(file)}`, { method: 'PUT', body: 'c' })).status, 204);
  for (const p of [path.join(dir, 'a'), path.join(dir, 'a', 'b'), file]) owned(p);
  // Overwriting keeps it the agent's (the new version is a new inode).
  assert.equal((await d.fetch(`${F}/write_file${q(file)}`, { method: 'PUT', body: 'c2' })).status, 204);
  owned(file);

  assert.equal((await put('create_directory', { path: path.join(dir, 'm', 'n') })).status, 204);
  owned(path.join(dir, 'm'));
  owned(path.join(dir, 'm', 'n'));

  const upload = new FormData();
  upload.append('files[0][dest_path]', path.join(dir, 'up', 'u.txt'));
  upload.append('files[0][file]', new Blob(['u']), 'u.txt');
  assert.equal((await d.fetch(`${F}/upload`, { method: 'POST', body: upload })).status, 204);
  owned(path.join(dir, 'up'));
  owned(path.join(dir, 'up', 'u.txt'));

  // An archive into a new folder (renamed into place), into new folders on the way, and merged into an existing one.
  for (const dest of [path.join(dir, 'z1'), path.join(dir, 'z2', 'inner'), path.join(dir, 'a')]) {
    assert.equal((await d.fetch(`${F}/upload_zip`, { method: 'POST', body: zipForm(dest) })).status, 204, dest);
    for (const p of [dest, path.join(dest, 'z.txt'), path.join(dest, 'deep'), path.join(dest, 'deep', 'er'), path.join(dest, 'deep', 'er', 'y.txt')]) owned(p);
  }
  owned(path.join(dir, 'z2'));
});
