// The output of one process: a bounded ring of chunks (stdout and stderr interleaved in the order
// they arrived) addressed by absolute byte offsets since the start. Readers keep their own offset
// and never hold data themselves, so a slow reader costs nothing but its place: when the ring has
// moved past it, its next read reports how many bytes it lost and continues at the oldest byte kept.

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

export class ReplayBuffer {
  private chunks: OutputChunk[] = [];
  /** Index of the oldest live chunk in `chunks` (dropped ones are compacted away in batches). */
  private head = 0;
  private kept = 0;
  private total = 0;
  private exitInfo: ExitInfo | null = null;
  private waiters = new Set<() => void>();

  constructor(readonly capacityBytes: number) {
    if (!(capacityBytes > 0)) throw new RangeError('capacityBytes must be positive');
  }

  /** Offset of the oldest byte still kept. */
  get startOffset(): number {
    return this.total - this.kept;
  }

  /** Offset just past the newest byte (= every byte the process has written so far). */
  get endOffset(): number {
    return this.total;
  }

  get keptBytes(): number {
    return this.kept;
  }

  /** Set once the output is complete; nothing is appended after it. */
  get exit(): ExitInfo | null {
    return this.exitInfo;
  }

  append(stream: OutputStream, data: Buffer): void {
    if (this.exitInfo !== null || data.length === 0) return;
    this.chunks.push({ stream, start: this.total, data });
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

  /** Drops the oldest bytes until at most `capacityBytes` are kept. */
  private evict(): void {
    while (this.kept > this.capacityBytes) {
      const first = this.chunks[this.head] as OutputChunk;
      const excess = this.kept - this.capacityBytes;
      if (first.data.length <= excess) {
        this.chunks[this.head] = undefined as unknown as OutputChunk;
        this.head++;
        this.kept -= first.data.length;
      } else {
        // Keep the tail of this chunk; copy it so the dropped part's memory can be freed.
        this.chunks[this.head] = { stream: first.stream, start: first.start + excess, data: Buffer.from(first.data.subarray(excess)) };
        this.kept -= excess;
      }
    }
    if (this.head > 1024 && this.head * 2 > this.chunks.length) {
      this.chunks = this.chunks.slice(this.head);
      this.head = 0;
    }
  }
}
