// Atomic writes of whole files: the bytes stream to a temp file beside the target
// (`.<name>.<random>.tmp`, created O_EXCL, 0600), get their mode, and are renamed over the target.
// A reader sees the old file or the new one, never a part; of concurrent writers the last rename
// wins; a write that fails or is cut off leaves nothing (the temp file is removed). No fsync: the
// durability is that of `cp` (ext4 flushes a file renamed over another at its next commit).
import { randomBytes } from 'node:crypto';
import { constants, type Stats } from 'node:fs';
import { chmod, chown, open, rename, unlink, type FileHandle } from 'node:fs/promises';
import type { Readable, Writable } from 'node:stream';
import { IncomingMessage } from 'node:http';
import { ConflictError, InvalidRequestError, PayloadTooLargeError } from '../../core/errors.js';
import { mapped } from '../paths/errno.js';
import type { Guard } from '../paths/guard.js';
import { O_PATH, openChecked, resolve, type Target } from '../paths/resolve.js';

/** Writes go to disk in batches of up to this much (fs.WriteStream joins buffered chunks in one writev). */
const WRITE_BATCH_BYTES = 1024 * 1024;

interface WriteLimit {
  maxBytes: number;
  /** Names the limit in the 413 (`the request body`, and its setting). */
  what: string;
  setting: string;
}

/** A hidden name beside `name` for its temp file; long names are cut so the temp name stays within NAME_MAX. */
export function tempName(name: string, suffix = 'tmp'): string {
  const base = Buffer.byteLength(name) > 200 ? name.slice(0, 50) : name;
  return `.${base}.${randomBytes(6).toString('hex')}.${suffix}`;
}

/**
 * Resolves a path to write a whole file to: a final symlink followed, missing parent folders
 * created (0755) unless `createParents` is false (then they are 404); a folder there is 409 is_a_directory.
 */
export async function resolveForWrite(guard: Guard, input: string, createParents = true): Promise<Target> {
  const t = await resolve(guard, input, { follow: true, allowMissing: true, createParents, access: 'write' });
  try {
    if (t.name === '' || t.stat?.isDirectory()) throw new ConflictError('is_a_directory', `${input} is a folder`);
    if (t.stat !== null) await guard.checkInode(t.stat, t.at, input);
    return t;
  } catch (err) {
    await t.release();
    throw err;
  }
}

/**
 * Pipes `source` into `dest` counting bytes; past the limit it rejects with 413 and stops reading
 * without destroying `source` (a request can still be answered). Any other error rejects once.
 */
export function pump(source: Readable, dest: Writable, limit: WriteLimit | null, onBytes?: (n: number) => void): Promise<number> {
  return new Promise((resolve, reject) => {
    let bytes = 0;
    let settled = false;
    const finish = (err: unknown): void => {
      if (settled) return;
      settled = true;
      source.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose);
      dest.off('error', finish).off('drain', onDrain);
      // Errors after the outcome (a write in flight when dest is destroyed, a reset after the body) are not answers.
      source.on('error', () => undefined);
      dest.on('error', () => undefined);
      if (err === null) resolve(bytes);
      else {
        source.pause();
        dest.destroy();
        reject(err);
      }
    };
    const onData = (chunk: Buffer): void => {
      bytes += chunk.length;
      onBytes?.(chunk.length);
      if (limit !== null && bytes > limit.maxBytes) {
        finish(new PayloadTooLargeError(limit.what, limit.maxBytes, limit.setting));
        return;
      }
      if (!dest.write(chunk)) source.pause();
    };
    const onDrain = (): void => void source.resume();
    const onEnd = (): void => {
      dest.once('close', () => finish(null));
      dest.end();
    };
    // A request body that ends early is the client's doing (400, logged as such), not the daemon's.
    const early = (err?: Error): Error =>
      source instanceof IncomingMessage ? new InvalidRequestError('the client closed the connection before the body was complete') : (err ?? new Error('the source ended early'));
    const onError = (err: Error): void => finish(early(err));
    const onClose = (): void => {
      if (!source.readableEnded) finish(early());
    };
    source.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose);
    dest.on('error', finish).on('drain', onDrain);
    // Gone before we started listening (a client that left while the target was resolved).
    if (source.destroyed && !source.readableEnded) finish(early());
  });
}

/** Streams `source` into a new file at `t` (temp beside it, mode, rename); returns the bytes written. */
export async function writeAtomic(t: Target, source: Readable, mode: number, limit: WriteLimit | null, onBytes?: (n: number) => void): Promise<number> {
  const tmp = t.parent.at(tempName(t.name));
  const fh = await mapped(t.shown, () => open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600));
  let done = false;
  try {
    // The agent user's file (the API acts for it), then the mode (the handle is open for writing
    // whatever the mode says), so that the rename is the last step.
    const { owner } = t;
    if (owner !== null) await mapped(t.shown, () => fh.chown(owner.uid, owner.gid));
    await mapped(t.shown, () => fh.chmod(mode));
    // The stream closes the handle when it finishes or fails (a FileHandle stream holds the handle until then).
    const out = fh.createWriteStream({ highWaterMark: WRITE_BATCH_BYTES });
    const bytes = await mapped(t.shown, () => pump(source, out, limit, onBytes));
    await mapped(t.shown, () => rename(tmp, t.at));
    done = true;
    return bytes;
  } finally {
    await fh.close().catch(() => undefined);
    if (!done) await unlink(tmp).catch(() => undefined);
  }
}

/**
 * Puts a temp file the daemon wrote beside `t` (an upload part) in place: checked to be the regular
 * file it wrote (not something swapped in), given `mode`, renamed over `t`.
 */
export async function commitTemp(guard: Guard, t: Target, tmpName: string, mode: number): Promise<void> {
  const tmp = t.parent.at(tmpName);
  let fh: FileHandle | null = null;
  try {
    fh = await mapped(t.shown, () => open(tmp, O_PATH | constants.O_NOFOLLOW));
    const st: Stats = await fh.stat();
    if (!st.isFile() || st.nlink !== 1) throw new ConflictError('busy', `${t.shown}: its temp file was changed while it was written; try again`, { retryable: true });
    await guard.checkInode(st, `/proc/self/fd/${fh.fd}`, t.shown);
    const self = `/proc/self/fd/${fh.fd}`;
    const { owner } = t;
    if (owner !== null) await mapped(t.shown, () => chown(self, owner.uid, owner.gid));
    await mapped(t.shown, () => chmod(self, mode));
    await mapped(t.shown, () => rename(tmp, t.at));
  } finally {
    await fh?.close().catch(() => undefined);
  }
}

/** Copies the regular file `src` into `dest` atomically (a move across file systems), keeping its mode. */
export async function copyAtomic(guard: Guard, src: Target, dest: Target): Promise<void> {
  const { fh, stat } = await openChecked(guard, src, constants.O_RDONLY);
  try {
    if (!stat.isFile()) throw new ConflictError('busy', `${src.shown} is not a regular file and cannot be moved to another file system`, { retryable: false });
    await writeAtomic(dest, fh.createReadStream({ highWaterMark: WRITE_BATCH_BYTES }), stat.mode & 0o1777, null);
  } finally {
    await fh.close().catch(() => undefined);
  }
}
