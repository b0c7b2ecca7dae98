// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// Unit tests of the files API's pieces that need no daemon: the zip writer's streamed and zip64
// forms (read back by yauzl with every check on), Range parsing, modes, the guard's rules, and
// the resolver's anchoring (an operation lands where the path was resolved, even when a folder on
// the way is swapped for a symlink into the state dir afterwards).
import assert from 'node:assert/strict';
import { createReadStream, existsSync, lstatSync, mkdirSync, readFileSync, renameSync, symlinkSync, writeFileSync, type Stats } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import yauzl from 'yauzl';
import { BadRequestError, RangeNotSatisfiableError } from '../../daemon/core/errors.js';
import { textBefore } from '../../daemon/core/multipart/pairs.js';
import { ZipWriter } from '../../daemon/core/zip/write.js';
import { modeString } from '../../daemon/fs/read/entries.js';
import { Guard } from '../../daemon/fs/paths/guard.js';
import { parseMode, parseOwner } from '../../daemon/fs/paths/owners.js';
import { resolve } from '../../daemon/fs/paths/resolve.js';
import { parseRange } from '../../daemon/fs/read/send.js';
import { writeAtomic } from '../../daemon/fs/write/write.js';
import { scratchDirs } from '../kit/cleanup.js';

const scratch = scratchDirs('browserd-fs-units-');

/** Every entry of a zip in memory: name → content (folders: null), read by yauzl with size and CRC checks. */
async function unzipAll(zip: Buffer): Promise<Map<string, Buffer | null>> {
  const z = await yauzl.fromBufferPromise(zip, { lazyEntries: true, validateEntrySizes: true });
  const out = new Map<string, Buffer | null>();
  for await (const e of z.eachEntry()) {
    if (e.fileName.endsWith('/')) {
      out.set(e.fileName, null);
      continue;
    }
    const chunks: Buffer[] = [];
    for await (const c of await z.openReadStreamPromise(e)) chunks.push(c as Buffer);
    out.set(e.fileName, Buffer.concat(chunks));
  }
  z.close();
  return out;
}

function memorySink(): { chunks: Buffer[]; write: (c: Buffer) => Promise<void> } {
  const chunks: Buffer[] = [];
  return { chunks, write: async (c) => void chunks.push(c) };
}

test('zip writer: buffered and streamed entries, folders, modes and times round-trip', async () => {
  const sink = memorySink();
  const zip = new ZipWriter(sink);
  const mtime = new Date('2024-05-06T07:08:10Z');
  await zip.addDirectory('dir/', { mode: 0o750, mtime });
  await zip.addBuffer('dir/small.txt', Buffer.from('small'), { mode: 0o600, mtime });
  const big = Buffer.alloc(3 * 1024 * 1024, 'abc');
  await zip.addStream('big.bin', Readable.from([big.subarray(0, 1000), big.subarray(1000)]), big.length, { mtime });
  await zip.addBuffer('empty', Buffer.alloc(0));
  await zip.finish();
  const all = Buffer.concat(sink.chunks);
  assert.equal(zip.bytes, all.length);
  const entries = await unzipAll(all);
  assert.deepEqual([...entries.keys()], ['dir/', 'dir/small.txt', 'big.bin', 'empty']);
  assert.equal(entries.get('dir/small.txt')?.toString(), 'small');
  assert.deepEqual(entries.get('big.bin'), big);
  assert.equal(entries.get('empty')?.length, 0);
  const z = await yauzl.fromBufferPromise(all, { lazyEntries: true });
  for await (const e of z.eachEntry()) {
    if (e.fileName === 'dir/small.txt') {
      assert.equal((e.externalFileAttributes >>> 16) & 0o7777, 0o600);
      assert.equal(e.getLastModDate({ forceDosFormat: false }).toISOString(), '2024-05-06T07:08:10.000Z');
    }
    if (e.fileName === 'dir/') assert.equal((e.externalFileAttributes >>> 16) & 0o170777, 0o040750);
  }
  z.close();
});

