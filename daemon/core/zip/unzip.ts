// Safe unzip of an uploaded archive into an empty folder (extension uploads, fs upload_zip: one
// module for both). Names are checked by this code (yauzl's
// own checks are off, so each refusal gets its cause): no absolute paths, no `..`, no
// backslashes or NUL, no symlinks or device entries, no encrypted entries, at most `maxEntries`
// entries and `maxUnpackedBytes` in total, counted as the bytes are inflated (not only as
// declared), every entry exactly its declared size with a matching CRC. Files are written
// 0644 and folders 0755, whatever the archive says.
import { createWriteStream } from 'node:fs';
import { chmod, lstat, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { crc32 } from 'node:zlib';
import yauzl, { type Entry, type ZipFile } from 'yauzl';
import { PayloadTooLargeError } from '../errors.js';

export type ArchiveCause =
  | 'bad_zip' // not a zip, truncated, CRC or structure error
  | 'zip_slip' // an entry path leaving the destination (`..`, absolute, drive letter)
  | 'bad_entry_name' // backslash, NUL, empty segment, too long
  | 'duplicate_entry'
  | 'symlink'
  | 'hardlink' // tar only
  | 'bad_zstd' // not zstd data, or damaged (tar.zst only)
  | 'bad_tar' // not a tar, truncated, checksum or structure error (tar only)
  | 'special_file' // device, fifo, socket
  | 'encrypted'
  | 'unsupported_compression'
  | 'too_many_entries'
  | 'size_mismatch'; // an entry's real size differs from the size its header declares

/** Why an archive is refused; its message never names a path of this machine. */
export class ArchiveError extends Error {
  constructor(
    readonly causeCode: ArchiveCause,
    message: string,
  ) {
    super(message);
    this.name = 'ArchiveError';
  }
}

export interface UnzipLimits {
  maxEntries: number;
  maxUnpackedBytes: number;
  /** What the 413 names (default `the unpacked archive`), and the setting of its limit. */
  unpackedWhat?: string;
  unpackedSetting?: string;
}

/** Linux's NAME_MAX and PATH_MAX: a longer segment or path cannot be created. */
const SEGMENT_MAX_BYTES = 255;
const PATH_MAX_BYTES = 4095;

export interface UnzipResult {
  entries: number;
  bytes: number;
}

const S_IFMT = 0o170000;
const S_IFREG = 0o100000;
const S_IFDIR = 0o040000;
const S_IFLNK = 0o120000;
const FILE_MODE = 0o644;
const DIR_MODE = 0o755;

/**
 * The entry's path segments, or an ArchiveError naming what is wrong with it. A leading `./` (as in
 * archives made with `bsdtar -C dir .`) means the root: `./a.js` is `a.js`, and `./` alone is
 * the root folder itself (no segments).
 */
export function checkEntryName(name: string): string[] {
  const shown = shortName(name);
  if (name.includes('\0')) throw new ArchiveError('bad_entry_name', `entry ${shown} has a NUL character in its name`);
  if (name.includes('\\')) throw new ArchiveError('bad_entry_name', `entry ${shown} has a backslash in its name`);
  if (name.startsWith('/') || /^[A-Za-z]:/.test(name)) throw new ArchiveError('zip_slip', `entry ${shown} is an absolute path`);
  let rel = name;
  while (rel.startsWith('./')) rel = rel.slice(2);
  if (rel === '' || rel === '.') return [];
  const segments = rel.replace(/\/$/, '').split('/');
  if (segments.includes('..')) throw new ArchiveError('zip_slip', `entry ${shown} has a ".." segment`);
  const kept = segments.filter((s) => s !== '.');
  if (kept.length === 0 || kept.some((s) => s === '')) throw new ArchiveError('bad_entry_name', `entry ${shown} has an empty path segment`);
  const long = kept.find((s) => Buffer.byteLength(s) > SEGMENT_MAX_BYTES);
  if (long !== undefined) {
    throw new ArchiveError('bad_entry_name', `entry ${shortName(name)} has a path segment of ${Buffer.byteLength(long)} bytes; at most ${SEGMENT_MAX_BYTES} are allowed`);
  }
  if (Buffer.byteLength(rel) > PATH_MAX_BYTES) throw new ArchiveError('bad_entry_name', `entry ${shortName(name)} is longer than ${PATH_MAX_BYTES} bytes`);
  return kept;
}

/** An entry name for a message: quoted, and cut when long. */
function shortName(name: string): string {
  return JSON.stringify(name.length > 80 ? `${name.slice(0, 80)}…` : name);
}

type Kind = 'file' | 'dir';

/** From the Unix mode in the external attributes (when an archiver set one). */
function entryKind(entry: Entry, name: string): Kind {
  const mode = (entry.externalFileAttributes >>> 16) & 0xffff;
  const type = mode & S_IFMT;
  const shown = shortName(name);
  if (type === S_IFLNK) throw new ArchiveError('symlink', `entry ${shown} is a symbolic link`);
  if (type !== 0 && type !== S_IFREG && type !== S_IFDIR) throw new ArchiveError('special_file', `entry ${shown} is a device, fifo or socket`);
  return type === S_IFDIR || name.endsWith('/') ? 'dir' : 'file';
}

/**
 * Counts the real bytes of one entry (and of the whole archive) and computes its CRC-32; an entry
 * with more or fewer bytes than it declares is `size_mismatch`, told here by the count (yauzl's own
 * size checks are off: their errors could only be told apart by their text).
 */
class Meter extends Transform {
  crc = 0;
  private bytes = 0;
  constructor(
    private readonly total: { bytes: number },
    private readonly limits: UnzipLimits,
    private readonly declared: number,
    private readonly name: string,
  ) {
    super();
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.total.bytes += chunk.length;
    this.bytes += chunk.length;
    if (this.total.bytes > this.limits.maxUnpackedBytes) {
      cb(tooLarge(this.limits));
      return;
    }
    if (this.bytes > this.declared) {
      cb(this.mismatch());
      return;
    }
    this.crc = crc32(chunk, this.crc);
    cb(null, chunk);
  }
  override _flush(cb: TransformCallback): void {
    cb(this.bytes === this.declared ? null : this.mismatch());
  }
  private mismatch(): ArchiveError {
    return new ArchiveError('size_mismatch', `entry ${shortName(this.name)}: its real size differs from its declared size (${this.declared} bytes)`);
  }
}

async function openZip(file: string): Promise<ZipFile> {
  try {
    return await yauzl.openPromise(file, { lazyEntries: true, decodeStrings: false, validateEntrySizes: false, strictFileNames: true });
  } catch (err) {
    throw zipError(err);
  }
}

function tooLarge(limits: UnzipLimits): PayloadTooLargeError {
  return new PayloadTooLargeError(limits.unpackedWhat ?? 'the unpacked archive', limits.maxUnpackedBytes, limits.unpackedSetting);
}

/**
 * yauzl's and the file system's errors as causes, by type and code, never by their text (which may
 * hold an entry's name): an entry's data stream is classified where it fails (extractFile); a path
 * the file system cannot take is a bad name, a failed write (ENOSPC, EACCES, ...) is the daemon's
 * problem (a plain Error: 500, the cause logged), the rest a broken archive. No message names a
 * path of this machine.
 */
function zipError(err: unknown): Error {
  if (err instanceof ArchiveError || err instanceof PayloadTooLargeError) return err;
  const e = err as NodeJS.ErrnoException;
  const msg = e.message ?? String(err);
  if (['ENOTDIR', 'EEXIST', 'EISDIR'].includes(e.code ?? '')) return new ArchiveError('bad_zip', 'the archive has a file and a folder at the same path');
  if (e.code === 'ENAMETOOLONG') return new ArchiveError('bad_entry_name', "an entry's path is too long for the file system");
  if (e.syscall !== undefined) return new Error(`unpacking failed: ${e.code ?? e.syscall}`, { cause: err });
  return new ArchiveError('bad_zip', `not a valid zip archive: ${msg.replace(/\/\S+/g, '<path>')}`);
}

export async function safeUnzip(zipPath: string, dest: string, limits: UnzipLimits): Promise<UnzipResult> {
  const zip = await openZip(zipPath);
  try {
    if (zip.entryCount > limits.maxEntries) {
      throw new ArchiveError('too_many_entries', `the archive has ${zip.entryCount} entries; at most ${limits.maxEntries} are allowed`);
    }
    const total = { bytes: 0 };
    let declared = 0;
    let count = 0;
    const seen = new Set<string>();
    // Folders made (or found) so far: a file's parents are made once, not checked again for each of
    // its siblings. Safe because `dest` is the caller's own empty folder that no one else writes
    // while it is unpacked into (fs: a 0700 temp folder; extensions: the daemon's), and a folder
    // cannot turn into a file later (its name is taken: `wx` refuses).
    const made = new Set<string>();
    const parents = async (segs: string[]): Promise<void> => {
      const key = segs.join('/');
      if (made.has(key)) return;
      await mkdirFixed(dest, segs);
      made.add(key);
    };
    for await (const entry of zip.eachEntry()) {
      count++;
      if (count > limits.maxEntries) {
        throw new ArchiveError('too_many_entries', `the archive has more than ${limits.maxEntries} entries`);
      }
      const name = yauzl.getFileNameLowLevel(entry.generalPurposeBitFlag, entry.fileNameRaw, entry.extraFields, true);
      const segments = checkEntryName(name);
      const kind = entryKind(entry, name);
      if (segments.length === 0) {
        // The root folder itself (`./`): nothing to create; as a file it has no name.
        if (kind === 'dir') continue;
        throw new ArchiveError('bad_entry_name', `entry ${shortName(name)} is a file without a name`);
      }
      const rel = segments.join('/');
      if (seen.has(rel)) throw new ArchiveError('duplicate_entry', `entry ${shortName(name)} appears twice`);
      seen.add(rel);
      const target = path.join(dest, ...segments);
      if (kind === 'dir') {
        await parents(segments);
        continue;
      }
      if (entry.isEncrypted()) throw new ArchiveError('encrypted', `entry ${shortName(name)} is encrypted`);
      if (entry.compressionMethod !== 0 && entry.compressionMethod !== 8) {
        throw new ArchiveError('unsupported_compression', `entry ${shortName(name)} uses compression method ${entry.compressionMethod} (only store and deflate are supported)`);
      }
      declared += entry.uncompressedSize;
      if (declared > limits.maxUnpackedBytes) throw tooLarge(limits);
      await parents(segments.slice(0, -1));
      await extractFile(zip, entry, target, new Meter(total, limits, entry.uncompressedSize, name), name);
    }
    return { entries: count, bytes: total.bytes };
  } catch (err) {
    throw zipError(err);
  } finally {
    zip.close();
  }
}

async function extractFile(zip: ZipFile, entry: Entry, target: string, meter: Meter, name: string): Promise<void> {
  // A stored entry whose two sizes differ: yauzl refuses to open it; said here by the sizes themselves.
  if (entry.compressionMethod === 0 && entry.compressedSize !== entry.uncompressedSize) {
    throw new ArchiveError('size_mismatch', `entry ${shortName(name)} is stored, yet declares ${entry.compressedSize} bytes compressed and ${entry.uncompressedSize} unpacked`);
  }
  const input = await zip.openReadStreamPromise(entry);
  // The entry's data stream is classified at its source: its own errors (inflate's, a read past
  // the archive) make the entry damaged; the sizes are the Meter's.
  const failed: { input: unknown } = { input: null };
  input.once('error', (err: Error) => {
    failed.input = err;
  });
  try {
    await pipeline(input, meter, createWriteStream(target, { flags: 'wx', mode: FILE_MODE }));
  } catch (err) {
    if (err !== failed.input || err instanceof ArchiveError || err instanceof PayloadTooLargeError) throw err;
    throw new ArchiveError('bad_zip', `entry ${shortName(name)} has damaged compressed data`);
  }
  await chmod(target, FILE_MODE);
  if ((meter.crc >>> 0) !== (entry.crc32 >>> 0)) throw new ArchiveError('bad_zip', `entry ${shortName(name)} fails its CRC check`);
}

/**
 * Creates each folder of `segments` under `root` with mode 0755 (umask does not apply). A file
 * where a folder must be (an archive with a file and a folder at one path) is ArchiveError `cause`.
 * The one folder maker of the safe unpacks (zip here, tar in tar.ts).
 */
export async function mkdirFixed(root: string, segments: string[], cause: 'bad_zip' | 'bad_tar' = 'bad_zip'): Promise<void> {
  let dir = root;
  for (const s of segments) {
    dir = path.join(dir, s);
    try {
      await mkdir(dir, { mode: DIR_MODE });
      await chmod(dir, DIR_MODE);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'EEXIST' && code !== 'ENOTDIR') throw err;
      if (code === 'ENOTDIR' || !(await lstat(dir)).isDirectory()) throw new ArchiveError(cause, 'the archive has a file and a folder at the same path');
    }
  }
}
