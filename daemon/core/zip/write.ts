// The one zip writer of the daemon (UTF-8 names, deflate or store, zip64 when sizes, offsets or the
// entry count need it). Entries go out one after another through a sink that waits for room, so
// an archive of any size is written with flat memory:
//   - addBuffer: content in memory (small files), deflated on zlib's thread pool, stored instead
//     when deflate does not help; sizes and CRC in the local header.
//   - addStream: content streamed (large files), deflated as it passes, sizes and CRC in a data
//     descriptor after the data (zip64 when the expected size is near 4 GiB).
// zipDirectory() packs an extension folder for a CRX (sorted, fixed times: the same folder packs the
// same bytes); the files API streams download_dir_zip with the same writer.
import { open, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import { crc32, createDeflateRaw, deflateRaw } from 'node:zlib';

const deflateRawAsync = promisify(deflateRaw);

/** Takes the archive's bytes; resolves when it can take more (backpressure). */
export interface ZipSink {
  write(chunk: Buffer): Promise<void>;
}

interface EntryMeta {
  /** Permission bits (default 0644 for files, 0755 for folders). */
  mode?: number;
  /** Modification time; without it a fixed time (2020-01-01) and no extended timestamp (reproducible archives). */
  mtime?: Date;
}

/** Content ready to be added: deflated (method 8) or stored (0). */
export interface Prepared {
  data: Buffer;
  method: number;
  crc: number;
  size: number;
}

interface Central {
  name: Buffer;
  flags: number;
  method: number;
  crc: number;
  size: number;
  compressedSize: number;
  offset: number;
  external: number;
  time: number;
  date: number;
  mtime: number | null;
}

const ZIP32_MAX = 0xffffffff;
/** Streamed entries this close to 4 GiB get zip64 sizes from the start (deflate may grow data a little). */
const ZIP64_STREAM_MARGIN = 64 * 1024 * 1024;
const FLAG_UTF8 = 0x0800;
const FLAG_DESCRIPTOR = 0x0008;
const FIXED_DATE = ((2020 - 1980) << 9) | (1 << 5) | 1;
const BATCH_BYTES = 64 * 1024;
/** Below this, deflate gains next to nothing and costs a trip to the thread pool: stored. */
const MIN_DEFLATE_BYTES = 64;

function dosTime(d: Date): { time: number; date: number } {
  const year = Math.min(2107, Math.max(1980, d.getUTCFullYear()));
  return {
    time: (d.getUTCHours() << 11) | (d.getUTCMinutes() << 5) | (d.getUTCSeconds() >> 1),
    date: ((year - 1980) << 9) | ((d.getUTCMonth() + 1) << 5) | d.getUTCDate(),
  };
}

/** The `UT` extra field (0x5455): the modification time in Unix seconds. */
function timeExtra(mtime: number | null): Buffer {
  if (mtime === null) return Buffer.alloc(0);
  const b = Buffer.alloc(9);
  b.writeUInt16LE(0x5455, 0);
  b.writeUInt16LE(5, 2);
  b.writeUInt8(1, 4);
  b.writeUInt32LE(Math.max(0, Math.min(ZIP32_MAX, mtime)), 5);
  return b;
}

/** The zip64 extra field (0x0001) with the given 8-byte values. */
function zip64Extra(values: number[]): Buffer {
  if (values.length === 0) return Buffer.alloc(0);
  const b = Buffer.alloc(4 + 8 * values.length);
  b.writeUInt16LE(0x0001, 0);
  b.writeUInt16LE(8 * values.length, 2);
  values.forEach((v, i) => b.writeBigUInt64LE(BigInt(v), 4 + 8 * i));
  return b;
}

/** Counts and checksums the uncompressed bytes of a streamed entry. */
class Checksum extends Transform {
  crc = 0;
  size = 0;
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.crc = crc32(chunk, this.crc);
    this.size += chunk.length;
    cb(null, chunk);
  }
}

export class ZipWriter {
  private offset = 0;
  private readonly central: Central[] = [];
  private pending: Buffer[] = [];
  private pendingBytes = 0;

  constructor(
    private readonly sink: ZipSink,
    private readonly level = 6,
  ) {}

  /** Bytes of the archive so far. */
  get bytes(): number {
    return this.offset + this.pendingBytes;
  }

  async addDirectory(name: string, meta: EntryMeta = {}): Promise<void> {
    const n = name.endsWith('/') ? name : `${name}/`;
    const mode = meta.mode ?? 0o755;
    const c = this.entry(n, meta, 0, 0, (((0o040000 | mode) << 16) | 0x10) >>> 0);
    await this.local(c, false);
    this.central.push(c);
  }

