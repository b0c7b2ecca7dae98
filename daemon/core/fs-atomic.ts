// Atomic file writes for every store of the daemon (proxies, extensions, policy): a temp file in
// the same folder, fsync, rename over, fsync of the folder. A daemon killed at any point leaves
// the old content or the new, never a torn file.
import { randomUUID } from 'node:crypto';
import { open, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';

/** `tempPath` (same folder) lets a store recognise its own leftovers; default a hidden random name. */
export async function writeFileAtomic(file: string, data: string | Buffer, mode = 0o644, tempPath?: string): Promise<void> {
  const tmp = tempPath ?? path.join(path.dirname(file), `.${path.basename(file)}.${randomUUID()}.tmp`);
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

export async function exists(p: string): Promise<boolean> {
  try {
    await stat(p);
    return true;
  } catch {
    return false;
  }
}
