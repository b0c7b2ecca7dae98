// Tar (POSIX ustar, with pax `path` records for long names): a writer of one folder and the safe
// unpack of an uploaded tar, the tar side of unzip.ts with the same checks and the same causes
// (entry names through checkEntryName: no absolute paths, no `..`, no backslashes or NUL; no
// symbolic or hard links, no devices, fifos or sockets; at most `maxEntries` entries and
// `maxUnpackedBytes` in total, checked against each header before a byte of the entry is written).
// Files are written 0644 and folders 0755, whatever the archive says. Written here rather than
// taken from a package: the format is 512-byte blocks, and what the daemon needs of it (regular
// files and folders, nothing else) is a few dozen lines each way, every refusal with its cause.
import { createReadStream, createWriteStream, type Dirent } from 'node:fs';
import { chmod, lstat, open, readdir } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import zlib from 'node:zlib';
import { PayloadTooLargeError } from '../errors.js';
import { ArchiveError, checkEntryName, mkdirFixed, type UnzipLimits, type UnzipResult } from './unzip.js';

const BLOCK = 512;
const FILE_MODE = 0o644;
const DIR_MODE = 0o755;
/** The biggest size 11 octal digits hold (8 GiB - 1): a bigger file is refused on both sides. */
const MAX_ENTRY_BYTES = 0o77777777777;
const READ_CHUNK = 256 * 1024;

// ---- writing ----------------------------------------------------------------------------------

/** `rel` (forward slashes, no leading `./`) → whether to leave it out; called for files and folders. */
export type TarFilter = (rel: string, isDir: boolean) => boolean;

function octal(value: number, width: number): string {
  return `${value.toString(8).padStart(width - 1, '0')}\0`;
}

function header(name: string, size: number, type: '0' | '5' | 'x', mtime: number, mode: number): Buffer {
  const h = Buffer.alloc(BLOCK);
  let prefix = '';
  let short = name;
  if (Buffer.byteLength(name) > 100) {
    // ustar's prefix/name split at a slash; the caller sends a pax record first when it does not fit.
    const cut = name.lastIndexOf('/', 155);
    if (cut > 0 && Buffer.byteLength(name.slice(0, cut)) <= 155 && Buffer.byteLength(name.slice(cut + 1)) <= 100) {
      prefix = name.slice(0, cut);
      short = name.slice(cut + 1);
    } else {
      short = Buffer.from(name).subarray(0, 100).toString('latin1');
    }
  }
  h.write(short, 0, 100, 'utf8');
  h.write(octal(mode, 8), 100, 'ascii');
  h.write(octal(0, 8), 108, 'ascii');
  h.write(octal(0, 8), 116, 'ascii');
  h.write(octal(size, 12), 124, 'ascii');
  h.write(octal(Math.floor(mtime / 1000), 12), 136, 'ascii');
  h.fill(0x20, 148, 156); // the checksum counts its own field as spaces
  h.write(type, 156, 'ascii');
  h.write('ustar\0', 257, 'ascii');
  h.write('00', 263, 'ascii');
  h.write(prefix, 345, 155, 'utf8');
  let sum = 0;
  for (const b of h) sum += b;
  h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'ascii');
  return h;
}

function fitsUstar(name: string): boolean {
  if (Buffer.byteLength(name) <= 100) return true;
  const cut = name.lastIndexOf('/', 155);
  return cut > 0 && Buffer.byteLength(name.slice(0, cut)) <= 155 && Buffer.byteLength(name.slice(cut + 1)) <= 100;
}

function paxRecord(key: string, value: string): Buffer {
  const body = ` ${key}=${value}\n`;
  let len = Buffer.byteLength(body) + 1;
  while (Buffer.byteLength(`${len}${body}`) !== len) len++;
  return Buffer.from(`${len}${body}`);
}

export function padding(size: number): Buffer {
  const rest = size % BLOCK;
  return Buffer.alloc(rest === 0 ? 0 : BLOCK - rest);
}