  /**
   * Deflates `content` on zlib's thread pool (stored instead when that does not make it smaller, or
   * when it is too small to gain): several can be prepared at once, then added in order.
   */
  static async prepare(content: Buffer, level = 6): Promise<Prepared> {
    const deflated = content.length < MIN_DEFLATE_BYTES ? content : await deflateRawAsync(content, { level });
    const useDeflate = deflated.length < content.length;
    return { data: useDeflate ? deflated : content, method: useDeflate ? 8 : 0, crc: crc32(content) >>> 0, size: content.length };
  }

  async addBuffer(name: string, content: Buffer, meta: EntryMeta = {}): Promise<void> {
    await this.addPrepared(name, await ZipWriter.prepare(content, this.level), meta);
  }

  async addPrepared(name: string, p: Prepared, meta: EntryMeta = {}): Promise<void> {
    const c = this.entry(name, meta, p.method, 0, ((0o100000 | (meta.mode ?? 0o644)) << 16) >>> 0);
    c.crc = p.crc;
    c.size = p.size;
    c.compressedSize = p.data.length;
    await this.local(c, c.size >= ZIP32_MAX || c.compressedSize >= ZIP32_MAX);
    await this.put(p.data);
    this.central.push(c);
  }

  /** Streams `source` (about `expectedSize` bytes) deflated, sizes in a data descriptor. */
  async addStream(name: string, source: Readable, expectedSize: number, meta: EntryMeta = {}): Promise<void> {
    const zip64 = expectedSize >= ZIP32_MAX - ZIP64_STREAM_MARGIN;
    const c = this.entry(name, meta, 8, FLAG_DESCRIPTOR, ((0o100000 | (meta.mode ?? 0o644)) << 16) >>> 0);
    await this.local(c, zip64);
    const sum = new Checksum();
    let compressed = 0;
    await pipeline(source, sum, createDeflateRaw({ level: this.level, chunkSize: 256 * 1024 }), async (deflated: AsyncIterable<Buffer>) => {
      for await (const chunk of deflated) {
        compressed += chunk.length;
        await this.put(chunk);
      }
    });
    c.crc = sum.crc >>> 0;
    c.size = sum.size;
    c.compressedSize = compressed;
    if (!zip64 && (c.size >= ZIP32_MAX || c.compressedSize >= ZIP32_MAX)) throw new Error(`${name}: grew past 4 GiB while being archived`);
    const d = Buffer.alloc(zip64 ? 24 : 16);
    d.writeUInt32LE(0x08074b50, 0);
    d.writeUInt32LE(c.crc, 4);
    if (zip64) {
      d.writeBigUInt64LE(BigInt(c.compressedSize), 8);
      d.writeBigUInt64LE(BigInt(c.size), 16);
    } else {
      d.writeUInt32LE(c.compressedSize, 8);
      d.writeUInt32LE(c.size, 12);
    }
    await this.put(d);
    this.central.push(c);
  }

  /** The central directory and its end records; the archive is complete when this resolves. */
  async finish(): Promise<void> {
    const cdStart = this.bytes;
    for (const c of this.central) await this.put(this.centralHeader(c));
    const cdSize = this.bytes - cdStart;
    const count = this.central.length;
    if (count >= 0xffff || cdStart >= ZIP32_MAX || cdSize >= ZIP32_MAX) {
      const rec = Buffer.alloc(56);
      rec.writeUInt32LE(0x06064b50, 0);
      rec.writeBigUInt64LE(44n, 4);
      rec.writeUInt16LE((3 << 8) | 45, 12);
      rec.writeUInt16LE(45, 14);
      rec.writeBigUInt64LE(BigInt(count), 24);
      rec.writeBigUInt64LE(BigInt(count), 32);
      rec.writeBigUInt64LE(BigInt(cdSize), 40);
      rec.writeBigUInt64LE(BigInt(cdStart), 48);
      const loc = Buffer.alloc(20);
      loc.writeUInt32LE(0x07064b50, 0);
      loc.writeBigUInt64LE(BigInt(cdStart + cdSize), 8);
      loc.writeUInt32LE(1, 16);
      await this.put(Buffer.concat([rec, loc]));
    }
    const end = Buffer.alloc(22);
    end.writeUInt32LE(0x06054b50, 0);
    end.writeUInt16LE(Math.min(count, 0xffff), 8);
    end.writeUInt16LE(Math.min(count, 0xffff), 10);
    end.writeUInt32LE(Math.min(cdSize, ZIP32_MAX), 12);
    end.writeUInt32LE(Math.min(cdStart, ZIP32_MAX), 16);
    await this.put(end);
    await this.flush();
  }

