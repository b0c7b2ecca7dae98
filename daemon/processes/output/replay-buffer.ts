// The output of one process: a bounded ring of chunks (stdout and stderr interleaved in the order
// they arrived) addressed by absolute byte offsets since the start. Readers keep their own offset
// and never hold data themselves, so a slow reader costs nothing but its place: when the ring has
// moved past it, its next read reports how many bytes it lost and continues at the oldest byte kept.
//
// The capacity is in real bytes, not payload: every chunk kept costs its bytes plus what a Buffer and
// its record cost (CHUNK_OVERHEAD_BYTES), so a child writing 1-byte chunks cannot hold ~380 times its
// budget in objects. Small chunks are copied into shared slabs (a chunk of the same stream right
// after the last one extends it), and a slab counts whole while any chunk uses it.

export type OutputStream = 'stdout' | 'stderr';

export interface OutputChunk {
  stream: OutputStream;
  /** Absolute offset of the first byte of `data` in the process's output. */
  start: number;
  data: Buffer;
}

export interface ExitInfo {
  exit_code: number | null;
  /** e.g. "SIGKILL", or null when the process exited by itself. */
  signal: string | null;
}

export interface ReadResult {
  /** Bytes between the reader's offset and the oldest byte still kept (0 when none were lost). */
  lost: number;
  chunks: OutputChunk[];
  /** The offset to read from next. */
  next: number;
}

/**
 * What one kept chunk costs beside its bytes: a Buffer (Uint8Array, ArrayBuffer, backing store) and
 * its record. Measured on Node 24: 282 bytes of heap, 355 of RSS per 1-byte chunk.
 */
export const CHUNK_OVERHEAD_BYTES = 384;
/** The largest slab that small chunks are copied into. */
export const MAX_SLAB_BYTES = 16 * 1024;

export interface ReplayBufferOptions {
  /** Counted per chunk beside its bytes; default CHUNK_OVERHEAD_BYTES (0: payload only, for tests of offsets). */
  chunkOverheadBytes?: number;
  /** The slab size; chunks up to a quarter of it are copied into slabs. Default min(MAX_SLAB_BYTES, capacity / 8); 0: none. */
  slabBytes?: number;
}

interface Slab {
  buf: Buffer;
  /** Bytes handed out. */
  used: number;
  /** Kept chunks that view it: its memory is counted while this is above 0. */
  refs: number;
}

interface Kept extends OutputChunk {
  slab: Slab | null;
}

export class ReplayBuffer {
  private chunks: Kept[] = [];
  /** Index of the oldest live chunk in `chunks` (dropped ones are compacted away in batches). */
  private head = 0;
  /** Payload bytes kept (offsets). */
  private kept = 0;
  /** Real bytes held: chunk bytes outside slabs, live slabs whole, and the overhead of every chunk. */
  private memory = 0;
  private total = 0;
  private slab: Slab | null = null;
  private exitInfo: ExitInfo | null = null;
  private waiters = new Set<() => void>();
  private readonly overhead: number;
  private readonly slabBytes: number;

  constructor(
    readonly capacityBytes: number,
    opts: ReplayBufferOptions = {},
  ) {
    if (!(capacityBytes > 0)) throw new RangeError('capacityBytes must be positive');
    this.overhead = opts.chunkOverheadBytes ?? CHUNK_OVERHEAD_BYTES;
    this.slabBytes = opts.slabBytes ?? Math.min(MAX_SLAB_BYTES, Math.floor(capacityBytes / 8));
  }

  /** Offset of the oldest byte still kept. */
  get startOffset(): number {
    return this.total - this.kept;
  }

  /** Offset just past the newest byte (= every byte the process has written so far). */
  get endOffset(): number {
    return this.total;
  }

  /** Payload bytes kept. */
  get keptBytes(): number {
    return this.kept;
  }

  /** Real bytes held (at most capacityBytes once an append returns). */
  get memoryBytes(): number {
    return this.memory;
  }

  /** Chunk records kept. */
  get chunkCount(): number {
    return this.chunks.length - this.head;
  }

  /** Set once the output is complete; nothing is appended after it. */
  get exit(): ExitInfo | null {
    return this.exitInfo;
  }

