// Puts an unpacked tree (a temp folder beside its destination) in place: renamed as a whole when
// the destination does not exist; merged into an existing folder otherwise (`unzip -o -d`): its
// files replace files of the same name, its folders merge with folders. Conflicts (a file where
// the tree has a folder, or the reverse) and protected paths are found before anything moves, so a
// refused merge changes nothing. Nothing is followed: a symlink in the destination is a conflict.
// Every existing folder merged into must be one the agent user may write in (403 permission_denied).
import { lstat, readdir, rename } from 'node:fs/promises';
import { ConflictError } from '../../core/errors.js';
import { errnoOf, fsError, mapped } from '../paths/errno.js';
import { MAY_SEARCH, MAY_WRITE, type Guard } from '../paths/guard.js';
import { openDir, type Dir, type Target } from '../paths/resolve.js';

/** Moves the folder `tmpName` (beside `t`) to `t` ('renamed'), or merges it into the folder at `t` ('merged'). */
export async function placeTree(guard: Guard, t: Target, tmpName: string): Promise<'renamed' | 'merged'> {
  if (t.stat === null) {
    try {
      await rename(t.parent.at(tmpName), t.at);
      return 'renamed';
    } catch (err) {
      if (!['EEXIST', 'ENOTEMPTY', 'EISDIR', 'ENOTDIR'].includes(errnoOf(err) ?? '')) throw fsError(err, t.shown);
      // Created meanwhile: merge into it.
    }
  }
  const src = await mapped(t.shown, () => openDir(t.parent.at(tmpName), t.parent.child(tmpName)));
  try {
    let dst: Dir;
    try {
      dst = await openDir(t.at, t.real);
    } catch (err) {
      if (errnoOf(err) === 'ENOTDIR' || errnoOf(err) === 'ELOOP') throw new ConflictError('not_a_directory', `${t.shown} exists and is not a folder`);
      throw fsError(err, t.shown);
    }
    try {
      await mapped(t.shown, () => checkMerge(guard, src, dst, t.shown));
      await mapped(t.shown, () => merge(src, dst));
    } finally {
      await dst.close();
    }
  } finally {
    await src.close();
  }
  return 'merged';
}

/** Throws the first conflict or protected path of merging `src` into `dst`. */
async function checkMerge(guard: Guard, src: Dir, dst: Dir, shown: string): Promise<void> {
  if (guard.agent !== null) guard.checkAgent(await dst.fh.stat(), MAY_WRITE | MAY_SEARCH, shown, `write in ${dst.real}`);
  for (const e of await readdir(src.at(), { withFileTypes: true })) {
    const existing = await lstat(dst.at(e.name)).catch(() => null);
    if (existing === null) continue;
    const real = dst.child(e.name);
    guard.check(real, real);
    if (e.isDirectory()) {
      if (!existing.isDirectory()) throw new ConflictError('not_a_directory', `${shown}: ${real} exists and is not a folder; the archive has a folder there`);
      await inBoth(src, dst, e.name, (s, d) => checkMerge(guard, s, d, shown));
    } else {
      if (existing.isDirectory()) throw new ConflictError('is_a_directory', `${shown}: ${real} is a folder; the archive has a file there`);
      await guard.checkInode(existing, dst.at(e.name), real);
    }
  }
}

async function merge(src: Dir, dst: Dir): Promise<void> {
  for (const e of await readdir(src.at(), { withFileTypes: true })) {
    const existing = await lstat(dst.at(e.name)).catch(() => null);
    if (existing !== null && e.isDirectory() && existing.isDirectory()) await inBoth(src, dst, e.name, merge);
    else await rename(src.at(e.name), dst.at(e.name));
  }
}

async function inBoth(src: Dir, dst: Dir, name: string, fn: (s: Dir, d: Dir) => Promise<void>): Promise<void> {
  const s = await openDir(src.at(name), src.child(name));
  try {
    const d = await openDir(dst.at(name), dst.child(name));
    try {
      await fn(s, d);
    } finally {
      await d.close();
    }
  } finally {
    await s.close();
  }
}
