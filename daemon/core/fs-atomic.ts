// Atomic file writes for every store of the daemon (proxies, extensions, policy): a temp file in
// the same folder, fsync, rename over, fsync of the folder. A daemon killed at any point leaves
// the old content or the new, never a torn file.
import { randomUUID } from 'node:crypto';
import { closeSync, fsyncSync, openSync, readdirSync, rmSync } from 'node:fs';
import { open, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';

/**
 * The temp file of one atomic write: hidden, beside the file, recognisable by removeStaleTemps
 * (also the `<file>.tmp-<pid>-<n>` names of earlier versions).
 */
const TEMP_RE = /^(?:\..+\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.tmp|.+\.tmp-\d+-\d+)$/;

export async function writeFileAtomic(file: string, data: string | Buffer, mode = 0o644): Promise<void> {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${randomUUID()}.tmp`);
  try {
    const fh = await open(tmp, 'wx', mode);
    try {
      await fh.writeFile(data);
      await fh.chmod(mode);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, file);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  await syncDir(path.dirname(file));
}

/**
 * The recovery of every store: removes the temp files of atomic writes that never reached their
 * rename (a daemon killed inside writeFileAtomic) from `dir`. Call at start, before the store is
 * read, for every folder a store writes into (`onlyOf`: only the temps of that file name). Returns
 * the names removed.
 */
export function removeStaleTemps(dir: string, onlyOf?: string): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  // In a folder the daemon shares (the policy folder), only the temps of its own file.
  const stale = names.filter((n) => TEMP_RE.test(n) && (onlyOf === undefined || n.startsWith(`.${onlyOf}.`)));
  for (const n of stale) rmSync(path.join(dir, n), { force: true });
  return stale;
}

export async function syncDir(dir: string): Promise<void> {
  try {
    const fh = await open(dir, 'r');
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
  } catch {
    // best effort: some file systems refuse fsync on a folder
  }
}

/** syncDir, synchronously (at start, before the daemon serves). */
export function syncDirSync(dir: string): void {
  try {
    const fd = openSync(dir, 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch {
    // best effort: some file systems refuse fsync on a folder
  }
}

export async function exists(p: string): Promise<boolean> {
  try {
    await stat(p);
    return true;
  } catch {
    return false;
  }
}
