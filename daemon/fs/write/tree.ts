// The operations on names: create_directory (mkdir -p), delete_file, delete_directory (rm -r),
// move (rename, or copy then delete across file systems), set_file_permissions (chmod, chown).
// Every step goes through an open handle of the folder it works in (paths/resolve.ts), so a folder
// swapped for a symlink mid-way cannot redirect a deletion or a chmod.
import { constants, type Stats } from 'node:fs';
import { chmod, chown, readdir, rename, rmdir, unlink } from 'node:fs/promises';
import { BadRequestError, ConflictError, PathForbiddenError } from '../../core/errors.js';
import { errnoOf, fsError, mapped } from '../paths/errno.js';
import { forbidden, MAY_READ, MAY_SEARCH, MAY_WRITE, type Guard } from '../paths/guard.js';
import { makeDir, O_PATH, openChecked, openDir, resolve, resolveTail, type Dir } from '../paths/resolve.js';
import { copyAtomic } from './write.js';

/** mkdir -p: every missing folder of `input` is created with `mode`; an existing folder is fine. */
export async function createDirectory(guard: Guard, input: string, mode: number): Promise<void> {
  const { dir, missing } = await resolveTail(guard, input);
  let cur = dir;
  try {
    for (const name of missing) cur = await makeDir(guard, cur, name, mode, input);
  } finally {
    await cur.close();
  }
}

/** Removes a file or a symlink (never what the link points to). */
export async function deleteFile(guard: Guard, input: string): Promise<void> {
  const t = await resolve(guard, input, { follow: false, access: 'parent' });
  try {
    const st = t.stat as Stats;
    if (st.isDirectory()) throw new ConflictError('is_a_directory', `${input} is a folder: use delete_directory`);
    await guard.checkInode(st, t.at, input);
    await mapped(input, () => unlink(t.at));
  } finally {
    await t.release();
  }
}

/** Removes a folder and everything in it; refused whole when the tree holds a protected path. */
export async function deleteDirectory(guard: Guard, input: string): Promise<void> {
  const t = await resolve(guard, input, { follow: false, access: 'parent' });
  try {
    if (!(t.stat as Stats).isDirectory()) throw new ConflictError('not_a_directory', `${input} is not a folder${t.stat?.isSymbolicLink() ? ' (a symbolic link: use delete_file)' : ''}`);
    const rule = guard.treeRule(t.real);
    if (rule !== null) throw forbidden(rule, input);
    if (guard.agent !== null) await mapped(input, () => checkTreeRemovable(guard, t.parent, t.name, input));
    await mapped(input, () => removeTree(t.parent, t.name));
  } finally {
    await t.release();
  }
}

/**
 * As rm -r run by the agent user would need: every folder of the tree readable, writable and
 * enterable by it (403 permission_denied before anything is removed otherwise).
 */
async function checkTreeRemovable(guard: Guard, parent: Dir, name: string, shown: string): Promise<void> {
  let dir: Dir;
  try {
    dir = await openDir(parent.at(name), parent.child(name));
  } catch (err) {
    if (['ENOTDIR', 'ELOOP', 'ENOENT'].includes(errnoOf(err) ?? '')) return; // changed meanwhile: removeTree copes
    throw err;
  }
  try {
    guard.checkAgent(await dir.fh.stat(), MAY_READ | MAY_WRITE | MAY_SEARCH, shown, `empty ${dir.real}`);
    for (const e of await readdir(dir.at(), { withFileTypes: true })) {
      if (e.isDirectory()) await checkTreeRemovable(guard, dir, e.name, shown);
    }
  } finally {
    await dir.close();
  }
}