export function* entryHeaders(name: string, size: number, type: '0' | '5', mtime: number): Generator<Buffer> {
  if (!fitsUstar(name)) {
    const pax = paxRecord('path', name);
    yield header('PaxHeader', pax.length, 'x', mtime, FILE_MODE);
    yield pax;
    yield padding(pax.length);
  }
  yield header(name, size, type, mtime, type === '5' ? DIR_MODE : FILE_MODE);
}

/**
 * The tar of the regular files and folders under `root` (sorted, names relative to it), as a
 * stream; symbolic links, sockets and the like are left out, and so is whatever `skip` names. A
 * file that changes size while it is read is an error (the caller snapshots a folder nobody writes).
 */
export function packTar(root: string, skip: TarFilter = () => false): Readable {
  async function* gen(): AsyncGenerator<Buffer> {
    async function* walk(dir: string, rel: string): AsyncGenerator<Buffer> {
      let items: Dirent[];
      try {
        items = await readdir(dir, { withFileTypes: true });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT' && rel === '') return;
        throw err;
      }
      items.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      for (const item of items) {
        const name = rel === '' ? item.name : `${rel}/${item.name}`;
        const full = path.join(dir, item.name);
        if (item.isDirectory()) {
          if (skip(name, true)) continue;
          const st = await lstat(full);
          yield* entryHeaders(`${name}/`, 0, '5', st.mtimeMs);
          yield* walk(full, name);
        } else if (item.isFile()) {
          if (skip(name, false)) continue;
          yield* fileEntry(full, name);
        }
      }
    }
    yield* walk(root, '');
    yield Buffer.alloc(BLOCK * 2);
  }
  return Readable.from(gen(), { objectMode: false });
}

async function* fileEntry(full: string, name: string): AsyncGenerator<Buffer> {
  const fh = await open(full, 'r');
  try {
    const st = await fh.stat();
    if (st.size > MAX_ENTRY_BYTES) throw new Error(`${name} is bigger than a tar entry can be`);
    yield* entryHeaders(name, st.size, '0', st.mtimeMs);
    let left = st.size;
    while (left > 0) {
      const buf = Buffer.alloc(Math.min(READ_CHUNK, left));
      const { bytesRead } = await fh.read(buf, 0, buf.length, st.size - left);
      if (bytesRead === 0) throw new Error(`${name} shrank while it was archived`);
      left -= bytesRead;
      yield buf.subarray(0, bytesRead);
    }
    yield padding(st.size);
  } finally {
    await fh.close();
  }
}

// ---- reading ----------------------------------------------------------------------------------

/** Exact reads from a stream of chunks. */
class Blocks {
  private buf: Buffer = Buffer.alloc(0);
  private readonly it: AsyncIterator<Buffer>;
  private done = false;
  constructor(src: AsyncIterable<Buffer>) {
    this.it = src[Symbol.asyncIterator]();
  }
  /** Exactly `n` bytes, or fewer at the end of the stream. */
  async read(n: number): Promise<Buffer> {
    while (this.buf.length < n && !this.done) {
      const r = await this.it.next();
      if (r.done) this.done = true;
      else this.buf = this.buf.length === 0 ? r.value : Buffer.concat([this.buf, r.value]);
    }
    const out = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(out.length);
    return out;
  }
  /** `n` bytes in pieces of at most READ_CHUNK, to `sink`; false when the stream ends first. */
  async pipe(n: number, sink: (b: Buffer) => Promise<void>): Promise<boolean> {
    let left = n;
    while (left > 0) {
      const b = await this.read(Math.min(READ_CHUNK, left));
      if (b.length === 0) return false;
      await sink(b);
      left -= b.length;
    }
    return true;
  }
}

function field(h: Buffer, off: number, len: number): string {
  const raw = h.subarray(off, off + len);
  const end = raw.indexOf(0);
  return raw.subarray(0, end < 0 ? len : end).toString('utf8');
}