test('zip writer: zip64 end records past 65,535 entries', async () => {
  const sink = memorySink();
  const zip = new ZipWriter(sink);
  for (let i = 0; i < 70_000; i++) await zip.addBuffer(`f${i}`, Buffer.from(String(i)));
  await zip.finish();
  const all = Buffer.concat(sink.chunks);
  const z = await yauzl.fromBufferPromise(all, { lazyEntries: true });
  assert.equal(z.entryCount, 70_000);
  let last = '';
  for await (const e of z.eachEntry()) last = e.fileName;
  assert.equal(last, 'f69999');
  z.close();
});

test('Range: single ranges, ignored ones, unsatisfiable ones', () => {
  assert.equal(parseRange(undefined, 100), null);
  assert.deepEqual(parseRange('bytes=0-9', 100), { start: 0, end: 9 });
  assert.deepEqual(parseRange('bytes=90-', 100), { start: 90, end: 99 });
  assert.deepEqual(parseRange('bytes=-10', 100), { start: 90, end: 99 });
  assert.deepEqual(parseRange('bytes=-1000', 100), { start: 0, end: 99 });
  assert.deepEqual(parseRange('bytes=50-1000', 100), { start: 50, end: 99 });
  for (const ignored of ['bytes=0-1,3-4', 'items=0-1', 'bytes=5-2', 'bytes=-', 'garbage']) assert.equal(parseRange(ignored, 100), null, ignored);
  for (const bad of ['bytes=100-', 'bytes=-0', 'bytes=200-300']) assert.throws(() => parseRange(bad, 100), RangeNotSatisfiableError, bad);
  assert.throws(() => parseRange('bytes=-5', 0), RangeNotSatisfiableError);
});

test('modes: ls -l text, octal input, no setuid', () => {
  const dir = scratch();
  writeFileSync(path.join(dir, 'f'), '');
  symlinkSync('f', path.join(dir, 'l'));
  assert.equal(modeString(lstatSync(dir)).slice(0, 1), 'd');
  assert.equal(modeString(lstatSync(path.join(dir, 'l'))), 'lrwxrwxrwx');
  const base = lstatSync(path.join(dir, 'f')) as Stats;
  const fake = (mode: number): Stats => Object.assign(Object.create(Object.getPrototypeOf(base) as object) as Stats, base, { mode });
  assert.equal(modeString(fake(0o100644)), '-rw-r--r--');
  assert.equal(modeString(fake(0o104755)), '-rwsr-xr-x');
  assert.equal(modeString(fake(0o101644)), '-rw-r--r-T');
  assert.equal(parseMode('mode', '644', 0), 0o644);
  assert.equal(parseMode('mode', '0755', 0), 0o755);
  assert.equal(parseMode('mode', undefined, 0o600), 0o600);
  assert.equal(parseMode('mode', '1777', 0), 0o1777);
  for (const bad of ['4755', '2755', '888', '7', 'rwx', '07777']) assert.throws(() => parseMode('mode', bad, 0), BadRequestError, bad);
});

test('owners: ids, names from the files, unknown names', async () => {
  const dir = scratch();
  writeFileSync(path.join(dir, 'passwd'), 'root:x:0:0::/root:/bin/sh\nalice:x:1234:1234::/home/alice:/bin/sh\n');
  writeFileSync(path.join(dir, 'group'), 'root:x:0:\nstaff:x:50:\n');
  const files = { passwd: path.join(dir, 'passwd'), group: path.join(dir, 'group') };
  assert.equal(await parseOwner('owner', 'alice', files), 1234);
  assert.equal(await parseOwner('group', 'staff', files), 50);
  assert.equal(await parseOwner('owner', '42', files), 42);
  assert.equal(await parseOwner('owner', undefined, files), -1);
  await assert.rejects(parseOwner('owner', 'bob', files), BadRequestError);
  await assert.rejects(parseOwner('group', 'bad name!', files), BadRequestError);
});

