// A small PNG decoder for the screenshot tests (no dependency): 8-bit truecolour or greyscale,
// with or without alpha, not interlaced — what Chromium writes. Pixels come back as RGBA.
import { inflateSync } from 'node:zlib';

export interface Image {
  width: number;
  height: number;
  /** RGBA, row after row. */
  rgba: Buffer;
}

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
/** Colour type → channels. */
const CHANNELS: Record<number, number> = { 0: 1, 2: 3, 4: 2, 6: 4 };

export function decodePng(png: Buffer): Image {
  if (png.length < 8 || !png.subarray(0, 8).equals(SIGNATURE)) throw new Error('not a PNG (signature)');
  let width = 0;
  let height = 0;
  let channels = 0;
  const idat: Buffer[] = [];
  for (let off = 8; off + 8 <= png.length; ) {
    const len = png.readUInt32BE(off);
    const type = png.toString('latin1', off + 4, off + 8);
    const data = png.subarray(off + 8, off + 8 + len);
    off += 12 + len;
    if (type === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      const depth = data[8] as number;
      const colour = data[9] as number;
      if (depth !== 8 || CHANNELS[colour] === undefined || data[12] !== 0) throw new Error(`unsupported PNG: depth ${depth}, colour type ${colour}, interlace ${data[12]}`);
      channels = CHANNELS[colour];
    } else if (type === 'IDAT') {
      idat.push(data);
    } else if (type === 'IEND') {
      break;
    }
  }
  if (width === 0 || channels === 0) throw new Error('no IHDR');
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  const out = Buffer.alloc(width * height * channels);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)] as number;
    const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    const cur = out.subarray(y * stride, (y + 1) * stride);
    const prev = y > 0 ? out.subarray((y - 1) * stride, y * stride) : null;
    for (let i = 0; i < stride; i++) {
      const a = i >= channels ? (cur[i - channels] as number) : 0;
      const b = prev !== null ? (prev[i] as number) : 0;
      const c = prev !== null && i >= channels ? (prev[i - channels] as number) : 0;
      const x = line[i] as number;
      let v: number;
      if (filter === 0) v = x;
      else if (filter === 1) v = x + a;
      else if (filter === 2) v = x + b;
      else if (filter === 3) v = x + ((a + b) >> 1);
      else if (filter === 4) v = x + paeth(a, b, c);
      else throw new Error(`bad PNG filter ${filter} on row ${y}`);
      cur[i] = v & 0xff;
    }
  }
  const rgba = Buffer.alloc(width * height * 4);
  for (let p = 0; p < width * height; p++) {
    const s = p * channels;
    if (channels >= 3) {
      rgba[p * 4] = out[s] as number;
      rgba[p * 4 + 1] = out[s + 1] as number;
      rgba[p * 4 + 2] = out[s + 2] as number;
    } else {
      rgba.fill(out[s] as number, p * 4, p * 4 + 3);
    }
    rgba[p * 4 + 3] = channels === 4 ? (out[s + 3] as number) : channels === 2 ? (out[s + 1] as number) : 255;
  }
  return { width, height, rgba };
}

function paeth(a: number, b: number, c: number): number {
  const p = a + b - c;
  const pa = Math.abs(p - a);
  const pb = Math.abs(p - b);
  const pc = Math.abs(p - c);
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

/** The pixel at (x, y) as [r, g, b, a]. */
export function pixel(img: Image, x: number, y: number): [number, number, number, number] {
  const i = (y * img.width + x) * 4;
  return [img.rgba[i] as number, img.rgba[i + 1] as number, img.rgba[i + 2] as number, img.rgba[i + 3] as number];
}

/** `#rrggbb` of the pixel at (x, y). */
export function hexAt(img: Image, x: number, y: number): string {
  return `#${pixel(img, x, y)
    .slice(0, 3)
    .map((v) => v.toString(16).padStart(2, '0'))
    .join('')}`;
}