function num(h: Buffer, off: number, len: number, what: string): number {
  if ((h[off] ?? 0) & 0x80) throw new ArchiveError('bad_tar', `a header's ${what} uses the binary encoding, which is not supported`);
  const s = field(h, off, len).trim();
  if (s === '') return 0;
  if (!/^[0-7]+$/.test(s)) throw new ArchiveError('bad_tar', `a header's ${what} is not an octal number`);
  return parseInt(s, 8);
}

function checksumOk(h: Buffer): boolean {
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : (h[i] as number);
  return num(h, 148, 8, 'checksum') === sum;
}

function paxPath(body: Buffer): string | undefined {
  let found: string | undefined;
  let rest = body.toString('utf8');
  while (rest.length > 0) {
    const m = /^(\d+) /.exec(rest);
    if (m === null) throw new ArchiveError('bad_tar', 'a pax header record is malformed');
    const len = Number(m[1]);
    const rec = Buffer.from(rest).subarray(0, len).toString('utf8');
    if (len <= m[0].length || !rec.endsWith('\n')) throw new ArchiveError('bad_tar', 'a pax header record is malformed');
    const kv = rec.slice(m[0].length, -1);
    const eq = kv.indexOf('=');
    if (eq > 0 && kv.slice(0, eq) === 'path') found = kv.slice(eq + 1);
    rest = Buffer.from(rest).subarray(len).toString('utf8');
  }
  return found;
}

function shown(name: string): string {
  return JSON.stringify(name.length > 80 ? `${name.slice(0, 80)}…` : name);
}

/** pax extended headers and GNU long names bigger than this are refused. */
const META_MAX_BYTES = 64 * 1024;

/**
 * Unpacks the tar `src` into `dest` (an existing, empty folder the caller removes on failure:
 * whatever was written before a refusal stays inside it). Throws ArchiveError (its causeCode the
 * inner_error.code) or PayloadTooLargeError.
 */
