// A profile's content: a tar (core/zip/tar.ts) compressed with zstd (Node 24's zlib) of Chromium's
// user data folder, without what is bound to this machine or this run, or what Chromium rebuilds
// on its own. What is left out, and why (docs/profiles.md repeats it):
//   Singleton{Lock,Socket,Cookie}, DevToolsActivePort, LOCK, lockfile
//                        locks and addresses of one running Chromium (a host name, a socket path,
//                        a port): a copy would make another Chromium refuse the profile or connect
//                        to nothing; LevelDB and Chromium recreate them at open
//   Cache, Code Cache, GPUCache, ShaderCache, GrShaderCache, GraphiteDawnCache, DawnGraphiteCache,
//   DawnWebGPUCache, Service Worker/CacheStorage, Service Worker/ScriptCache, component_crx_cache,
//   extensions_crx_cache
//                        caches: refilled from the network on the next visit, often most of the
//                        folder's size, and the GPU ones are bound to this GPU and driver
//   Crash Reports, Crashpad, BrowserMetrics, BrowserMetrics-spare.pma
//                        crash dumps and metrics of this machine's runs: not the user's data
//   *.tmp at the top     temp files of an interrupted write
import { createWriteStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import type { Readable } from 'node:stream';
import zlib from 'node:zlib';
import { packTar, safeUntarZstd } from '../core/zip/tar.js';
import type { UnzipLimits, UnzipResult } from '../core/zip/unzip.js';

/** Names left out wherever they are in the tree. */
const SKIP_ANY = new Set([
  'SingletonLock',
  'SingletonSocket',
  'SingletonCookie',
  'DevToolsActivePort',
  'LOCK',
  'lockfile',
  'Cache',
  'Code Cache',
  'GPUCache',
  'ShaderCache',
  'GrShaderCache',
  'GraphiteDawnCache',
  'DawnGraphiteCache',
  'DawnWebGPUCache',
  'component_crx_cache',
  'extensions_crx_cache',
  'Crash Reports',
  'Crashpad',
  'BrowserMetrics',
  'BrowserMetrics-spare.pma',
]);
/** Paths left out (the tail of the relative path). */
const SKIP_TAIL = ['Service Worker/CacheStorage', 'Service Worker/ScriptCache'];

/** Whether `rel` (a path inside the user data folder) is left out of a profile archive. */
export function leftOut(rel: string): boolean {
  const base = rel.slice(rel.lastIndexOf('/') + 1);
  if (SKIP_ANY.has(base)) return true;
  if (!rel.includes('/') && base.endsWith('.tmp')) return true;
  return SKIP_TAIL.some((t) => rel === t || rel.endsWith(`/${t}`));
}

/** zstd level of profile archives: 3 (zstd's default): most of the gain, a fraction of the time of higher levels. */
const ZSTD_LEVEL = 3;

export function zstdCompress(): zlib.ZstdCompress {
  return zlib.createZstdCompress({ params: { [zlib.constants.ZSTD_c_compressionLevel]: ZSTD_LEVEL } });
}

/** Writes the archive of `dir` to `file` (a new file). */
export async function packProfile(dir: string, file: string): Promise<void> {
  await pipeline(packTar(dir, leftOut), zstdCompress(), createWriteStream(file, { flags: 'wx', mode: 0o600 }));
}

/** The archive of `dir` as a stream (an empty folder or a missing one: an empty archive). */
export function profileStream(dir: string): Readable {
  const z = zstdCompress();
  pipeline(packTar(dir, leftOut), z).catch((err: unknown) => z.destroy(err as Error));
  return z;
}

/** Unpacks the tar.zst `file` into the empty folder `dest` with the safe-unpack's checks. */
export function unpackProfile(file: string, dest: string, limits: UnzipLimits): Promise<UnzipResult> {
  return safeUntarZstd(file, dest, limits);
}
