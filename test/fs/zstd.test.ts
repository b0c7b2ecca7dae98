// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// fs/download_dir_zstd and fs/upload_zstd against the real daemon, with GNU tar as the other side:
// a folder downloaded as tar.zst is what GNU tar reads back (symlinks left out), an archive GNU
// tar made is unpacked into place, and a hostile one is refused with its code, nothing written.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import zlib from 'node:zlib';
import { agentScratchDirs } from '../kit/agent.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';

let d: Daemon;
const scratch = agentScratchDirs('browserd-fs-zstd-');

before(async () => {
  d = await startDaemon();
});
after(() => d.cleanup());

test('download_dir_zstd: GNU tar reads the folder back; symlinks are left out', async () => {
  const dir = scratch();
  mkdirSync(path.join(dir, 'sub', 'deep'), { recursive: true });
  writeFileSync(path.join(dir, 'a.txt'), 'alpha');
  const big = Buffer.alloc(700_000, 'b');
  writeFileSync(path.join(dir, 'sub', 'deep', 'big.bin'), big);
  const longName = `${'n'.repeat(120)}/${'m'.repeat(120)}.txt`;
  mkdirSync(path.join(dir, 'n'.repeat(120)));
  writeFileSync(path.join(dir, longName), 'long');
  symlinkSync('/etc/passwd', path.join(dir, 'link'));
  const res = await d.fetch(`/browsers/local/fs/download_dir_zstd?path=${encodeURIComponent(dir)}`);
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'application/zstd');
  const archive = Buffer.from(await res.arrayBuffer());
  const out = scratch();
  execFileSync('tar', ['--zstd', '-xf', '-', '-C', out], { input: archive });
  assert.equal(readFileSync(path.join(out, 'a.txt'), 'utf8'), 'alpha');
  assert.deepEqual(readFileSync(path.join(out, 'sub', 'deep', 'big.bin')), big);
  assert.equal(readFileSync(path.join(out, longName), 'utf8'), 'long', 'a name past 100 bytes survives');
  assert.equal(existsSync(path.join(out, 'link')), false, 'the symlink is left out');
});

async function uploadZstd(dest: string, archive: Buffer): Promise<Response> {
  const form = new FormData();
  form.append('dest_path', dest);
  form.append('archive_file', new Blob([archive]), 'a.tar.zst');
  return d.fetch('/browsers/local/fs/upload_zstd', { method: 'POST', body: form });
}

test('upload_zstd: an archive made by GNU tar is unpacked into a new folder', async () => {
  const src = scratch();
  mkdirSync(path.join(src, 'x'));
  writeFileSync(path.join(src, 'x', 'f.txt'), 'file');
  const archive = execFileSync('tar', ['--zstd', '-C', src, '-cf', '-', '.']);
  const dest = path.join(scratch(), 'new', 'place');
  const res = await uploadZstd(dest, archive);
  assert.equal(res.status, 204, await res.text());
  assert.equal(readFileSync(path.join(dest, 'x', 'f.txt'), 'utf8'), 'file');
});

test('upload_zstd: a path out of the root is 422 zip_slip and nothing is written; not zstd is bad_zstd', async () => {
  const root = scratch();
  const src = scratch();
  writeFileSync(path.join(src, 'ok.txt'), 'ok');
  // GNU tar keeps a leading ../ with -P (absolute names) and --transform.
  const evil = execFileSync('tar', ['-P', '-C', src, '--transform', 's,^ok.txt,../evil.txt,', '-cf', '-', 'ok.txt']);
  const dest = path.join(root, 'dest');
  const res = await uploadZstd(dest, zlib.zstdCompressSync(evil));
  const body = (await res.json()) as { code: string; inner_error?: { code: string } };
  assert.equal(res.status, 422);
  assert.equal(body.code, 'archive_rejected');
  assert.equal(body.inner_error?.code, 'zip_slip');
  assert.equal(existsSync(dest), false, 'nothing written');
  assert.equal(existsSync(path.join(root, 'evil.txt')), false);
  const plain = await uploadZstd(dest, evil);
  assert.equal(((await plain.json()) as { inner_error?: { code: string } }).inner_error?.code, 'bad_zstd');
  assert.equal(existsSync(dest), false);
  // An entry named like the zstd decoder's error texts is still the entry's problem (it was bad_zstd: the cause was read from a message).
  const named = execFileSync('tar', ['-P', '-C', src, '--transform', 's,^ok.txt,../zstd,', '-cf', '-', 'ok.txt']);
  const slip = await uploadZstd(dest, zlib.zstdCompressSync(named));
  assert.equal(((await slip.json()) as { inner_error?: { code: string } }).inner_error?.code, 'zip_slip');
  const linkDir = scratch();
  symlinkSync('/etc', path.join(linkDir, 'zstd-error'));
  const link = await uploadZstd(dest, zlib.zstdCompressSync(execFileSync('tar', ['-C', linkDir, '-cf', '-', 'zstd-error'])));
  assert.equal(((await link.json()) as { inner_error?: { code: string } }).inner_error?.code, 'symlink');
  assert.equal(existsSync(dest), false);
});
