// A bounded ring of recent log lines (the daemon's own, Chromium's), each numbered. A reader holds
// only the number of the next line it wants: it reads what is there, waits for more, and, when the
// ring has moved past it meanwhile (it read too slowly), learns how many lines it lost. Pushing
// never waits for a reader.

/** A line longer than this is cut (and marked with "…"): memory is bounded by lines × this. */
export const MAX_LINE_CHARS = 16 * 1024;

export interface LogLine {
  seq: number;
  message: string;
  /** ISO time the line was logged (or received from Chromium). */
  timestamp: string;
}

export class LogRing {
  private readonly lines: LogLine[] = [];
  /** Index in `lines` of the oldest line once the ring is full. */
  private head = 0;
  private next = 0;
  private waiters = new Set<() => void>();

  constructor(readonly maxLines: number) {
    if (!Number.isInteger(maxLines) || maxLines < 1) throw new RangeError('maxLines must be a whole number ≥ 1');
  }

  push(message: string, at: Date = new Date()): void {
    const line: LogLine = {
      seq: this.next++,
      message: message.length > MAX_LINE_CHARS ? `${message.slice(0, MAX_LINE_CHARS)}…` : message,
      timestamp: at.toISOString(),
    };
    if (this.lines.length < this.maxLines) this.lines.push(line);
    else {
      this.lines[this.head] = line;
      this.head = (this.head + 1) % this.maxLines;
    }
    if (this.waiters.size > 0) {
      const waiters = this.waiters;
      this.waiters = new Set();
      for (const w of waiters) w();
    }
  }

  /** The number of the oldest line kept. */
  get first(): number {
    return this.next - this.lines.length;
  }

  /** The number the next line will get. */
  get end(): number {
    return this.next;
  }

  /** Up to `max` lines from `from` (or from the oldest kept, counting the ones lost before it). */
  read(from: number, max: number): { lines: LogLine[]; lost: number; next: number } {
    const first = this.first;
    const lost = from < first ? first - from : 0;
    const start = Math.max(from, first);
    const count = Math.max(0, Math.min(max, this.next - start));
    const lines: LogLine[] = [];
    for (let i = 0; i < count; i++) {
      const offset = start - first + i;
      lines.push(this.lines[(this.head + offset) % this.lines.length] as LogLine);
    }
    return { lines, lost, next: start + count };
  }

  /** Resolves once a line numbered `from` or later exists, or `signal` aborts. */
  wait(from: number, signal: AbortSignal): Promise<void> {
    if (this.next > from || signal.aborted) return Promise.resolve();
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