export async function safeUntar(src: AsyncIterable<Buffer>, dest: string, limits: UnzipLimits): Promise<UnzipResult> {
  const blocks = new Blocks(src);
  const seen = new Set<string>();
  let count = 0;
  let bytes = 0;
  let longName: string | undefined;
  for (;;) {
    const h = await blocks.read(BLOCK);
    if (h.length === 0 && count === 0) throw new ArchiveError('bad_tar', 'the archive is empty');
    if (h.length < BLOCK) throw new ArchiveError('bad_tar', 'the archive ends inside a header (truncated)');
    if (h.every((b) => b === 0)) break; // the end marker (the second zero block is not required)
    if (!checksumOk(h)) throw new ArchiveError('bad_tar', 'a header fails its checksum: not a tar archive, or a damaged one');
    const type = String.fromCharCode(h[156] as number);
    const size = num(h, 124, 12, 'size');
    const skipPad = padding(size).length;
    if (type === 'x' || type === 'L') {
      if (size > META_MAX_BYTES) throw new ArchiveError('bad_tar', `an extended header of ${size} bytes; at most ${META_MAX_BYTES} are allowed`);
      const body = await blocks.read(size + skipPad);
      if (body.length < size + skipPad) throw new ArchiveError('bad_tar', 'the archive ends inside an extended header (truncated)');
      longName = type === 'x' ? (paxPath(body.subarray(0, size)) ?? longName) : field(body, 0, size);
      continue;
    }
    if (type === 'g') {
      if (size > META_MAX_BYTES) throw new ArchiveError('bad_tar', `an extended header of ${size} bytes; at most ${META_MAX_BYTES} are allowed`);
      await blocks.read(size + skipPad);
      continue;
    }
    const prefix = field(h, 345, 155);
    const name = longName ?? (prefix !== '' ? `${prefix}/${field(h, 0, 100)}` : field(h, 0, 100));
    longName = undefined;
    count++;
    if (count > limits.maxEntries) throw new ArchiveError('too_many_entries', `the archive has more than ${limits.maxEntries} entries`);
    const segments = checkEntryName(name);
    if (type === '2') throw new ArchiveError('symlink', `entry ${shown(name)} is a symbolic link`);
    if (type === '1') throw new ArchiveError('hardlink', `entry ${shown(name)} is a hard link`);
    if (type === '3' || type === '4' || type === '6') throw new ArchiveError('special_file', `entry ${shown(name)} is a device or fifo`);
    const isDir = type === '5';
    if (!isDir && type !== '0' && type !== '\0' && type !== '7') throw new ArchiveError('bad_tar', `entry ${shown(name)} has the unsupported type ${JSON.stringify(type)}`);
    if (segments.length === 0) {
      if (isDir) continue;
      throw new ArchiveError('bad_entry_name', `entry ${shown(name)} is a file without a name`);
    }
    const rel = segments.join('/');
    if (seen.has(rel)) throw new ArchiveError('duplicate_entry', `entry ${shown(name)} appears twice`);
    seen.add(rel);
    if (isDir) {
      if (size !== 0) throw new ArchiveError('bad_tar', `folder entry ${shown(name)} declares ${size} bytes of content`);
      await mkdirFixed(dest, segments, 'bad_tar');
      continue;
    }
    bytes += size;
    if (bytes > limits.maxUnpackedBytes) throw new PayloadTooLargeError(limits.unpackedWhat ?? 'the unpacked archive', limits.maxUnpackedBytes, limits.unpackedSetting);
    await mkdirFixed(dest, segments.slice(0, -1), 'bad_tar');
    const target = path.join(dest, ...segments);
    const out = createWriteStream(target, { flags: 'wx', mode: FILE_MODE });
    const opened = new Promise<void>((resolve, reject) => {
      out.once('open', () => resolve());
      out.once('error', reject);
    });
    try {
      await opened.catch((err: NodeJS.ErrnoException) => {
        if (['ENOTDIR', 'EEXIST', 'EISDIR'].includes(err.code ?? '')) throw new ArchiveError('bad_tar', 'the archive has a file and a folder at the same path');
        throw err;
      });
      const whole = await blocks.pipe(size, (b) => new Promise<void>((resolve, reject) => out.write(b, (err) => (err ? reject(err) : resolve()))));
      if (!whole) throw new ArchiveError('size_mismatch', `entry ${shown(name)} is shorter than its declared ${size} bytes (truncated archive)`);
    } finally {
      await new Promise<void>((resolve) => out.end(() => resolve()));
    }
    await chmod(target, FILE_MODE);
    const pad = await blocks.read(skipPad);
    if (pad.length < skipPad) throw new ArchiveError('bad_tar', 'the archive ends inside an entry (truncated)');
  }
  return { entries: count, bytes };
}

/**
 * safeUntar of the zstd-compressed tar `file`; data that is not zstd is ArchiveError `bad_zstd`.
 * Classified at the source: only an error the decompressor itself emitted is `bad_zstd`, never one
 * whose text mentions zstd (an entry named `../zstd` is `zip_slip`, as it would be uncompressed).
 */
export async function safeUntarZstd(file: string, dest: string, limits: UnzipLimits): Promise<UnzipResult> {
  const z = zlib.createZstdDecompress();
  const src = createReadStream(file);
  const failed: { read: unknown; zstd: unknown } = { read: null, zstd: null };
  src.on('error', (err) => {
    failed.read = err;
    z.destroy(err);
  });
  z.once('error', (err) => {
    if (err !== failed.read) failed.zstd = err;
  });
  src.pipe(z);
  try {
    return await safeUntar(z, dest, limits);
  } catch (err) {
    if (err instanceof ArchiveError || err instanceof PayloadTooLargeError) throw err;
    if (failed.zstd !== null && err === failed.zstd) throw new ArchiveError('bad_zstd', 'the archive is not valid zstd data');
    throw err;
  } finally {
    src.destroy();
    z.destroy();
  }
}

/** The end of a tar: two zero blocks. */
export function tarEnd(): Buffer {
  return Buffer.alloc(BLOCK * 2);
}