/** rm -r of `name` in `parent`, depth first, each folder entered through its own handle (no symlink followed). */
async function removeTree(parent: Dir, name: string): Promise<void> {
  let dir: Dir;
  try {
    dir = await openDir(parent.at(name), parent.child(name));
  } catch (err) {
    if (errnoOf(err) === 'ENOTDIR' || errnoOf(err) === 'ELOOP') return unlink(parent.at(name)); // replaced by a file meanwhile
    if (errnoOf(err) === 'ENOENT') return;
    throw err;
  }
  try {
    for (const e of await readdir(dir.at(), { withFileTypes: true })) {
      if (e.isDirectory()) await removeTree(dir, e.name);
      else await unlink(dir.at(e.name)).catch((err: unknown) => {
        if (errnoOf(err) === 'EISDIR') return removeTree(dir, e.name);
        if (errnoOf(err) !== 'ENOENT') throw err;
      });
    }
  } finally {
    await dir.close();
  }
  await rmdir(parent.at(name));
}

/**
 * rename(2) semantics: `dest` is the new path (not a folder to move into); a file replaces a file,
 * a folder replaces an empty folder. A file or symlink moved to another file system is copied, then removed.
 */
export async function move(guard: Guard, srcInput: string, destInput: string): Promise<void> {
  const src = await resolve(guard, srcInput, { follow: false, access: 'parent' });
  try {
    const sst = src.stat as Stats;
    if (src.name === '') throw BadRequestError.field('src_path', '/ cannot be moved');
    if (sst.isDirectory()) {
      const rule = guard.treeRule(src.real);
      if (rule !== null) throw forbidden(rule, srcInput);
    }
    await guard.checkInode(sst, src.at, srcInput);
    const dest = await resolve(guard, destInput, { follow: false, allowMissing: true, access: 'parent' });
    try {
      const dst = dest.stat;
      if (dest.name === '') throw BadRequestError.field('dest_path', '/ cannot be replaced');
      if (dest.real === src.real) return;
      if (dst !== null && dst.isDirectory() && !sst.isDirectory()) throw new ConflictError('is_a_directory', `${destInput} is a folder`);
      if (dst !== null && !dst.isDirectory() && sst.isDirectory()) throw new ConflictError('not_a_directory', `${destInput} exists and is not a folder`);
      try {
        await rename(src.at, dest.at);
      } catch (err) {
        if (errnoOf(err) !== 'EXDEV' || !sst.isFile()) throw fsError(err, errnoOf(err) === 'ENOTEMPTY' || errnoOf(err) === 'EEXIST' ? destInput : srcInput);
        await copyAtomic(guard, src, dest);
        await mapped(srcInput, () => unlink(src.at));
      }
    } finally {
      await dest.release();
    }
  } finally {
    await src.release();
  }
}

/** chmod (and chown when `uid`/`gid` are not -1) of the object at `input`, a final symlink followed. */
export async function setPermissions(guard: Guard, input: string, mode: number, uid: number, gid: number): Promise<void> {
  const t = await resolve(guard, input, { follow: true });
  try {
    const { fh, stat } = await openChecked(guard, t, O_PATH | constants.O_NOFOLLOW);
    const a = guard.agent;
    // As the kernel would for the agent user (judged on the inode opened): chmod of its own objects only; chown only to itself and its groups.
    if (a !== null && stat.uid !== a.uid) {
      await fh.close();
      throw new PathForbiddenError('permission_denied', `${input}: the agent user ${a.name} may not change its permissions (it is not that user's; the files API acts with its rights)`);
    }
    if (a !== null && ((uid !== -1 && uid !== a.uid) || (gid !== -1 && gid !== a.gid && !a.groups.includes(gid)))) {
      await fh.close();
      throw new PathForbiddenError('permission_denied', `${input}: the agent user ${a.name} may not give it away (owner: itself only; group: one of its own)`);
    }
    try {
      // chmod on /proc/self/fd/<fd> reaches the inode the handle holds (fchmod refuses O_PATH handles).
      const self = `/proc/self/fd/${fh.fd}`;
      await mapped(input, () => chmod(self, mode));
      if (uid !== -1 || gid !== -1) await mapped(input, () => chown(self, uid, gid));
    } finally {
      await fh.close();
    }
  } finally {
    await t.release();
  }
}
