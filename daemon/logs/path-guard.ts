// Which files a `path` log stream may read. The filesystem API (daemon/fs/) owns the path rules; the
// log stream takes its check as a function. Until it is wired, this minimal guard stands in: an
// absolute path, resolved to its real path (symlinks followed), must be a regular file outside the
// daemon's state directory (its token, keys, proxy passwords) and outside /proc, /sys and /dev.
import { realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { BadRequestError, BrowserdError, ConflictError, NotFoundError } from '../core/errors.js';

/** The real path of a readable file, or throws: 400 (not absolute, not a file), 403 path_forbidden, 404, 409 is_a_directory. */
export type ResolveReadable = (file: string) => Promise<string>;

function under(file: string, root: string): boolean {
  return file === root || file.startsWith(root.endsWith('/') ? root : `${root}/`);
}

export function minimalReadableGuard(stateDir: string): ResolveReadable {
  const forbidden = [stateDir, '/proc', '/sys', '/dev'];
  const refuse = (candidate: string, file: string): void => {
    for (const root of forbidden) {
      if (under(candidate, root)) {
        throw new BrowserdError('path_forbidden', root === stateDir ? `${file} is in the daemon's state directory, which is never readable through the API` : `${file} is under ${root}, which is not readable through the API`);
      }
    }
  };
  return async (file) => {
    if (!path.isAbsolute(file)) throw BadRequestError.field('path', 'must be an absolute path');
    if (file.includes('\0')) throw BadRequestError.field('path', 'must not contain NUL');
    // The path as given first (a file of the state directory that does not exist is refused the
    // same way as one that does), then its real path (symlinks into a forbidden place).
    refuse(path.resolve(file), file);
    let real: string;
    try {
      real = await realpath(file);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') throw new NotFoundError(`no file at ${file}`);
      if (code === 'EACCES') throw new BrowserdError('path_forbidden', `${file}: permission denied`);
      throw err;
    }
    refuse(real, file);
    const st = await stat(real);
    if (st.isDirectory()) throw new ConflictError('is_a_directory', `${file} is a directory`);
    if (!st.isFile()) throw BadRequestError.field('path', `${file} is not a regular file`);
    return real;
  };
}
