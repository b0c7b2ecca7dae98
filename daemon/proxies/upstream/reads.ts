// Reads of an upstream connection into reused buffers (net.Socket's `onread`), so that relaying an
// answer allocates nothing per socket read: every read of a plain socket gets a new buffer of its
// own (external memory), and at hundreds of MB/s those buffers were what kept the garbage
// collector busy (bench/ANALYSIS.md §8). A buffer is taken from a free list for each read and goes
// back only when `release` is called — by the relay, once the last write of bytes of that read to
// the browser completed — so no byte still queued for writing is ever overwritten. A connection
// that does not read through `onread` (TLS to an https proxy) delivers 'data' events instead; the
// relay listens to both.

import type { Duplex, Writable } from 'node:stream';

/** The size of one read. */
export const READ_BYTES = 64 * 1024;
/** At most this many free buffers are kept for later reads (the rest is left to the collector). */
export const MAX_FREE_BUFFERS = 32;

const free: Buffer[] = [];

function take(): Buffer {
  return free.pop() ?? Buffer.allocUnsafeSlow(READ_BYTES);
}

function giveBack(buf: Buffer): void {
  if (free.length < MAX_FREE_BUFFERS) free.push(buf);
}

/** Where the bytes of one read go; `release` hands the read's buffer back once they are no longer needed. */
export type ReadSink = (data: Buffer, release: () => void) => void;

const noop = (): void => undefined;

/** The `onread` of one upstream socket; bytes read before a sink is attached are kept (copied). */
export class UpstreamReads {
  private sink: ReadSink | null = null;
  private early: Buffer[] = [];
  readonly onread = {
    buffer: take,
    callback: (n: number, buf: Uint8Array): boolean => {
      const b = buf as Buffer;
      if (this.sink !== null) {
        let released = false;
        this.sink(b.subarray(0, n), () => {
          if (released) return;
          released = true;
          giveBack(b);
        });
      } else {
        this.early.push(Buffer.from(b.subarray(0, n)));
        giveBack(b);
      }
      return true;
    },
  };

  /** From now on every read goes to `sink` (and first what was read or kept before). */
  attach(sink: ReadSink): void {
    this.sink = sink;
    for (const e of this.early.splice(0)) sink(e, noop);
  }

  /** Reads are kept (copied) until the next attach(). */
  detach(): void {
    this.sink = null;
  }

  /** Bytes already read (e.g. after a CONNECT answer's head) that the next sink gets first; copied. */
  keep(data: Buffer): void {
    this.early.push(Buffer.from(data));
  }
}

/**
 * Relays the reads of `from` (its `reads`, or its 'data' events when it reads without them: TLS) to
 * `to`, each read's buffer released once its write completed; `from` is paused while `to` is full.
 */
export function relayReads(reads: UpstreamReads, from: Duplex, to: Writable, count: (n: number) => void): void {
  const sink: ReadSink = (data, release) => {
    count(data.length);
    if (!to.write(data, () => release())) from.pause();
  };
  to.on('drain', () => from.resume());
  reads.attach(sink);
  from.on('data', (d: Buffer) => sink(d, noop));
  from.resume();
}
