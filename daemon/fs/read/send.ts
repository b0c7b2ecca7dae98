// read_file: the file opened once (checked, paths/resolve.ts), its bytes streamed from disk to the
// response with backpressure (a 2 GiB file costs a few MiB of memory), a single `Range` honoured.
import { constants, type Stats } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import { ConflictError, RangeNotSatisfiableError } from '../../core/errors.js';
import { forbidden, type Guard } from '../paths/guard.js';
import { openChecked, resolve } from '../paths/resolve.js';

/** Reads from disk in chunks of this size. */
const READ_CHUNK_BYTES = 1024 * 1024;
/**
 * Chunks read ahead of the socket: each buffer is read into again only once the socket has taken
 * its last bytes (the write's callback), so a read costs at most this many chunks of memory,
 * allocated once per request. Why not a read stream: it allocates a new 1 MiB buffer per chunk, and
 * the garbage collector running for that external memory was the largest part of a 1 GiB read's CPU
 * in the daemon (bench/ANALYSIS.md, row 12).
 */
const CHUNKS_IN_FLIGHT = 3;

/** Inclusive byte offsets. */
interface ByteRange {
  start: number;
  end: number;
}

/**
 * The one range of a `Range` header, or null for the whole file: no header, a unit other than
 * bytes, several ranges, or a malformed one are answered with the whole file (RFC 9110 lets a
 * server ignore them). A range that starts past the end: 416.
 */
export function parseRange(header: string | undefined, size: number): ByteRange | null {
  if (header === undefined) return null;
  const m = /^\s*bytes\s*=\s*(\d{0,19})\s*-\s*(\d{0,19})\s*$/i.exec(header);
  if (!m || (m[1] === '' && m[2] === '')) return null;
  if (m[1] === '') {
    const n = Number(m[2]);
    if (n === 0 || size === 0) throw new RangeNotSatisfiableError(size);
    return { start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(m[1]);
  if (m[2] !== '' && Number(m[2]) < start) return null; // malformed: ignored
  if (start >= size) throw new RangeNotSatisfiableError(size);
  return { start, end: m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1) };
}

interface OpenedFile {
  fh: FileHandle;
  stat: Stats;
  real: string;
  name: string;
}

/** Opens a regular file to read: a final symlink followed, folders 409, devices and fifos 403. */
export async function openForRead(guard: Guard, input: string): Promise<OpenedFile> {
  const t = await resolve(guard, input, { follow: true, access: 'read' });
  try {
    if (t.name === '' || t.stat?.isDirectory()) throw new ConflictError('is_a_directory', `${input} is a folder`);
    if (!t.stat?.isFile()) throw forbidden('special_file', input);
    // O_NONBLOCK: a fifo swapped in after the check must not hold a thread of the pool forever.
    const { fh, stat } = await openChecked(guard, t, constants.O_RDONLY | constants.O_NONBLOCK);
    if (!stat.isFile()) {
      await fh.close();
      throw forbidden('special_file', input);
    }
    return { fh, stat, real: t.real, name: t.name };
  } finally {
    await t.release();
  }
}

/**
 * The real path of a regular file the API may read (every rule of openForRead: symlinks resolved
 * step by step, the state dir, special file systems, protected inodes), or its error: for readers
 * outside this module (a `path` log stream).
 */
export function readablePath(guard: Guard): (input: string) => Promise<string> {
  return async (input) => {
    const f = await openForRead(guard, input);
    await f.fh.close();
    return f.real;
  };
}

/** Writes the headers and streams the file (or the range); the handle is closed when done. */
export async function sendFile(res: ServerResponse, file: OpenedFile, range: ByteRange | null, onBytes: (n: number) => void): Promise<void> {
  const { fh, stat } = file;
  try {
    const start = range?.start ?? 0;
    const end = range?.end ?? stat.size - 1;
    const length = Math.max(0, end - start + 1);
    res.writeHead(range === null ? 200 : 206, {
      'content-type': 'application/octet-stream',
      'content-length': String(length),
      'accept-ranges': 'bytes',
      'last-modified': stat.mtime.toUTCString(),
      ...(range === null ? {} : { 'content-range': `bytes ${start}-${end}/${stat.size}` }),
    });
    if (res.req.method === 'HEAD' || length === 0) {
      res.end();
      return;
    }
    await pump(fh, res, start, length, onBytes);
  } finally {
    await fh.close().catch(() => undefined);
  }
}

/**
 * Streams `length` bytes of `fh` from `start` to `res` through a few reused buffers: a read runs
 * while earlier chunks are written, and waits for a buffer the socket has let go of (backpressure:
 * at most CHUNKS_IN_FLIGHT chunks are read ahead of the client). A file that shrank while being
 * sent, or a read error after the headers: the response is cut (the client sees a short body,
 * never a wrong one). A client gone: stops reading.
 */
async function pump(fh: FileHandle, res: ServerResponse, start: number, length: number, onBytes: (n: number) => void): Promise<void> {
  const free: Buffer[] = [];
  let allocated = 0;
  let closed = false;
  let wake: (() => void) | null = null;
  const signal = (): void => {
    const w = wake;
    wake = null;
    w?.();
  };
  const onClose = (): void => {
    closed = true;
    signal();
  };
  res.on('close', onClose);
  try {
    let pos = start;
    const end = start + length;
    while (pos < end && !closed) {
      let buf = free.pop();
      if (buf === undefined && allocated < CHUNKS_IN_FLIGHT) {
        buf = Buffer.allocUnsafeSlow(Math.min(READ_CHUNK_BYTES, length));
        allocated++;
      }
      if (buf === undefined) {
        await new Promise<void>((resolve) => (wake = resolve));
        continue;
      }
      let bytesRead: number;
      try {
        ({ bytesRead } = await fh.read(buf, 0, Math.min(buf.length, end - pos), pos));
      } catch {
        bytesRead = -1;
      }
      if (closed) return;
      if (bytesRead <= 0) {
        res.destroy();
        return;
      }
      pos += bytesRead;
      onBytes(bytesRead);
      const chunk = buf;
      res.write(bytesRead === chunk.length ? chunk : chunk.subarray(0, bytesRead), () => {
        free.push(chunk);
        signal();
      });
    }
    if (!closed) res.end();
  } finally {
    res.off('close', onClose);
  }
}
