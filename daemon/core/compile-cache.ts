// Node's compile cache for the daemon's own code (BROWSERD_COMPILE_CACHE_DIR, under systemd
// $CACHE_DIRECTORY): V8's bytecode of the bundle, kept between starts, so that a later start does
// not parse and compile the 1.4 MB bundle again (docs/startup.md; bench/ANALYSIS.md §7).
//
// The entry (daemon/start.ts) turns it on before it imports the daemon; nothing else here runs
// before the settings are read, and nothing here can stop the daemon from starting: a folder that
// is missing and cannot be made, that is not the daemon's own, that others may write, or whose
// files are corrupt (Node checks each entry's checksum and compiles afresh) only means no cache.
//
// Why the ownership check: the cache is code the daemon runs. A folder another user can write is a
// way into the daemon's process, so only a folder of the daemon's own user, that neither its group
// nor others may write, is used.
import { lstatSync, mkdirSync } from 'node:fs';
import { enableCompileCache, flushCompileCache, getCompileCacheDir } from 'node:module';
import path from 'node:path';

export const COMPILE_CACHE_SETTING = 'BROWSERD_COMPILE_CACHE_DIR';

/** The folder the settings name: BROWSERD_COMPILE_CACHE_DIR, else systemd's first CacheDirectory=; '' or none: no cache. */
export function compileCacheSetting(env: NodeJS.ProcessEnv): string | null {
  const dir = env[COMPILE_CACHE_SETTING] ?? env.CACHE_DIRECTORY?.split(':')[0];
  return dir === undefined || dir === '' ? null : path.resolve(dir);
}

/** Why the daemon will not use `dir` (null: it may); makes it (mode 0700) when it is missing. */
export function refusal(dir: string): string | null {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const st = lstatSync(dir);
    if (!st.isDirectory()) return 'it is not a folder';
    const uid = process.geteuid?.();
    if (uid !== undefined && st.uid !== uid) return `it belongs to uid ${st.uid}, not to the daemon's user (uid ${uid})`;
    if ((st.mode & 0o022) !== 0) return `its group or others may write it (mode ${(st.mode & 0o777).toString(8)})`;
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

/** The entry's step: turns the cache on when the settings name a folder the daemon may use. Never throws. */
export function enableFromSettings(env: NodeJS.ProcessEnv): void {
  const dir = compileCacheSetting(env);
  if (dir === null || refusal(dir) !== null) return;
  try {
    enableCompileCache(dir);
  } catch {
    // Node refused the folder: the daemon starts without a cache (compileCacheState says why).
  }
}

export type CompileCacheState = { dir: string } | { dir: null; setting: string | null; why: string };

/** Whether the cache is on, for the `listening` line; why not, when a folder was named. */
export function compileCacheState(env: NodeJS.ProcessEnv): CompileCacheState {
  const on = getCompileCacheDir(); // Node's subfolder of this Node version, in the folder it was given
  const dir = compileCacheSetting(env);
  if (on !== undefined) return { dir: dir !== null && on.startsWith(dir + path.sep) ? dir : on };
  if (dir === null) return { dir: null, setting: null, why: `${COMPILE_CACHE_SETTING} is not set` };
  return { dir: null, setting: dir, why: refusal(dir) ?? (env.NODE_DISABLE_COMPILE_CACHE !== undefined ? 'NODE_DISABLE_COMPILE_CACHE is set' : 'Node could not open it') };
}

/**
 * Writes what this start compiled into the cache now, rather than only at a clean exit: a daemon
 * that is killed (SIGKILL, OOM) still leaves it for the next start. Whether it was written; never throws.
 */
export function saveCompileCache(): boolean {
  try {
    if (getCompileCacheDir() === undefined) return false;
    flushCompileCache();
    return true;
  } catch {
    return false; // a full or read-only disk: the next start compiles afresh
  }
}
