// The kernel's answers as the daemon's errors: one table for every files route. Messages name the
// path as the caller wrote it (never the /proc/self/fd path the daemon used to reach it).
import {
  BadRequestError,
  BrowserdError,
  ConflictError,
  NoSpaceError,
  NotFoundError,
  PathForbiddenError,
} from '../../core/errors.js';

export function errnoOf(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | null)?.code;
}

/** `err` (from a file system call on `shown`) as the answer to give; unknown errors pass through (500, logged). */
export function fsError(err: unknown, shown: string): unknown {
  if (err instanceof BrowserdError) return err;
  switch (errnoOf(err)) {
    case 'ENOENT':
      return new NotFoundError(`${shown}: no such file or folder`);
    case 'ENOTDIR':
      return new ConflictError('not_a_directory', `${shown}: a part of the path is not a folder`);
    case 'EISDIR':
      return new ConflictError('is_a_directory', `${shown} is a folder`);
    case 'EEXIST':
      return new ConflictError('already_exists', `${shown} already exists`);
    case 'ENOTEMPTY':
      return new ConflictError('directory_not_empty', `${shown} is a folder that is not empty`);
    case 'EACCES':
    case 'EPERM':
      return new PathForbiddenError('permission_denied', `${shown}: the daemon's user may not do this (${errnoOf(err)})`);
    case 'EROFS':
      return new PathForbiddenError('read_only', `${shown} is on a read-only file system`);
    case 'ENOSPC':
    case 'EDQUOT':
      return new NoSpaceError(shown);
    case 'ELOOP':
      return BadRequestError.field('path', `${shown}: too many levels of symbolic links`);
    case 'ENAMETOOLONG':
      return BadRequestError.field('path', `${shown}: a name or the path is too long`);
    case 'EXDEV':
      return BadRequestError.field('path', `${shown}: only regular files are moved to another file system (copied, then removed)`);
    case 'EINVAL':
      return BadRequestError.field('path', `${shown}: not possible (a folder cannot be moved into itself)`);
    case 'EBUSY':
    case 'ETXTBSY':
      return new ConflictError('busy', `${shown} is in use (a mount point or a running program)`, { retryable: false });
    default:
      return err;
  }
}

/** Runs `fn`, turning file system errors into answers about `shown`. */
export async function mapped<T>(shown: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw fsError(err, shown);
  }
}
