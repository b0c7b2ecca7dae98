// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// Hostile profile archives: each refused with its inner_error.code, nothing written (no profile, no
// file in the archive folder, no staging folder); an archive made by GNU tar is taken, and what a
// profile leaves out (caches, locks) is dropped from it. The limits on a smaller scale through the
// safe-unpack itself.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, before, test } from 'node:test';
import zlib from 'node:zlib';
import { PayloadTooLargeError } from '../../daemon/core/errors.js';
import { safeUntar } from '../../daemon/core/zip/tar.js';
import { ArchiveError } from '../../daemon/core/zip/unzip.js';
import { scratchDirs } from '../kit/cleanup.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';

let d: Daemon;
const scratch = scratchDirs('browserd-profiles-tar-');

before(async () => {
  d = await startDaemon();
});
after(() => d.cleanup());

interface Entry {
  name: string;
  type?: string;
  body?: Buffer;
  /** The size the header declares (default: the body's). */
  size?: number;
  link?: string;
}

/** A tar built byte by byte here (not by the daemon's writer), so that it can lie. */
function tar(entries: Entry[]): Buffer {
  const parts: Buffer[] = [];
  for (const e of entries) {
    const body = e.body ?? Buffer.alloc(0);
    const h = Buffer.alloc(512);
    h.write(e.name, 0, 100, 'utf8');
    h.write('0000644\0', 100, 'ascii');
    h.write('0000000\0', 108, 'ascii');
    h.write('0000000\0', 116, 'ascii');
    h.write(`${(e.size ?? body.length).toString(8).padStart(11, '0')}\0`, 124, 'ascii');
    h.write('00000000000\0', 136, 'ascii');
    h.fill(0x20, 148, 156);
    h.write(e.type ?? '0', 156, 'ascii');
    if (e.link !== undefined) h.write(e.link, 157, 100, 'utf8');
    h.write('ustar\0', 257, 'ascii');
    h.write('00', 263, 'ascii');
    let sum = 0;
    for (const b of h) sum += b;
    h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'ascii');
    parts.push(h, body, Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  parts.push(Buffer.alloc(1024));
  return Buffer.concat(parts);
}

const upload = (body: Buffer, name = 'x'): Promise<Response> =>
  d.fetch(`/profiles?name=${name}`, { method: 'POST', headers: { 'content-type': 'application/zstd' }, body });

function nothingWritten(): void {
  assert.deepEqual(readdirSync(path.join(d.stateDir, 'profiles')), [], 'no file in the archive folder');
  assert.deepEqual(readdirSync(d.stateDir).filter((n) => n.startsWith('.profile-staging-')), [], 'no staging folder left');
}

const hostile: [string, Buffer, string][] = [
  ['a path leaving the root', zlib.zstdCompressSync(tar([{ name: '../evil', body: Buffer.from('x') }])), 'zip_slip'],
  ['an absolute path', zlib.zstdCompressSync(tar([{ name: '/tmp/evil', body: Buffer.from('x') }])), 'zip_slip'],
  ['a symbolic link out of the root', zlib.zstdCompressSync(tar([{ name: 'Default', type: '5' }, { name: 'Default/link', type: '2', link: '/etc' }])), 'symlink'],
  ['a hard link', zlib.zstdCompressSync(tar([{ name: 'a', body: Buffer.from('x') }, { name: 'b', type: '1', link: '/etc/passwd' }])), 'hardlink'],
  ['a character device', zlib.zstdCompressSync(tar([{ name: 'dev', type: '3' }])), 'special_file'],
  ['a fifo', zlib.zstdCompressSync(tar([{ name: 'fifo', type: '6' }])), 'special_file'],
  ['an entry twice', zlib.zstdCompressSync(tar([{ name: 'a', body: Buffer.from('1') }, { name: './a', body: Buffer.from('2') }])), 'duplicate_entry'],
  ['a backslash in a name', zlib.zstdCompressSync(tar([{ name: 'a\\..\\b', body: Buffer.from('1') }])), 'bad_entry_name'],
  ['an entry shorter than its header says', zlib.zstdCompressSync(tar([{ name: 'a', body: Buffer.from('x'), size: 100_000 }]).subarray(0, 1024)), 'size_mismatch'],
  ['zstd data that is not a tar', zlib.zstdCompressSync(Buffer.alloc(2048, 7)), 'bad_tar'],
  ['a body that is not zstd', tar([{ name: 'a', body: Buffer.from('x') }]), 'bad_zstd'],
  // Names made of the zstd decoder's error texts: the cause is the entry's, told by type, never by a message's words.
  ['a path leaving the root named ../zstd', zlib.zstdCompressSync(tar([{ name: '../zstd', body: Buffer.from('x') }])), 'zip_slip'],
  ['a symbolic link named zstd-error', zlib.zstdCompressSync(tar([{ name: 'zstd-error', type: '2', link: '/etc' }])), 'symlink'],
  ['a fifo named Unknown frame descriptor', zlib.zstdCompressSync(tar([{ name: 'Unknown frame descriptor', type: '6' }])), 'special_file'],
  ['a hard link named Data corruption detected', zlib.zstdCompressSync(tar([{ name: 'Data corruption detected', type: '1', link: 'x' }])), 'hardlink'],
];

for (const [what, body, code] of hostile) {
  test(`an uploaded profile archive with ${what} is refused: 422 archive_rejected, inner_error.code ${code}, nothing written`, async () => {
    const res = await upload(body);
    const answer = (await res.json()) as { code: string; inner_error?: { code: string } };
    assert.equal(res.status, 422, JSON.stringify(answer));
    assert.equal(answer.code, 'archive_rejected');
    assert.equal(answer.inner_error?.code, code, JSON.stringify(answer));
    assert.deepEqual(await (await d.fetch('/profiles')).json(), [], 'no profile was created');
    nothingWritten();
  });
}

test('an archive made by GNU tar is taken; caches and locks are dropped from it', async () => {
  const src = scratch();
  mkdirSync(path.join(src, 'Default', 'Cache', 'Cache_Data'), { recursive: true });
  writeFileSync(path.join(src, 'Default', 'Cache', 'Cache_Data', 'data_0'), 'cache');
  writeFileSync(path.join(src, 'Default', 'Preferences'), '{}');
  writeFileSync(path.join(src, 'SingletonCookie'), '1');
  const archive = execFileSync('tar', ['--zstd', '-C', src, '-cf', '-', '.']);
  const res = await upload(archive, 'gnu');
  assert.equal(res.status, 201, await res.clone().text());
  const dl = Buffer.from(await (await d.fetch('/profiles/gnu/download?format=tar')).arrayBuffer());
  const names = execFileSync('tar', ['-tf', '-'], { input: dl }).toString().split('\n').filter((n) => n !== '');
  assert.deepEqual(names, ['Default/', 'Default/Preferences']);
  const del = await d.fetch('/profiles/gnu', { method: 'DELETE' });
  assert.equal(del.status, 204);
  nothingWritten();
});

test('the safe tar unpack: entry count and unpacked size limits, checked before anything of the entry is written', async () => {
  const many = tar([{ name: 'a', body: Buffer.from('1') }, { name: 'b', body: Buffer.from('2') }, { name: 'c', body: Buffer.from('3') }]);
  const dest1 = scratch();
  await assert.rejects(safeUntar(Readable.from([many]), dest1, { maxEntries: 2, maxUnpackedBytes: 1000 }), (e: unknown) => e instanceof ArchiveError && e.causeCode === 'too_many_entries');
  const big = tar([{ name: 'a', body: Buffer.alloc(600) }, { name: 'b', body: Buffer.alloc(600) }]);
  const dest2 = scratch();
  await assert.rejects(safeUntar(Readable.from([big]), dest2, { maxEntries: 10, maxUnpackedBytes: 1000 }), (e: unknown) => e instanceof PayloadTooLargeError);
  assert.deepEqual(readdirSync(dest2), ['a'], 'the entry over the limit was not started');
});
