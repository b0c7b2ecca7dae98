// Path resolution with openat() semantics and no native code: every component is reached from an
// open handle of the folder before it (`/proc/self/fd/<fd>/<name>`: the kernel starts from the
// folder the handle refers to, wherever it has moved), symlinks are read and resolved here (the
// kernel follows none: O_NOFOLLOW everywhere), `..` goes to the parent of the folder actually
// reached, and every folder entered and every final path is checked by the guard. A component
// swapped for a symlink between two steps cannot lead anywhere the checks did not see.
import { constants, type Stats } from 'node:fs';
import { chmod, chown, lstat, mkdir, open, readlink, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { BadRequestError, ConflictError, NotFoundError } from '../../core/errors.js';
import { errnoOf, fsError } from './errno.js';
import { forbidden, MAY_READ, MAY_SEARCH, MAY_WRITE, type Guard } from './guard.js';

/** Linux O_PATH (x86-64 and arm64): a handle for path walking, needs no read permission. */
export const O_PATH = 0o10000000;
const DIR_FLAGS = O_PATH | constants.O_DIRECTORY | constants.O_NOFOLLOW;
const MAX_SYMLINKS = 40;
const PATH_MAX = 4095;

/** An open folder and its real path. */
export class Dir {
  private closed = false;
  constructor(
    readonly fh: FileHandle,
    readonly real: string,
  ) {}

  /** The path that reaches `name` inside this folder through its handle (the folder itself for ''). */
  at(name = ''): string {
    return name === '' ? `/proc/self/fd/${this.fh.fd}` : `/proc/self/fd/${this.fh.fd}/${name}`;
  }

  child(name: string): string {
    return this.real === '/' ? `/${name}` : `${this.real}/${name}`;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.fh.close().catch(() => undefined);
  }
}

/** A resolved path: the folder that holds it (open until release()) and its last name. */
export interface Target {
  parent: Dir;
  /** The last name; '' for `/` itself (then `parent` is `/`). */
  name: string;
  real: string;
  /** lstat of the object, or null when it does not exist. */
  stat: Stats | null;
  /** The path as the caller wrote it, for messages. */
  shown: string;
  /** The path that reaches the object through the parent's handle. */
  at: string;
  /** Who what the API creates there belongs to (the agent user), or null (the daemon). */
  owner: { uid: number; gid: number } | null;
  release(): Promise<void>;
}

export interface ResolveOptions {
  /** Follow a symlink as the last component (read, write, list) or take the link itself (delete, move). */
  follow: boolean;
  /** The last component may be missing (write, create, a move's destination). */
  allowMissing?: boolean;
  /** Create missing folders before the last component (0755); implies allowMissing. */
  createParents?: boolean;
  /**
   * What the agent user must be allowed (guard.ts): `read` the object, `write` it (its folder
   * writable, and the object when it exists), `parent` (its folder writable: delete, move).
   * Every folder on the way must be enterable by it, whatever this says.
   */
  access?: 'read' | 'write' | 'parent';
}

/** 400 for what is not an absolute path; `field` names the request field. */
export function checkPathInput(p: string, field = 'path'): void {
  if (p === '') throw BadRequestError.field(field, 'must not be empty');
  if (p.includes('\0')) throw BadRequestError.field(field, 'must not contain a NUL character');
  if (!p.startsWith('/')) throw BadRequestError.field(field, `must be an absolute path (starting with /), got ${JSON.stringify(p.slice(0, 80))}`);
  if (Buffer.byteLength(p) > PATH_MAX) throw BadRequestError.field(field, `must be at most ${PATH_MAX} bytes`);
}

function segments(p: string): string[] {
  return p.split('/').filter((s) => s !== '' && s !== '.');
}

async function openDir(at: string, real: string): Promise<Dir> {
  return new Dir(await open(at, DIR_FLAGS), real);
}

interface Walked {
  dir: Dir;
  /** The last component, when it is a name (not the folder reached itself). */
  last: { name: string; stat: Stats | null } | null;
  /** Names still to create (createParents, or the missing tail of a mkdir -p). */
  missing: string[];
}

/** The walk itself; on error every handle it opened is closed. */
async function walk(guard: Guard, input: string, opts: ResolveOptions & { tail?: boolean }): Promise<Walked> {
  checkPathInput(input);
  const shown = input;
  let queue = segments(input);
  let dir = await openDir('/', '/');
  let links = 0;
  try {
    while (queue.length > 0) {
      const seg = queue.shift() as string;
      const isLast = queue.length === 0;
      if (seg === '..') {
        if (dir.real !== '/') {
          const up = await openDir(dir.at('..'), path.dirname(dir.real));
          await dir.close();
          dir = up;
        }
        continue;
      }
      const real = dir.child(seg);
      if (isLast) {
        let st: Stats | null = null;
        try {
          st = await lstat(dir.at(seg));
        } catch (err) {
          if (errnoOf(err) !== 'ENOENT') throw fsError(err, shown);
        }
        if (st?.isSymbolicLink() && opts.follow) {
          const link = await readLink(dir.at(seg), ++links, shown);
          queue = [...link.segments, ...queue];
          if (link.absolute) dir = await restart(dir);
          continue;
        }
        guard.check(real, shown);
        if (st === null && opts.tail) return { dir, last: null, missing: [seg] };
        if (st === null && !opts.allowMissing && !opts.createParents) throw new NotFoundError(`${shown}: no such file or folder`);
        return { dir, last: { name: seg, stat: st }, missing: [] };
      }
      let next: Dir;
      try {
        next = await openDir(dir.at(seg), real);
      } catch (err) {
        const code = errnoOf(err);
        if (code === 'ENOENT' && (opts.tail || opts.createParents)) {
          guard.check(real, shown);
          // Names still to create: a `..` among them has nothing to go up from (the kernel says ENOENT too).
          if (queue.includes('..')) throw new NotFoundError(`${shown}: no such file or folder`);
          return { dir, last: null, missing: [seg, ...queue] };
        }
        if (code !== 'ENOTDIR' && code !== 'ELOOP') throw fsError(err, shown);
        const st = await lstat(dir.at(seg)).catch((e: unknown) => {
          throw fsError(e, shown);
        });
        if (!st.isSymbolicLink()) throw new ConflictError('not_a_directory', `${shown}: ${real} is not a folder`);
        const link = await readLink(dir.at(seg), ++links, shown);
        queue = [...link.segments, ...queue];
        if (link.absolute) dir = await restart(dir);
        continue;
      }
      try {
        guard.check(real, shown);
        await checkSearch(guard, next, shown);
      } catch (err) {
        await next.close();
        throw err;
      }
      await dir.close();
      dir = next;
    }
    return { dir, last: null, missing: [] };
  } catch (err) {
    await dir.close();
    throw err;
  }
}

async function restart(dir: Dir): Promise<Dir> {
  await dir.close();
  return openDir('/', '/');
}

/** What the symlink at `link` says: its components, and whether they start again from `/`. */
async function readLink(link: string, links: number, shown: string): Promise<{ segments: string[]; absolute: boolean }> {
  if (links > MAX_SYMLINKS) throw BadRequestError.field('path', `${shown}: too many levels of symbolic links`);
  const target = await readlink(link).catch((e: unknown) => {
    throw fsError(e, shown);
  });
  return { segments: segments(target), absolute: target.startsWith('/') };
}

/** The agent user must be able to enter `dir` (guard.ts). */
async function checkSearch(guard: Guard, dir: Dir, shown: string): Promise<void> {
  if (guard.agent === null) return;
  guard.checkAgent(await dir.fh.stat(), MAY_SEARCH, shown, `enter ${dir.real}`);
}

/** The access `opts.access` asks of the agent user on `t` (guard.ts). */
async function checkAccess(guard: Guard, t: Target, access: ResolveOptions['access']): Promise<void> {
  if (guard.agent === null || access === undefined) return;
  try {
    if (access === 'read') {
      if (t.stat !== null) guard.checkAgent(t.stat, MAY_READ, t.shown, 'read it');
      return;
    }
    guard.checkAgent(await t.parent.fh.stat(), MAY_WRITE | MAY_SEARCH, t.shown, `write in ${t.parent.real}`);
    if (access === 'write' && t.stat !== null && !t.stat.isDirectory()) guard.checkAgent(t.stat, MAY_WRITE, t.shown, 'write it');
  } catch (err) {
    // The daemon's own rules are named first: a hard link to a protected file is protected_file.
    if (t.stat !== null && !t.stat.isSymbolicLink()) await guard.checkInode(t.stat, t.at, t.shown);
    throw err;
  }
}

/** Resolves `input` to its parent folder (open) and last name; checks every rule on the way. */
export async function resolve(guard: Guard, input: string, opts: ResolveOptions): Promise<Target> {
  const t = await resolveUnchecked(guard, input, opts);
  try {
    await checkAccess(guard, t, opts.access);
    return t;
  } catch (err) {
    await t.release();
    throw err;
  }
}

async function resolveUnchecked(guard: Guard, input: string, opts: ResolveOptions): Promise<Target> {
  const w = await walk(guard, input, opts);
  let { dir } = w;
  try {
    for (const [i, name] of w.missing.entries()) {
      const isLast = i === w.missing.length - 1;
      if (isLast) return await target(guard, dir, name, null, input);
      dir = await makeDir(guard, dir, name, 0o755, input);
    }
    if (w.last !== null) return await target(guard, dir, w.last.name, w.last.stat, input);
    // The path ends at a folder reached by `..` (or is `/`): its parent and name.
    if (dir.real === '/') return await target(guard, dir, '', await lstat('/'), input);
    const parent = await openDir(dir.at('..'), path.dirname(dir.real));
    const name = path.basename(dir.real);
    await dir.close();
    dir = parent;
    return await target(guard, dir, name, await lstat(dir.at(name)).catch(() => null), input);
  } catch (err) {
    await dir.close();
    throw err;
  }
}

async function target(guard: Guard, parent: Dir, name: string, stat: Stats | null, shown: string): Promise<Target> {
  const real = name === '' ? '/' : parent.child(name);
  guard.check(real, shown);
  await guard.checkFilesystem(parent.at(), shown);
  const at = parent.at(name);
  if (stat !== null && !stat.isSymbolicLink()) await guard.checkFilesystem(at, shown);
  const owner = guard.agent === null ? null : { uid: guard.agent.uid, gid: guard.agent.gid };
  return { parent, name, real, stat, shown, at, owner, release: () => parent.close() };
}

/** mkdir of `name` in `dir` (mode exactly `mode`: umask does not apply), or the folder already there; returns it open. */
export async function makeDir(guard: Guard, dir: Dir, name: string, mode: number, shown: string): Promise<Dir> {
  const real = dir.child(name);
  guard.check(real, shown);
  if (guard.agent !== null && (await lstat(dir.at(name)).catch(() => null)) === null) {
    guard.checkAgent(await dir.fh.stat(), MAY_WRITE | MAY_SEARCH, shown, `create a folder in ${dir.real}`);
  }
  let created = false;
  try {
    await mkdir(dir.at(name), { mode });
    created = true;
  } catch (err) {
    if (errnoOf(err) !== 'EEXIST') throw fsError(err, shown);
  }
  let next: Dir;
  try {
    next = await openDir(dir.at(name), real);
  } catch (err) {
    if (errnoOf(err) === 'ENOTDIR' || errnoOf(err) === 'ELOOP') throw new ConflictError('already_exists', `${shown}: ${real} exists and is not a folder`);
    throw fsError(err, shown);
  }
  if (created) await chmod(next.at(), mode).catch(() => undefined);
  // What the API creates is the agent user's, as if it had made it.
  if (created && guard.agent !== null) await chown(next.at(), guard.agent.uid, guard.agent.gid).catch(() => undefined);
  try {
    await checkSearch(guard, next, shown);
  } catch (err) {
    await next.close();
    throw err;
  }
  await dir.close();
  return next;
}

/** The deepest existing folder of `input` and the names missing below it (create_directory). */
export async function resolveTail(guard: Guard, input: string): Promise<{ dir: Dir; missing: string[] }> {
  const w = await walk(guard, input, { follow: true, tail: true });
  if (w.last !== null) {
    const st = w.last.stat;
    const real = w.dir.child(w.last.name);
    if (st !== null && !st.isDirectory()) {
      await w.dir.close();
      throw new ConflictError('already_exists', `${input}: ${real} exists and is not a folder`);
    }
    try {
      return { dir: await openDir(w.dir.at(w.last.name), real), missing: [] };
    } finally {
      await w.dir.close();
    }
  }
  return { dir: w.dir, missing: w.missing };
}

/**
 * Opens the resolved object with `flags` (O_NOFOLLOW added) and checks what was opened: not a
 * symlink swapped in, on no special file system, not a protected inode, and its path as the kernel
 * reports it (`/proc/self/fd/<fd>`) breaks no rule.
 */
export async function openChecked(guard: Guard, t: Target, flags: number): Promise<{ fh: FileHandle; stat: Stats }> {
  let fh: FileHandle;
  try {
    fh = await open(t.at, flags | constants.O_NOFOLLOW);
  } catch (err) {
    if (errnoOf(err) === 'ELOOP') throw new ConflictError('busy', `${t.shown} changed while it was being opened; try again`, { retryable: true });
    throw fsError(err, t.shown);
  }
  try {
    const stat = await fh.stat();
    const self = `/proc/self/fd/${fh.fd}`;
    if (stat.isSymbolicLink()) throw new ConflictError('busy', `${t.shown} changed while it was being opened; try again`, { retryable: true });
    const seen = (await readlink(self)).replace(/ \(deleted\)$/, '');
    const rule = guard.ruleOf(seen);
    if (rule !== null) throw forbidden(rule, t.shown);
    await guard.checkFilesystem(self, t.shown);
    await guard.checkInode(stat, self, t.shown);
    return { fh, stat };
  } catch (err) {
    await fh.close().catch(() => undefined);
    throw err;
  }
}

export { openDir };