  private entry(name: string, meta: EntryMeta, method: number, flags: number, external: number): Central {
    const t = meta.mtime === undefined ? { time: 0, date: FIXED_DATE } : dosTime(meta.mtime);
    const mtime = meta.mtime === undefined ? null : Math.floor(meta.mtime.getTime() / 1000);
    return { name: Buffer.from(name, 'utf8'), flags: FLAG_UTF8 | flags, method, crc: 0, size: 0, compressedSize: 0, offset: this.bytes, external, ...t, mtime };
  }

  private async local(c: Central, zip64: boolean): Promise<void> {
    const descriptor = (c.flags & FLAG_DESCRIPTOR) !== 0;
    const extra = Buffer.concat([zip64 ? zip64Extra(descriptor ? [0, 0] : [c.size, c.compressedSize]) : Buffer.alloc(0), timeExtra(c.mtime)]);
    const h = Buffer.alloc(30);
    h.writeUInt32LE(0x04034b50, 0);
    h.writeUInt16LE(zip64 ? 45 : 20, 4);
    h.writeUInt16LE(c.flags, 6);
    h.writeUInt16LE(c.method, 8);
    h.writeUInt16LE(c.time, 10);
    h.writeUInt16LE(c.date, 12);
    h.writeUInt32LE(descriptor ? 0 : c.crc, 14);
    h.writeUInt32LE(zip64 ? ZIP32_MAX : descriptor ? 0 : c.compressedSize, 18);
    h.writeUInt32LE(zip64 ? ZIP32_MAX : descriptor ? 0 : c.size, 22);
    h.writeUInt16LE(c.name.length, 26);
    h.writeUInt16LE(extra.length, 28);
    await this.put(Buffer.concat([h, c.name, extra]));
  }

  private centralHeader(c: Central): Buffer {
    const big = [c.size, c.compressedSize, c.offset].map((v) => v >= ZIP32_MAX);
    const extra = Buffer.concat([zip64Extra([c.size, c.compressedSize, c.offset].filter((_v, i) => big[i])), timeExtra(c.mtime)]);
    const version = big.some(Boolean) ? 45 : 20;
    const h = Buffer.alloc(46);
    h.writeUInt32LE(0x02014b50, 0);
    h.writeUInt16LE((3 << 8) | version, 4); // made by Unix
    h.writeUInt16LE(version, 6);
    h.writeUInt16LE(c.flags, 8);
    h.writeUInt16LE(c.method, 10);
    h.writeUInt16LE(c.time, 12);
    h.writeUInt16LE(c.date, 14);
    h.writeUInt32LE(c.crc, 16);
    h.writeUInt32LE(big[1] ? ZIP32_MAX : c.compressedSize, 20);
    h.writeUInt32LE(big[0] ? ZIP32_MAX : c.size, 24);
    h.writeUInt16LE(c.name.length, 28);
    h.writeUInt16LE(extra.length, 30);
    h.writeUInt32LE(c.external, 38);
    h.writeUInt32LE(big[2] ? ZIP32_MAX : c.offset, 42);
    return Buffer.concat([h, c.name, extra]);
  }

  /** Small pieces are batched into writes of about 64 KiB. */
  private async put(b: Buffer): Promise<void> {
    this.pending.push(b);
    this.pendingBytes += b.length;
    if (this.pendingBytes >= BATCH_BYTES) await this.flush();
  }

  private async flush(): Promise<void> {
    if (this.pendingBytes === 0) return;
    const chunk = this.pending.length === 1 ? (this.pending[0] as Buffer) : Buffer.concat(this.pending, this.pendingBytes);
    this.offset += this.pendingBytes;
    this.pending = [];
    this.pendingBytes = 0;
    await this.sink.write(chunk);
  }
}

async function listFiles(root: string, rel = ''): Promise<string[]> {
  const out: string[] = [];
  const entries = await readdir(path.join(root, rel), { withFileTypes: true });
  for (const e of entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    const r = rel === '' ? e.name : `${rel}/${e.name}`;
    if (e.isDirectory()) out.push(...(await listFiles(root, r)));
    else if (e.isFile()) out.push(r);
  }
  return out;
}

/** Every regular file under `root` (sorted, mode 0644, fixed time), as a zip written to `outFile` (created, must not exist). */
export async function zipDirectory(root: string, outFile: string): Promise<void> {
  const fh = await open(outFile, 'wx', 0o600);
  try {
    const zip = new ZipWriter({ write: async (chunk) => void (await fh.write(chunk)) });
    for (const rel of await listFiles(root)) await zip.addBuffer(rel, await readFile(path.join(root, ...rel.split('/'))));
    await zip.finish();
    await fh.sync();
  } finally {
    await fh.close();
  }
}
