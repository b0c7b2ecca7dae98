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

/** A little-endian field of a header: its width in bytes and its value. */
type Field = [bytes: 2 | 4, value: number];

function le(fields: Field[]): Buffer {
  const buf = Buffer.alloc(fields.reduce((n, [bytes]) => n + bytes, 0));
  let at = 0;
  for (const [bytes, value] of fields) at = bytes === 2 ? buf.writeUInt16LE(value, at) : buf.writeUInt32LE(value, at);
  return buf;
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

    // The fields both headers share, from "version needed" to the name's length.
    const common: Field[] = [[2, 20], [2, flags], [2, method], [2, 0], [2, 0x21], [4, crc], [4, csize], [4, usize], [2, name.length]];
    const local = le([[4, 0x04034b50], ...common, [2, 0]]);
    const external = ((mode & 0xffff) << 16) >>> 0;
    const cd = le([[4, 0x02014b50], [2, (3 << 8) | 20], ...common, [2, 0], [2, 0], [2, 0], [2, 0], [4, external], [4, offset]]);

    parts.push(local, name, data);
    central.push(cd, name);
    offset += local.length + name.length + data.length;
  }
  const cdBuf = Buffer.concat(central);
  const end = le([[4, 0x06054b50], [2, 0], [2, 0], [2, entries.length], [2, entries.length], [4, cdBuf.length], [4, offset], [2, 0]]);
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
