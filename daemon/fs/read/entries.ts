// What file_info and list_files say about a file or folder: the SDK's FileInfo shape
// ({name, path, is_dir, size_bytes, mode, mod_time}), with `mode` as `ls -l` writes it.
import type { Stats } from 'node:fs';
import { lstat, opendir } from 'node:fs/promises';
import { BrowserdError, ConflictError } from '../../core/errors.js';
import { mapped } from '../paths/errno.js';
import type { Guard } from '../paths/guard.js';
import { openDir, resolve } from '../paths/resolve.js';

interface FileEntry {
  name: string;
  /** The real path (every symlink resolved). */
  path: string;
  is_dir: boolean;
  /** 0 for folders. */
  size_bytes: number;
  /** `drwxr-xr-x`, `-rw-r--r--`, `lrwxrwxrwx`. */
  mode: string;
  /** ISO 8601, UTC. */
  mod_time: string;
}

/** lstat calls in flight at once while listing a folder. */
const LIST_CONCURRENCY = 32;

function typeLetter(st: Stats): string {
  if (st.isDirectory()) return 'd';
  if (st.isSymbolicLink()) return 'l';
  if (st.isFIFO()) return 'p';
  if (st.isSocket()) return 's';
  if (st.isCharacterDevice()) return 'c';
  if (st.isBlockDevice()) return 'b';
  return '-';
}

/** `ls -l` mode text: type letter, then rwx for user, group, other with s/S and t/T. */
export function modeString(st: Stats): string {
  const m = st.mode;
  const triple = (shift: number, special: number, letter: string): string => {
    const r = m & (4 << shift) ? 'r' : '-';
    const w = m & (2 << shift) ? 'w' : '-';
    const x = (m & (1 << shift)) !== 0;
    const s = (m & special) !== 0;
    return r + w + (s ? (x ? letter : letter.toUpperCase()) : x ? 'x' : '-');
  };
  return typeLetter(st) + triple(6, 0o4000, 's') + triple(3, 0o2000, 's') + triple(0, 0o1000, 't');
}

function entryOf(name: string, real: string, st: Stats): FileEntry {
  const isDir = st.isDirectory();
  return { name, path: real, is_dir: isDir, size_bytes: isDir ? 0 : st.size, mode: modeString(st), mod_time: st.mtime.toISOString() };
}

/** file_info: the object at `input`, a final symlink followed. */
export async function fileInfo(guard: Guard, input: string): Promise<FileEntry> {
  const t = await resolve(guard, input, { follow: true });
  try {
    const st = t.stat as Stats;
    await guard.checkInode(st, t.at, input);
    return entryOf(t.name === '' ? '/' : t.name, t.real, st);
  } finally {
    await t.release();
  }
}

/**
 * list_files: the entries of the folder at `input` (not recursive), sorted by name. Symlinks are
 * listed as links (lstat). What the API refuses (the state dir, protected files) is left out.
 */
export async function listDir(guard: Guard, input: string, maxEntries: number): Promise<FileEntry[]> {
  const t = await resolve(guard, input, { follow: true, access: 'read' });
  try {
    if (!(t.stat as Stats).isDirectory()) throw new ConflictError('not_a_directory', `${input} is not a folder`);
    const dir = await mapped(input, () => openDir(t.at, t.real));
    try {
      const names: string[] = [];
      await mapped(input, async () => {
        for await (const e of await opendir(dir.at(), { bufferSize: 256 })) {
          names.push(e.name);
          if (names.length > maxEntries) {
            throw new BrowserdError('payload_too_large', `${input} has more than ${maxEntries} entries (BROWSERD_FS_MAX_LIST_ENTRIES); list a smaller folder or use download_dir_zip`);
          }
        }
      });
      names.sort();
      const out: (FileEntry | null)[] = new Array<FileEntry | null>(names.length).fill(null);
      const isProtected = guard.inodeChecker();
      for (let i = 0; i < names.length; i += LIST_CONCURRENCY) {
        await Promise.all(
          names.slice(i, i + LIST_CONCURRENCY).map(async (name, k) => {
            const real = dir.child(name);
            if (guard.ruleOf(real) !== null) return;
            const st = await lstat(dir.at(name)).catch(() => null); // gone meanwhile: left out
            if (st === null || (await isProtected(st, dir.at(name)))) return;
            out[i + k] = entryOf(name, real, st);
          }),
        );
      }
      return out.filter((e): e is FileEntry => e !== null);
    } finally {
      await dir.close();
    }
  } finally {
    await t.release();
  }
}