test('guard: the rules by real path, trees that hold a protected path', () => {
  const g = new Guard({ stateDir: '/var/lib/browserd', keysFile: '/etc/browserd/keys.json', providersFile: null });
  assert.equal(g.ruleOf('/var/lib/browserd'), 'state_dir');
  assert.equal(g.ruleOf('/var/lib/browserd/token'), 'state_dir');
  assert.equal(g.ruleOf('/var/lib/browserd-downloads/x'), null);
  assert.equal(g.ruleOf('/proc'), 'special_filesystem');
  assert.equal(g.ruleOf('/sys/x'), 'special_filesystem');
  assert.equal(g.ruleOf('/dev/null'), 'special_filesystem');
  assert.equal(g.ruleOf('/devices'), null);
  assert.equal(g.ruleOf('/etc/browserd/keys.json'), 'protected_file');
  assert.equal(g.treeRule('/var/lib'), 'state_dir');
  assert.equal(g.treeRule('/'), 'state_dir');
  assert.equal(g.treeRule('/etc'), 'protected_file');
  assert.equal(g.treeRule('/home'), null);
});

test('resolver: an operation lands where the path was resolved, even if a folder on the way is swapped for a symlink', async () => {
  const dir = scratch();
  const state = path.join(dir, 'state');
  mkdirSync(state);
  mkdirSync(path.join(dir, 'work'));
  const guard = new Guard({ stateDir: state, keysFile: null, providersFile: null });
  const t = await resolve(guard, path.join(dir, 'work', 'out.txt'), { follow: true, allowMissing: true });
  try {
    // The attack: between the check and the write, `work` becomes a symlink into the state dir.
    renameSync(path.join(dir, 'work'), path.join(dir, 'work-moved'));
    symlinkSync(state, path.join(dir, 'work'));
    await writeAtomic(t, createReadStream(__filenameOf()), 0o644, null);
  } finally {
    await t.release();
  }
  assert.equal(existsSync(path.join(state, 'out.txt')), false, 'nothing reached the state dir');
  assert.ok(existsSync(path.join(dir, 'work-moved', 'out.txt')), 'the file went to the folder that was checked');
});

test('resolver: `..` goes to the parent of the folder actually reached (a symlink first), as the kernel does', async () => {
  const dir = scratch();
  mkdirSync(path.join(dir, 'real', 'inner'), { recursive: true });
  writeFileSync(path.join(dir, 'real', 'target.txt'), 't');
  symlinkSync(path.join(dir, 'real', 'inner'), path.join(dir, 'link'));
  const guard = new Guard({ stateDir: path.join(dir, 'state'), keysFile: null, providersFile: null });
  const t = await resolve(guard, `${dir}/link/../target.txt`, { follow: true });
  try {
    assert.equal(t.real, path.join(dir, 'real', 'target.txt'));
    assert.equal(readFileSync(path.join(dir, 'real', 'target.txt'), 'utf8'), 't');
  } finally {
    await t.release();
  }
});

test('multipart: the text sent before a file part, by index or by order', () => {
  const spec = { list: 'files', text: 'dest_path', file: 'file' };
  const f = (fieldName: string, value?: string) => (value === undefined ? { fieldName, kind: 'file' as const } : { fieldName, kind: 'field' as const, value });
  assert.equal(textBefore([f('files[1][dest_path]', '/b'), f('files[0][dest_path]', '/a'), f('files[0][file]')], spec), '/a');
  assert.equal(textBefore([f('files[0][file]')], spec), null);
  assert.equal(textBefore([f('files.dest_path', '/a'), f('files.file'), f('files.dest_path', '/b'), f('files.file')], spec), '/b');
  assert.equal(textBefore([f('files[][dest_path]', '/a'), f('files[][file]'), f('files[][file]')], spec), null);
});

function __filenameOf(): string {
  return new URL(import.meta.url).pathname;
}
