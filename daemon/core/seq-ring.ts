// The event ring every numbered stream of the daemon shares (telemetry, log lines): each item gets
// the next sequence number and is kept while the ring holds at most `maxItems` items and `maxBytes`
// bytes (the caller names each item's size); the oldest go first. A reader holds only the number it
// wants next: it reads what is there, waits for more, and learns how many it lost when the ring moved
// past it (it read too slowly, or resumed from too far back), or that its cursor is ahead of the
// newest item (the numbers began again). Pushing never waits for a reader.

export interface SeqRingLimits {
  /** Items kept at most. */
  maxItems: number;
  /** Bytes kept at most (the sum of the sizes given to push); one item alone may exceed it. */
  maxBytes: number;
  /** The number of the first item pushed (default 0). */
  firstSeq?: number;
}

export interface SeqRead<T> {
  items: T[];
  /** How many items before the first one read were lost (the cursor fell out of the ring). */
  lost: number;
  /** The number to read from next. */
  next: number;
}

export class SeqRing<T> {
  private items: T[] = [];
  private sizes: number[] = [];
  /** Index in `items` of the oldest item kept (the ones before it are evicted, compacted now and then). */
  private head = 0;
  private held = 0;
  private nextSeq: number;
  private waiters = new Set<() => void>();

  constructor(readonly limits: SeqRingLimits) {
    if (!Number.isInteger(limits.maxItems) || limits.maxItems < 1) throw new RangeError('maxItems must be a whole number ≥ 1');
    if (!(limits.maxBytes > 0)) throw new RangeError('maxBytes must be > 0');
    this.nextSeq = limits.firstSeq ?? 0;
  }

  /** Keeps `item` (of `bytes` bytes) as number `end`, evicting the oldest past the bounds; returns its number. */
  push(item: T, bytes: number): number {
    while (this.size > 0 && (this.size >= this.limits.maxItems || this.held + bytes > this.limits.maxBytes)) this.evict();
    this.items.push(item);
    this.sizes.push(bytes);
    this.held += bytes;
    const seq = this.nextSeq++;
    if (this.waiters.size > 0) {
      const waiters = this.waiters;
      this.waiters = new Set();
      for (const w of waiters) w();
    }
    return seq;
  }

  private evict(): void {
    this.held -= this.sizes[this.head] as number;
    this.head++;
    // Compacted now and then: amortised O(1) per item.
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items.splice(0, this.head);
      this.sizes.splice(0, this.head);
      this.head = 0;
    }
  }

  /** The number of the oldest item kept (`end` when none is). */
  get first(): number {
    return this.nextSeq - this.size;
  }

  /** The number the next item will get. */
  get end(): number {
    return this.nextSeq;
  }

  /** Items kept. */
  get size(): number {
    return this.items.length - this.head;
  }

  /** Bytes kept. */
  get bytes(): number {
    return this.held;
  }

  /** True when `from` is past the next number (a cursor from before the numbers began again). */
  ahead(from: number): boolean {
    return from > this.nextSeq;
  }

  /** Up to `max` items from number `from` on (or from the oldest kept, counting the ones lost before it). */
  read(from: number, max: number): SeqRead<T> {
    const first = this.first;
    const lost = from < first ? first - from : 0;
    const start = Math.max(from, first);
    const count = Math.max(0, Math.min(max, this.nextSeq - start));
    const at = this.head + (start - first);
    return { items: this.items.slice(at, at + count), lost, next: start + count };
  }

  /** Up to `max` items numbered below `before`, newest first (paging downwards). */
  readBack(before: number, max: number): T[] {
    const first = this.first;
    const end = Math.min(before, this.nextSeq);
    if (end <= first || max <= 0) return [];
    const stop = this.head + (end - first);
    return this.items.slice(Math.max(this.head, stop - max), stop).reverse();
  }

  /** Resolves once an item numbered `from` or later exists, or `signal` aborts. */
  wait(from: number, signal: AbortSignal): Promise<void> {
    if (this.nextSeq > from || signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        signal.removeEventListener('abort', done);
        this.waiters.delete(done);
        resolve();
      };
      this.waiters.add(done);
      signal.addEventListener('abort', done, { once: true });
    });
  }
}
