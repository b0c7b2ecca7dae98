// A zip writer for the tests, written byte by byte so that it can also lie: declared sizes or
// CRCs that do not match the data, symlink and device modes, absolute or `..` names, encrypted
// flags. (Zip libraries refuse to write such archives; the daemon must refuse to read them.)
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { crc32, deflateRawSync } from 'node:zlib';
import { fixtures } from '../kit/daemon.js';

export interface ZipEntry {
  /** The stored name, as given (a string is written as UTF-8). */
  name: string | Buffer;
  /** File content; leave out for a folder entry (name ending in "/"). */
  data?: Buffer | string;
  method?: 'store' | 'deflate';
  /** Unix mode in the external attributes, e.g. 0o120777 for a symlink, 0o020644 for a char device. */
  mode?: number;
  /** Lie: the uncompressed size written in both headers. */
  declaredSize?: number;
  /** Lie: the compressed size written in both headers. */
  declaredCompressedSize?: number;
  /** Lie: the CRC-32 written in both headers. */
  crc?: number;
  /** Sets the "encrypted" flag (the data is not actually encrypted). */
  encrypted?: boolean;
}

export function buildZip(entries: ZipEntry[]): Buffer {
  const parts: Buffer[] = [];
  const central: Buffer[] = [];
  let offset = 0;
  for (const e of entries) {
    const name = typeof e.name === 'string' ? Buffer.from(e.name, 'utf8') : e.name;
    const content = e.data === undefined ? Buffer.alloc(0) : Buffer.from(e.data);
    const deflate = e.method === 'deflate' || (e.method === undefined && content.length > 64);
    const data = deflate ? deflateRawSync(content) : content;
    const method = deflate ? 8 : 0;
    const crc = e.crc ?? crc32(content) >>> 0;
    const usize = e.declaredSize ?? content.length;
    const csize = e.declaredCompressedSize ?? data.length;
    const flags = 0x0800 | (e.encrypted ? 1 : 0);
    const isDir = e.data === undefined;
    const mode = e.mode ?? (isDir ? 0o040755 : 0o100644);

    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(flags, 6);
    local.writeUInt16LE(method, 8);
    local.writeUInt16LE(0, 10);
    local.writeUInt16LE(0x21, 12);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(csize, 18);
    local.writeUInt32LE(usize, 22);
    local.writeUInt16LE(name.length, 26);
    local.writeUInt16LE(0, 28);

    const cd = Buffer.alloc(46);
    cd.writeUInt32LE(0x02014b50, 0);
    cd.writeUInt16LE((3 << 8) | 20, 4);
    cd.writeUInt16LE(20, 6);
    cd.writeUInt16LE(flags, 8);
    cd.writeUInt16LE(method, 10);
    cd.writeUInt16LE(0, 12);
    cd.writeUInt16LE(0x21, 14);
    cd.writeUInt32LE(crc, 16);
    cd.writeUInt32LE(csize, 20);
    cd.writeUInt32LE(usize, 24);
    cd.writeUInt16LE(name.length, 28);
    cd.writeUInt32LE(((mode & 0xffff) << 16) >>> 0, 38);
    cd.writeUInt32LE(offset, 42);

    parts.push(local, name, data);
    central.push(cd, name);
    offset += local.length + name.length + data.length;
  }
  const cdBuf = Buffer.concat(central);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(cdBuf.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...parts, cdBuf, end]);
}

/** The files of a folder as zip entries (sorted), each name prefixed with `prefix`. */
export function treeEntries(dir: string, prefix = ''): ZipEntry[] {
  const out: ZipEntry[] = [];
  const walk = (rel: string): void => {
    for (const name of readdirSync(path.join(dir, rel)).sort()) {
      const r = rel === '' ? name : `${rel}/${name}`;
      if (statSync(path.join(dir, r)).isDirectory()) walk(r);
      else out.push({ name: prefix + r, data: readFileSync(path.join(dir, r)) });
    }
  };
  walk('');
  return out;
}

export function fixtureDir(name: string): string {
  return path.join(fixtures, 'extensions', name);
}

/**
 * A zip of fixtures/extensions/<name>, optionally with manifest fields changed (`version`, …)
 * and inside a single top folder.
 */
export function fixtureZip(name: string, opts: { manifest?: Record<string, unknown>; topFolder?: string } = {}): Buffer {
  const prefix = opts.topFolder === undefined ? '' : `${opts.topFolder}/`;
  const entries = treeEntries(fixtureDir(name), prefix);
  if (opts.manifest) {
    const m = entries.find((e) => e.name === `${prefix}manifest.json`);
    if (!m) throw new Error(`${name} has no manifest.json`);
    m.data = JSON.stringify({ ...(JSON.parse(String(m.data)) as Record<string, unknown>), ...opts.manifest });
  }
  if (prefix !== '') entries.unshift({ name: prefix });
  return buildZip(entries);
}
