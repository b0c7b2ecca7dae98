// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// Node's compile cache of the daemon's code (BROWSERD_COMPILE_CACHE_DIR, daemon/core/compile-cache.ts,
// docs/startup.md): a later start reads the code from it; a folder others may write, one that cannot
// be made, or corrupt cache files never stop the daemon from starting and serving.
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { tempDir } from '../kit/cleanup.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';
import { until } from '../kit/wait.js';

/** Every file of the cache folder (Node keeps them in one subfolder per Node version). */
function cacheFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.join(e.parentPath, e.name));
}

async function listening(d: Daemon): Promise<Record<string, unknown>> {
  return d.waitLog((l) => l.event === 'listening');
}

/** Node's own account of the cache (NODE_DEBUG_NATIVE=COMPILE_CACHE) for the daemon's code file. */
const verdictOnCode = /V8 code cache for ESM file:\S*browserd-test-main\.js was (accepted|rejected|not initialized)/;

test('a later start reads the daemon code from the cache the first start saved', async () => {
  const dir = path.join(tempDir('browserd-cc-'), 'cache');
  const first = await startDaemon({ env: { BROWSERD_COMPILE_CACHE_DIR: dir } });
  try {
    assert.equal((await listening(first)).compile_cache, dir);
    await first.waitLog((l) => l.event === 'compile_cache_saved');
    assert.ok(cacheFiles(dir).length > 0, 'the cache folder holds files');
  } finally {
    await first.cleanup();
  }
  const later = await startDaemon({ env: { BROWSERD_COMPILE_CACHE_DIR: dir, NODE_DEBUG_NATIVE: 'COMPILE_CACHE' } });
  try {
    assert.equal((await later.fetch('/healthz')).status, 200);
    const verdict = await until(() => `Node's verdict on the cache in stderr: ${later.stderr.slice(-1000)}`, () => verdictOnCode.exec(later.stderr)?.[1]);
    assert.equal(verdict, 'accepted');
  } finally {
    await later.cleanup();
  }
});

test('corrupt cache files: the daemon compiles afresh and serves', async () => {
  const dir = path.join(tempDir('browserd-cc-'), 'cache');
  const first = await startDaemon({ env: { BROWSERD_COMPILE_CACHE_DIR: dir } });
  try {
    await first.waitLog((l) => l.event === 'compile_cache_saved');
  } finally {
    await first.cleanup();
  }
  const files = cacheFiles(dir);
  assert.ok(files.length > 0);
  for (const f of files) writeFileSync(f, Buffer.alloc(4096, 0x5a));
  const later = await startDaemon({ env: { BROWSERD_COMPILE_CACHE_DIR: dir, NODE_DEBUG_NATIVE: 'COMPILE_CACHE' } });
  try {
    assert.equal((await later.fetch('/healthz')).status, 200);
    assert.equal((await listening(later)).compile_cache, dir);
    const verdict = await until(() => `Node's verdict on the cache in stderr: ${later.stderr.slice(-1000)}`, () => verdictOnCode.exec(later.stderr)?.[1]);
    assert.notEqual(verdict, 'accepted');
  } finally {
    await later.cleanup();
  }
});

test('a cache folder that others may write is not used; the daemon starts and says why', async () => {
  const dir = path.join(tempDir('browserd-cc-'), 'cache');
  mkdirSync(dir);
  chmodSync(dir, 0o777);
  const d = await startDaemon({ env: { BROWSERD_COMPILE_CACHE_DIR: dir } });
  try {
    assert.equal((await d.fetch('/healthz')).status, 200);
    assert.equal((await listening(d)).compile_cache, null);
    const warn = await d.waitLog((l) => l.event === 'compile_cache_unused');
    assert.equal(warn.setting, 'BROWSERD_COMPILE_CACHE_DIR');
    assert.match(String(warn.reason), /group or others may write it \(mode 777\)/);
    assert.deepEqual(cacheFiles(dir), []);
  } finally {
    await d.cleanup();
  }
});

test('a cache folder that cannot be made: the daemon starts without a cache and says why', async () => {
  const file = path.join(tempDir('browserd-cc-'), 'a-file');
  writeFileSync(file, '');
  const d = await startDaemon({ env: { BROWSERD_COMPILE_CACHE_DIR: path.join(file, 'cache') } });
  try {
    assert.equal((await d.fetch('/healthz')).status, 200);
    assert.equal((await listening(d)).compile_cache, null);
    const warn = await d.waitLog((l) => l.event === 'compile_cache_unused');
    assert.match(String(warn.reason), /ENOTDIR/);
  } finally {
    await d.cleanup();
  }
});

test('an empty setting turns the cache off without a warning', async () => {
  const d = await startDaemon({ env: { BROWSERD_COMPILE_CACHE_DIR: '' } });
  try {
    assert.equal((await listening(d)).compile_cache, null);
    assert.equal((await d.fetch('/healthz')).status, 200);
    assert.equal(d.logs.filter((l) => l.event === 'compile_cache_unused').length, 0);
  } finally {
    await d.cleanup();
  }
});
