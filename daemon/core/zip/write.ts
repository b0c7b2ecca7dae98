// A small zip writer (deflate, UTF-8 names, no zip64) for packing an installed extension folder
// into the CRX that policy installs need. Entries are sorted so the same folder packs the same.
// The archive goes straight to a file, one entry at a time, deflated by zlib's thread pool: the
// event loop stays free, and only one file's content (and its deflated form) is in memory.
import { open, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { crc32, deflateRaw } from 'node:zlib';

const deflateRawAsync = promisify(deflateRaw);

interface Packed {
  name: Buffer;
  crc: number;
  size: number;
  compressedSize: number;
  method: number;
  offset: number;
}

const DOS_TIME = 0; // 00:00:00
const DOS_DATE = (2020 - 1980) << 9 | 1 << 5 | 1; // 2020-01-01: fixed, so packing is reproducible
/** Without zip64, sizes and offsets are 32-bit. */
const ZIP32_MAX = 0xffffffff;

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

function localHeader(p: Packed): Buffer {
  const local = Buffer.alloc(30);
  local.writeUInt32LE(0x04034b50, 0);
  local.writeUInt16LE(20, 4);
  local.writeUInt16LE(0x0800, 6);
  local.writeUInt16LE(p.method, 8);
  local.writeUInt16LE(DOS_TIME, 10);
  local.writeUInt16LE(DOS_DATE, 12);
  local.writeUInt32LE(p.crc, 14);
  local.writeUInt32LE(p.compressedSize, 18);
  local.writeUInt32LE(p.size, 22);
  local.writeUInt16LE(p.name.length, 26);
  local.writeUInt16LE(0, 28);
  return local;
}

function centralHeader(p: Packed): Buffer {
  const cd = Buffer.alloc(46);
  cd.writeUInt32LE(0x02014b50, 0);
  cd.writeUInt16LE((3 << 8) | 20, 4); // made by Unix
  cd.writeUInt16LE(20, 6);
  cd.writeUInt16LE(0x0800, 8);
  cd.writeUInt16LE(p.method, 10);
  cd.writeUInt16LE(DOS_TIME, 12);
  cd.writeUInt16LE(DOS_DATE, 14);
  cd.writeUInt32LE(p.crc, 16);
  cd.writeUInt32LE(p.compressedSize, 20);
  cd.writeUInt32LE(p.size, 24);
  cd.writeUInt16LE(p.name.length, 28);
  cd.writeUInt32LE(((0o100644 << 16) >>> 0), 38);
  cd.writeUInt32LE(p.offset, 42);
  return cd;
}

/** Every regular file under `root`, as a zip archive written to `outFile` (created, must not exist). */
export async function zipDirectory(root: string, outFile: string): Promise<void> {
  const fh = await open(outFile, 'wx', 0o600);
  try {
    const packed: Packed[] = [];
    let offset = 0;
    const write = async (...bufs: Buffer[]): Promise<void> => {
      for (const b of bufs) {
        await fh.write(b);
        offset += b.length;
      }
    };
    for (const rel of await listFiles(root)) {
      const content = await readFile(path.join(root, ...rel.split('/')));
      const deflated = await deflateRawAsync(content);
      const useDeflate = deflated.length < content.length;
      const data = useDeflate ? deflated : content;
      if (content.length > ZIP32_MAX || offset + data.length > ZIP32_MAX) throw new Error(`${rel}: the CRX would need zip64, which this writer does not produce`);
      const p: Packed = { name: Buffer.from(rel, 'utf8'), crc: crc32(content) >>> 0, size: content.length, compressedSize: data.length, method: useDeflate ? 8 : 0, offset };
      await write(localHeader(p), p.name, data);
      packed.push(p);
    }
    if (packed.length > 0xffff) throw new Error(`${packed.length} files: the CRX would need zip64, which this writer does not produce`);
    const cdStart = offset;
    for (const p of packed) await write(centralHeader(p), p.name);
    const end = Buffer.alloc(22);
    end.writeUInt32LE(0x06054b50, 0);
    end.writeUInt16LE(packed.length, 8);
    end.writeUInt16LE(packed.length, 10);
    end.writeUInt32LE(offset - cdStart, 12);
    end.writeUInt32LE(cdStart, 16);
    await write(end);
    await fh.sync();
  } finally {
    await fh.close();
  }
}
