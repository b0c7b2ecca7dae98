// Safe unzip of an uploaded archive into an empty folder. Names are checked by this code (yauzl's
// own checks are off, so each refusal gets its cause): no absolute paths, no `..`, no
// backslashes or NUL, no symlinks or device entries, no encrypted entries, at most `maxEntries`
// entries and `maxUnpackedBytes` in total, counted as the bytes are inflated (not only as
// declared), every entry exactly its declared size with a matching CRC. Files are written
// 0644 and folders 0755, whatever the archive says.
import { createWriteStream } from 'node:fs';
import { chmod, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { crc32 } from 'node:zlib';
import yauzl, { type Entry, type ZipFile } from 'yauzl';
import { PayloadTooLargeError } from '../core/errors.js';
import { Rejection } from './rejection.js';

export interface UnzipLimits {
  maxEntries: number;
  maxUnpackedBytes: number;
}

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
 * The entry's path segments, or a Rejection naming what is wrong with it. A leading `./` (as in
 * archives made with `bsdtar -C dir .`) means the root: `./a.js` is `a.js`, and `./` alone is
 * the root folder itself (no segments).
 */
export function checkEntryName(name: string): string[] {
  const shown = JSON.stringify(name);
  if (name.includes('\0')) throw new Rejection('bad_entry_name', `entry ${shown} has a NUL character in its name`);
  if (name.includes('\\')) throw new Rejection('bad_entry_name', `entry ${shown} has a backslash in its name`);
  if (name.startsWith('/') || /^[A-Za-z]:/.test(name)) throw new Rejection('zip_slip', `entry ${shown} is an absolute path`);
  let rel = name;
  while (rel.startsWith('./')) rel = rel.slice(2);
  if (rel === '' || rel === '.') return [];
  const segments = rel.replace(/\/$/, '').split('/');
  if (segments.includes('..')) throw new Rejection('zip_slip', `entry ${shown} has a ".." segment`);
  const kept = segments.filter((s) => s !== '.');
  if (kept.length === 0 || kept.some((s) => s === '')) throw new Rejection('bad_entry_name', `entry ${shown} has an empty path segment`);
  return kept;
}

type Kind = 'file' | 'dir';

/** From the Unix mode in the external attributes (when an archiver set one). */
function entryKind(entry: Entry, name: string): Kind {
  const mode = (entry.externalFileAttributes >>> 16) & 0xffff;
  const type = mode & S_IFMT;
  const shown = JSON.stringify(name);
  if (type === S_IFLNK) throw new Rejection('symlink', `entry ${shown} is a symbolic link`);
  if (type !== 0 && type !== S_IFREG && type !== S_IFDIR) throw new Rejection('special_file', `entry ${shown} is a device, fifo or socket`);
  return type === S_IFDIR || name.endsWith('/') ? 'dir' : 'file';
}

/** Counts the real bytes of one entry (and of the whole archive) and computes its CRC-32. */
class Meter extends Transform {
  crc = 0;
  constructor(
    private readonly total: { bytes: number },
    private readonly limit: number,
  ) {
    super();
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.total.bytes += chunk.length;
    if (this.total.bytes > this.limit) {
      cb(new PayloadTooLargeError('the unpacked extension', this.limit));
      return;
    }
    this.crc = crc32(chunk, this.crc);
    cb(null, chunk);
  }
}

async function openZip(file: string): Promise<ZipFile> {
  try {
    return await yauzl.openPromise(file, { lazyEntries: true, decodeStrings: false, validateEntrySizes: true, strictFileNames: true });
  } catch (err) {
    throw zipError(err);
  }
}

/** yauzl's errors as causes: size assertions are lies about the size, the rest a broken archive. */
function zipError(err: unknown): Error {
  if (err instanceof Rejection || err instanceof PayloadTooLargeError) return err;
  const msg = (err as Error).message ?? String(err);
  if (/bytes in the stream|size mismatch/i.test(msg)) return new Rejection('size_mismatch', `an entry's real size differs from its declared size (${msg})`);
  if (['ENOTDIR', 'EEXIST', 'EISDIR'].includes((err as NodeJS.ErrnoException).code ?? '')) {
    return new Rejection('bad_zip', 'the archive has a file and a folder at the same path');
  }
  return new Rejection('bad_zip', `not a valid zip archive: ${msg}`);
}

export async function safeUnzip(zipPath: string, dest: string, limits: UnzipLimits): Promise<UnzipResult> {
  const zip = await openZip(zipPath);
  try {
    if (zip.entryCount > limits.maxEntries) {
      throw new Rejection('too_many_entries', `the archive has ${zip.entryCount} entries; at most ${limits.maxEntries} are allowed`);
    }
    const total = { bytes: 0 };
    let declared = 0;
    let count = 0;
    const seen = new Set<string>();
    for await (const entry of zip.eachEntry()) {
      count++;
      if (count > limits.maxEntries) {
        throw new Rejection('too_many_entries', `the archive has more than ${limits.maxEntries} entries`);
      }
      const name = yauzl.getFileNameLowLevel(entry.generalPurposeBitFlag, entry.fileNameRaw, entry.extraFields, true);
      const segments = checkEntryName(name);
      const kind = entryKind(entry, name);
      if (segments.length === 0) {
        // The root folder itself (`./`): nothing to create; as a file it has no name.
        if (kind === 'dir') continue;
        throw new Rejection('bad_entry_name', `entry ${JSON.stringify(name)} is a file without a name`);
      }
      const rel = segments.join('/');
      if (seen.has(rel)) throw new Rejection('duplicate_entry', `entry ${JSON.stringify(name)} appears twice`);
      seen.add(rel);
      const target = path.join(dest, ...segments);
      if (kind === 'dir') {
        await mkdirFixed(dest, segments);
        continue;
      }
      if (entry.isEncrypted()) throw new Rejection('encrypted', `entry ${JSON.stringify(name)} is encrypted`);
      if (entry.compressionMethod !== 0 && entry.compressionMethod !== 8) {
        throw new Rejection('unsupported_compression', `entry ${JSON.stringify(name)} uses compression method ${entry.compressionMethod} (only store and deflate are supported)`);
      }
      declared += entry.uncompressedSize;
      if (declared > limits.maxUnpackedBytes) throw new PayloadTooLargeError('the unpacked extension', limits.maxUnpackedBytes);
      await mkdirFixed(dest, segments.slice(0, -1));
      await extractFile(zip, entry, target, new Meter(total, limits.maxUnpackedBytes), name);
    }
    return { entries: count, bytes: total.bytes };
  } catch (err) {
    throw zipError(err);
  } finally {
    zip.close();
  }
}

async function extractFile(zip: ZipFile, entry: Entry, target: string, meter: Meter, name: string): Promise<void> {
  const input = await zip.openReadStreamPromise(entry);
  await pipeline(input, meter, createWriteStream(target, { flags: 'wx', mode: FILE_MODE }));
  await chmod(target, FILE_MODE);
  if ((meter.crc >>> 0) !== (entry.crc32 >>> 0)) throw new Rejection('bad_zip', `entry ${JSON.stringify(name)} fails its CRC check`);
}

/** Creates each folder of `segments` under `root` with mode 0755 (umask does not apply). */
async function mkdirFixed(root: string, segments: string[]): Promise<void> {
  let dir = root;
  for (const s of segments) {
    dir = path.join(dir, s);
    try {
      await mkdir(dir, { mode: DIR_MODE });
      await chmod(dir, DIR_MODE);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
}