  append(stream: OutputStream, data: Buffer): void {
    if (this.exitInfo !== null || data.length === 0) return;
    if (data.length * 4 <= this.slabBytes) this.appendSmall(stream, data);
    else {
      // A view of a much larger backing store would hold all of it: keep a copy of the view.
      const own = data.buffer.byteLength > 2 * data.length ? Buffer.from(data) : data;
      this.chunks.push({ stream, start: this.total, data: own, slab: null });
      this.memory += own.length + this.overhead;
    }
    this.total += data.length;
    this.kept += data.length;
    this.evict();
    this.wake();
  }

  /** Marks the output complete; wakes every reader so it can send the exit event. Idempotent. */
  finish(exit: ExitInfo): void {
    if (this.exitInfo !== null) return;
    this.exitInfo = exit;
    this.wake();
  }

  /** Chunks from `offset` on, at most about `maxBytes` (always at least one chunk when there is one). */
  read(offset: number, maxBytes = Number.POSITIVE_INFINITY): ReadResult {
    let from = Math.min(Math.max(offset, 0), this.total);
    const lost = Math.max(0, this.startOffset - from);
    from += lost;
    const out: OutputChunk[] = [];
    let bytes = 0;
    for (let i = this.findChunk(from); i < this.chunks.length; i++) {
      const c = this.chunks[i] as OutputChunk;
      const skip = from - c.start;
      const data = skip > 0 ? c.data.subarray(skip) : c.data;
      out.push({ stream: c.stream, start: c.start + Math.max(skip, 0), data });
      bytes += data.length;
      from = c.start + c.data.length;
      if (bytes >= maxBytes) break;
    }
    return { lost, chunks: out, next: from };
  }

  /** Resolves when there is output past `offset`, the output is complete, or `signal` aborts. */
  wait(offset: number, signal?: AbortSignal): Promise<void> {
    if (this.total > offset || this.exitInfo !== null || signal?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        this.waiters.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      this.waiters.add(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  /** Copies a small chunk into the open slab: extends the last chunk when it is of this stream and ends there. */
  private appendSmall(stream: OutputStream, data: Buffer): void {
    let slab = this.slab;
    if (slab === null || slab.used + data.length > slab.buf.length) {
      slab = { buf: Buffer.allocUnsafeSlow(this.slabBytes), used: 0, refs: 0 };
      this.slab = slab;
      this.memory += slab.buf.length;
    }
    data.copy(slab.buf, slab.used);
    const last = this.chunks.length > this.head ? (this.chunks[this.chunks.length - 1] as Kept) : null;
    if (last !== null && last.slab === slab && last.stream === stream && last.data.byteOffset + last.data.length === slab.buf.byteOffset + slab.used) {
      last.data = slab.buf.subarray(last.data.byteOffset - slab.buf.byteOffset, slab.used + data.length);
    } else {
      slab.refs++;
      this.chunks.push({ stream, start: this.total, data: slab.buf.subarray(slab.used, slab.used + data.length), slab });
      this.memory += this.overhead;
    }
    slab.used += data.length;
  }

  private wake(): void {
    for (const w of [...this.waiters]) w();
  }

  /** Index of the live chunk holding `offset` (or chunks.length when offset is the end). */
  private findChunk(offset: number): number {
    let lo = this.head;
    let hi = this.chunks.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const c = this.chunks[mid] as OutputChunk;
      if (c.start + c.data.length <= offset) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Drops the oldest bytes until at most `capacityBytes` are held. */
  private evict(): void {
    while (this.memory > this.capacityBytes) {
      const first = this.chunks[this.head] as Kept;
      const excess = this.memory - this.capacityBytes;
      if (first.slab === null && first.data.length > excess) {
        // Keep the tail of this chunk; copy it so the dropped part's memory can be freed.
        this.chunks[this.head] = { stream: first.stream, start: first.start + excess, data: Buffer.from(first.data.subarray(excess)), slab: null };
        this.kept -= excess;
        this.memory -= excess;
        continue;
      }
      // Whole: a chunk in a slab frees nothing by being cut (the slab lives on while a chunk uses it).
      this.chunks[this.head] = undefined as unknown as Kept;
      this.head++;
      this.kept -= first.data.length;
      this.memory -= this.overhead;
      if (first.slab === null) this.memory -= first.data.length;
      else if (--first.slab.refs === 0) {
        this.memory -= first.slab.buf.length;
        if (this.slab === first.slab) this.slab = null;
      }
    }
    if (this.head > 1024 && this.head * 2 > this.chunks.length) {
      this.chunks = this.chunks.slice(this.head);
      this.head = 0;
    }
  }
}
