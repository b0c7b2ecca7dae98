// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// Every files route through the official SDK (@onkernel/sdk 0.84, `client.browsers.fs`), against
// the real daemon: the shapes the SDK declares, and its error classes for the contract's errors.
import assert from 'node:assert/strict';
import { existsSync, lstatSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ConflictError, NotFoundError, PermissionDeniedError, toFile } from '@onkernel/sdk';
import { safeUnzip } from '../../daemon/core/zip/unzip.js';
import { kernel } from '../helpers/fs.js';
import { buildZip } from '../helpers/zip.js';
import { AGENT_USER, agentIds, agentScratchDirs, giveToAgent } from '../kit/agent.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';

let d: Daemon;
let fs: ReturnType<typeof kernel>['browsers']['fs'];
const scratch = agentScratchDirs('browserd-fs-sdk-');
const ID = 'local';

before(async () => {
  d = await startDaemon();
  fs = kernel(d).browsers.fs;
});
after(() => d.cleanup());

test('write_file, read_file, file_info and list_files', async () => {
  const dir = scratch();
  const file = path.join(dir, 'new', 'folder', 'a.txt');
  await fs.writeFile(ID, 'hello', { path: file, mode: '600' });
  assert.equal(readFileSync(file, 'utf8'), 'hello');
  assert.equal(statSync(file).mode & 0o777, 0o600);
  assert.equal(statSync(path.join(dir, 'new')).mode & 0o777, 0o755, 'missing parents are created 0755');

  const res = await fs.readFile(ID, { path: file });
  assert.equal(await res.text(), 'hello');

  const info = await fs.fileInfo(ID, { path: file });
  assert.deepEqual({ ...info, mod_time: typeof info.mod_time }, { name: 'a.txt', path: file, is_dir: false, size_bytes: 5, mode: '-rw-------', mod_time: 'string' });
  assert.ok(!Number.isNaN(Date.parse(info.mod_time)));

  await fs.writeFile(ID, Buffer.from('second'), { path: file });
  assert.equal(readFileSync(file, 'utf8'), 'second');
  assert.equal(statSync(file).mode & 0o777, 0o644, 'the default mode is 644');

  const list = await fs.listFiles(ID, { path: path.join(dir, 'new', 'folder') });
  assert.deepEqual(list.map((e) => [e.name, e.path, e.is_dir, e.size_bytes, e.mode]), [['a.txt', file, false, 6, '-rw-r--r--']]);
  const top = await fs.listFiles(ID, { path: dir });
  assert.deepEqual(top.map((e) => [e.name, e.is_dir, e.size_bytes, e.mode]), [['new', true, 0, 'drwxr-xr-x']]);
});

test('create_directory, move, set_file_permissions, delete_file and delete_directory', async () => {
  const dir = scratch();
  await fs.createDirectory(ID, { path: path.join(dir, 'x', 'y', 'z'), mode: '750' });
  assert.equal(statSync(path.join(dir, 'x', 'y', 'z')).mode & 0o777, 0o750);
  await fs.createDirectory(ID, { path: path.join(dir, 'x', 'y', 'z') }); // mkdir -p: already there is fine

  writeFileSync(path.join(dir, 'x', 'f.txt'), 'f');
  await fs.move(ID, { src_path: path.join(dir, 'x', 'f.txt'), dest_path: path.join(dir, 'x', 'y', 'g.txt') });
  assert.equal(readFileSync(path.join(dir, 'x', 'y', 'g.txt'), 'utf8'), 'f');
  assert.equal(existsSync(path.join(dir, 'x', 'f.txt')), false);

  // The files API acts as the agent user: chmod and chown of its own files only (the test wrote this one as root), to itself and its groups.
  giveToAgent(path.join(dir, 'x', 'y', 'g.txt'));
  await fs.setFilePermissions(ID, { path: path.join(dir, 'x', 'y', 'g.txt'), mode: '0640', owner: AGENT_USER, group: String(agentIds().gid) });
  const st = statSync(path.join(dir, 'x', 'y', 'g.txt'));
  assert.equal(st.mode & 0o777, 0o640);
  assert.equal(st.uid, agentIds().uid);

  symlinkSync(path.join(dir, 'x', 'y', 'g.txt'), path.join(dir, 'link'));
  await fs.deleteFile(ID, { path: path.join(dir, 'link') });
  assert.equal(existsSync(path.join(dir, 'link')), false);
  assert.ok(existsSync(path.join(dir, 'x', 'y', 'g.txt')), 'deleting a symlink leaves its target');
  await fs.deleteFile(ID, { path: path.join(dir, 'x', 'y', 'g.txt') });

  await fs.deleteDirectory(ID, { path: path.join(dir, 'x') });
  assert.equal(existsSync(path.join(dir, 'x')), false);
});

