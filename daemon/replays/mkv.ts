// The smallest Matroska stream ffmpeg reads from a pipe: one MJPEG video track, then each frame a
// cluster of one block with its own time (ms from the start). It carries what image2pipe cannot:
// when each frame is shown, so a frame that does not change is not sent again (ffmpeg repeats it at
// its output's constant rate without decoding or scaling it again). Sizes are written as 8-byte EBML
// numbers (EBMLMaxSizeLength 8); the segment's size is unknown (a live stream).
import { Buffer } from 'node:buffer';

const id = (hex: string): Buffer => Buffer.from(hex, 'hex');

/** An EBML size as 8 bytes (0x01 then 7 bytes of the value). */
function size8(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeUIntBE(n, 2, 6);
  b[0] = 0x01;
  return b;
}

function el(idHex: string, ...payload: Buffer[]): Buffer {
  const body = Buffer.concat(payload);
  return Buffer.concat([id(idHex), size8(body.length), body]);
}

function uint(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(Math.max(0, Math.round(n))));
  let i = 0;
  while (i < 7 && b[i] === 0) i++;
  return b.subarray(i);
}

/**
 * The stream's start: EBML header, a segment of unknown size, its timescale (1 ms) and the MJPEG
 * track. The track states no size: ffmpeg's MJPEG decoder takes a frame much shorter than the
 * stated height for one field of an interlaced picture, and frames change size (a tab switch).
 */
export function mkvHeader(fps: number): Buffer {
  const ebml = el('1a45dfa3', el('4286', uint(1)), el('42f7', uint(1)), el('42f2', uint(4)), el('42f3', uint(8)), el('4282', Buffer.from('matroska')), el('4287', uint(4)), el('4285', uint(2)));
  const segment = Buffer.concat([id('18538067'), Buffer.from('01ffffffffffffff', 'hex')]);
  const info = el('1549a966', el('2ad7b1', uint(1_000_000)));
  // TrackNumber 1, TrackUID 1, TrackType video, CodecID V_MJPEG, DefaultDuration (ns): ffmpeg need not probe the rate.
  const track = el('ae', el('d7', uint(1)), el('73c5', uint(1)), el('83', uint(1)), el('86', Buffer.from('V_MJPEG')), el('23e383', uint(1e9 / fps)));
  return Buffer.concat([ebml, segment, info, el('1654ae6b', track)]);
}

/** One frame: a cluster at `ms` holding one key-frame block of track 1. */
export function mkvFrame(jpeg: Buffer, ms: number): Buffer {
  const head = Buffer.concat([id('1f43b675'), size8(0), id('e7'), size8(8), Buffer.alloc(8), id('a3'), size8(4 + jpeg.length), Buffer.from([0x81, 0, 0, 0x80])]);
  head.writeBigUInt64BE(BigInt(Math.max(0, Math.round(ms))), 4 + 8 + 1 + 8);
  // The cluster's size: its timecode element (1 + 8 + 8) and the block (1 + 8 + 4 + jpeg).
  head.writeUIntBE(17 + 13 + jpeg.length, 4 + 2, 6);
  return Buffer.concat([head, jpeg]);
}
