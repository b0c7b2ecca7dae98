// What the daemon keeps and forwards of a child's output: a bounded ring buffer of the last
// lines (attached to launch errors), a line splitter that never buffers without bound, and a
// rate limiter for forwarding lines to the log.
import { StringDecoder } from 'node:string_decoder';

/** The last `maxLines` lines, each cut to `maxLineChars`. Memory is bounded by both. */
export class RingBuffer {
  private readonly buf: string[] = [];
  private next = 0;
  private total = 0;

  constructor(
    readonly maxLines: number,
    readonly maxLineChars = 1000,
  ) {
    if (!Number.isInteger(maxLines) || maxLines < 1) throw new RangeError('maxLines must be a whole number ≥ 1');
  }

  push(line: string): void {
    const cut = line.length > this.maxLineChars ? `${line.slice(0, this.maxLineChars)}…` : line;
    if (this.buf.length < this.maxLines) this.buf.push(cut);
    else this.buf[this.next] = cut;
    this.next = (this.next + 1) % this.maxLines;
    this.total++;
  }

  /** Oldest first. */
  lines(): string[] {
    if (this.buf.length < this.maxLines) return [...this.buf];
    return [...this.buf.slice(this.next), ...this.buf.slice(0, this.next)];
  }

  /** The last `n` lines, oldest first. */
  tail(n: number): string[] {
    const all = this.lines();
    return n >= all.length ? all : all.slice(all.length - n);
  }

  /** Lines ever pushed (including those that fell out). */
  get seen(): number {
    return this.total;
  }
}

/**
 * Splits a byte stream into lines. A line longer than `maxLineBytes` is emitted in pieces, so a
 * child that never writes a newline cannot make the daemon buffer without bound. Bytes are
 * decoded as UTF-8 across chunks: a character split between two reads is kept whole.
 */
export class LineSplitter {
  private pending = '';
  private readonly decoder = new StringDecoder('utf8');

  constructor(
    private readonly onLine: (line: string) => void,
    private readonly maxLineBytes = 64 * 1024,
  ) {}

  write(chunk: Buffer | string): void {
    this.pending += typeof chunk === 'string' ? chunk : this.decoder.write(chunk);
    let nl: number;
    while ((nl = this.pending.indexOf('\n')) >= 0) {
      const line = this.pending.slice(0, nl).replace(/\r$/, '');
      this.pending = this.pending.slice(nl + 1);
      this.onLine(line);
    }
    while (this.pending.length > this.maxLineBytes) {
      this.onLine(this.pending.slice(0, this.maxLineBytes));
      this.pending = this.pending.slice(this.maxLineBytes);
    }
  }

  /** Emits what is left without a trailing newline. */
  end(): void {
    this.pending += this.decoder.end();
    if (this.pending !== '') this.onLine(this.pending);
    this.pending = '';
  }
}

/**
 * At most `perSecond` lines pass per one-second window; the rest are counted, and the first line
 * of a later window (or `flush()`) reports how many were dropped.
 */
export class LineRateLimiter {
  private windowStart = 0;
  private passed = 0;
  private dropped = 0;

  constructor(
    private readonly perSecond: number,
    private readonly emit: (line: string) => void,
    private readonly reportDropped: (count: number) => void,
    private readonly now: () => number = Date.now,
  ) {}

  push(line: string): void {
    const t = this.now();
    if (t - this.windowStart >= 1000) {
      this.flush();
      this.windowStart = t;
      this.passed = 0;
    }
    if (this.passed < this.perSecond) {
      this.passed++;
      this.emit(line);
    } else {
      this.dropped++;
    }
  }

  /** Reports the dropped count, if any. */
  flush(): void {
    if (this.dropped > 0) this.reportDropped(this.dropped);
    this.dropped = 0;
  }
}