test('upload several files, and upload_zip into a new folder', async () => {
  const dir = scratch();
  await fs.upload(ID, {
    files: [
      { dest_path: path.join(dir, 'one.txt'), file: await toFile(Buffer.from('one'), 'one.txt') },
      { dest_path: path.join(dir, 'deep', 'two.bin'), file: await toFile(Buffer.alloc(70_000, 7), 'two.bin') },
    ],
  });
  assert.equal(readFileSync(path.join(dir, 'one.txt'), 'utf8'), 'one');
  assert.deepEqual(readFileSync(path.join(dir, 'deep', 'two.bin')), Buffer.alloc(70_000, 7));
  assert.equal(statSync(path.join(dir, 'one.txt')).mode & 0o777, 0o644);

  const zip = buildZip([{ name: 'site/' }, { name: 'site/index.html', data: '<h1>hi</h1>' }, { name: 'cfg.json', data: '{"a":1}' }]);
  await fs.uploadZip(ID, { dest_path: path.join(dir, 'unpacked', 'here'), zip_file: await toFile(zip, 'a.zip') });
  assert.equal(readFileSync(path.join(dir, 'unpacked', 'here', 'site', 'index.html'), 'utf8'), '<h1>hi</h1>');
  assert.equal(readFileSync(path.join(dir, 'unpacked', 'here', 'cfg.json'), 'utf8'), '{"a":1}');
});

test('download_dir_zip: the folder comes back whole through the safe unzip', async () => {
  const dir = scratch();
  mkdirSync(path.join(dir, 'src', 'sub', 'empty'), { recursive: true });
  writeFileSync(path.join(dir, 'src', 'a.txt'), 'a'.repeat(10_000));
  writeFileSync(path.join(dir, 'src', 'sub', 'b.bin'), Buffer.alloc(2 * 1024 * 1024, 3)); // streamed (over 1 MiB)
  symlinkSync('/etc/passwd', path.join(dir, 'src', 'link'));
  const res = await fs.downloadDirZip(ID, { path: path.join(dir, 'src') });
  assert.equal(res.headers.get('content-type'), 'application/zip');
  const zipFile = path.join(dir, 'out.zip');
  writeFileSync(zipFile, Buffer.from(await res.arrayBuffer()));
  const out = path.join(dir, 'out');
  mkdirSync(out);
  await safeUnzip(zipFile, out, { maxEntries: 100, maxUnpackedBytes: 10 * 1024 * 1024 });
  assert.equal(readFileSync(path.join(out, 'a.txt'), 'utf8'), 'a'.repeat(10_000));
  assert.deepEqual(readFileSync(path.join(out, 'sub', 'b.bin')), Buffer.alloc(2 * 1024 * 1024, 3));
  assert.ok(statSync(path.join(out, 'sub', 'empty')).isDirectory(), 'empty folders are kept');
  assert.equal(existsSync(path.join(out, 'link')), false, 'symlinks are left out');
});

test('watch: start, events through the SDK stream, stop ends the stream', async () => {
  const dir = scratch();
  const { watch_id } = await fs.watch.start(ID, { path: dir, recursive: true });
  assert.equal(typeof watch_id, 'string');
  const stream = await fs.watch.events(watch_id as string, { id: ID });
  const seen: { type: string; path: string; is_dir?: boolean; name?: string }[] = [];
  const reading = (async () => {
    for await (const e of stream) {
      seen.push(e);
      if (e.type === 'CREATE' && e.path === path.join(dir, 'sub', 'f.txt')) break;
    }
  })();
  mkdirSync(path.join(dir, 'sub'));
  writeFileSync(path.join(dir, 'sub', 'f.txt'), 'x');
  await reading;
  assert.deepEqual(seen[0], { type: 'CREATE', path: path.join(dir, 'sub'), name: 'sub', is_dir: true });
  assert.deepEqual(seen.at(-1), { type: 'CREATE', path: path.join(dir, 'sub', 'f.txt'), name: 'f.txt', is_dir: false });

  const again = await fs.watch.events(watch_id as string, { id: ID });
  const ended = (async () => {
    const rest = [];
    for await (const e of again) rest.push(e);
    return rest;
  })();
  await fs.watch.stop(watch_id as string, { id: ID });
  await ended; // the stream ends once the watch is stopped
  await assert.rejects(fs.watch.stop(watch_id as string, { id: ID }), NotFoundError);
});

test("errors reach the SDK as its error classes, in the contract's shape", async () => {
  const dir = scratch();
  await assert.rejects(fs.readFile(ID, { path: path.join(d.stateDir, 'token') }), (err: unknown) => {
    assert.ok(err instanceof PermissionDeniedError);
    assert.deepEqual((err.error as { code: string; inner_error: { code: string } }).code, 'path_forbidden');
    assert.equal((err.error as { inner_error: { code: string } }).inner_error.code, 'state_dir');
    return true;
  });
  await assert.rejects(fs.fileInfo(ID, { path: path.join(dir, 'missing') }), NotFoundError);
  await assert.rejects(fs.readFile(ID, { path: dir }), (err: unknown) => err instanceof ConflictError && (err.error as { code: string }).code === 'is_a_directory');
  assert.ok(lstatSync(dir).isDirectory());
});

test("the downloads folder: named by its route, an ordinary path for the files API", async () => {
  const res = await d.fetch(`/browsers/${ID}/fs/downloads`);
  assert.equal(res.status, 200);
  const { path: downloads } = (await res.json()) as { path: string };
  assert.equal(downloads, `${d.stateDir}-downloads`);
  assert.equal(statSync(downloads).mode & 0o777, 0o700);
  writeFileSync(path.join(downloads, 'report.pdf'), 'pdf');
  const list = await fs.listFiles(ID, { path: downloads });
  assert.deepEqual(list.map((e) => e.name), ['report.pdf']);
  assert.equal(await (await fs.readFile(ID, { path: path.join(downloads, 'report.pdf') })).text(), 'pdf');
});
