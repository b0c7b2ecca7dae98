// A small zip writer (deflate, UTF-8 names, no zip64) for packing an installed extension folder
// into the CRX that policy installs need. Entries are sorted so the same folder packs the same.
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { crc32, deflateRawSync } from 'node:zlib';

interface Packed {
  name: Buffer;
  crc: number;
  size: number;
  data: Buffer;
  method: number;
  offset: number;
}

const DOS_TIME = 0; // 00:00:00
const DOS_DATE = (2020 - 1980) << 9 | 1 << 5 | 1; // 2020-01-01: fixed, so packing is reproducible

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

/** Every regular file under `root`, as a zip archive in memory. */
export async function zipDirectory(root: string): Promise<Buffer> {
  const parts: Buffer[] = [];
  const packed: Packed[] = [];
  let offset = 0;
  for (const rel of await listFiles(root)) {
    const content = await readFile(path.join(root, ...rel.split('/')));
    const deflated = deflateRawSync(content);
    const useDeflate = deflated.length < content.length;
    const p: Packed = {
      name: Buffer.from(rel, 'utf8'),
      crc: crc32(content) >>> 0,
      size: content.length,
      data: useDeflate ? deflated : content,
      method: useDeflate ? 8 : 0,
      offset,
    };
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(0x0800, 6);
    local.writeUInt16LE(p.method, 8);
    local.writeUInt16LE(DOS_TIME, 10);
    local.writeUInt16LE(DOS_DATE, 12);
    local.writeUInt32LE(p.crc, 14);
    local.writeUInt32LE(p.data.length, 18);
    local.writeUInt32LE(p.size, 22);
    local.writeUInt16LE(p.name.length, 26);
    local.writeUInt16LE(0, 28);
    parts.push(local, p.name, p.data);
    offset += local.length + p.name.length + p.data.length;
    packed.push(p);
  }
  const cdStart = offset;
  for (const p of packed) {
    const cd = Buffer.alloc(46);
    cd.writeUInt32LE(0x02014b50, 0);
    cd.writeUInt16LE((3 << 8) | 20, 4); // made by Unix
    cd.writeUInt16LE(20, 6);
    cd.writeUInt16LE(0x0800, 8);
    cd.writeUInt16LE(p.method, 10);
    cd.writeUInt16LE(DOS_TIME, 12);
    cd.writeUInt16LE(DOS_DATE, 14);
    cd.writeUInt32LE(p.crc, 16);
    cd.writeUInt32LE(p.data.length, 20);
    cd.writeUInt32LE(p.size, 24);
    cd.writeUInt16LE(p.name.length, 28);
    cd.writeUInt32LE(((0o100644 << 16) >>> 0), 38);
    cd.writeUInt32LE(p.offset, 42);
    parts.push(cd, p.name);
    offset += cd.length + p.name.length;
  }
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(packed.length, 8);
  end.writeUInt16LE(packed.length, 10);
  end.writeUInt32LE(offset - cdStart, 12);
  end.writeUInt32LE(cdStart, 16);
  parts.push(end);
  return Buffer.concat(parts);
}
