// What a log stream reads from: the lines of a ring (the daemon's own log, Chromium's output) or of
// a file (file-tail.ts), as the SDK's LogEvent, in batches. A source that follows waits for new
// lines; one that does not ends (null) once it has given what was there when it opened.
import { SSE_BATCH_BYTES } from '../core/streams/sse.js';
import type { LogRing } from './ring.js';

/** The SDK's LogEvent (resources/shared.d.ts). */
export interface LogEvent {
  event: 'log';
  message: string;
  timestamp: string;
}

export interface Batch {
  events: LogEvent[];
  /** Lines the reader missed before these (it read more slowly than they came). */
  lost: number;
}

export interface LogSource {
  /**
   * The next lines, waiting for some while following; an empty batch when `signal` aborted the
   * wait; null at the end.
   */
  next(signal: AbortSignal): Promise<Batch | null>;
  close(): void;
}

export const EMPTY: Batch = { events: [], lost: 0 };
/** Lines taken from a ring at once. */
const RING_BATCH = 512;

/** A reader of a ring: from its oldest line kept (a new reader gets the recent history), then live. */
export class RingSource implements LogSource {
  private pos: number;
  private readonly stopAt: number | null;

  constructor(
    private readonly ring: LogRing,
    follow: boolean,
  ) {
    this.pos = ring.first;
    this.stopAt = follow ? null : ring.end;
  }

  async next(signal: AbortSignal): Promise<Batch | null> {
    for (;;) {
      if (this.stopAt !== null && this.pos >= this.stopAt) return null;
      const max = this.stopAt === null ? RING_BATCH : Math.min(RING_BATCH, this.stopAt - this.pos);
      const r = this.ring.read(this.pos, max);
      // At most SSE_BATCH_BYTES of text per batch (one line past it at most): a stream's one write.
      let keep = 0;
      for (let chars = 0; keep < r.items.length && chars < SSE_BATCH_BYTES; keep++) chars += (r.items[keep] as { message: string }).message.length + 64;
      this.pos = r.next - (r.items.length - keep);
      if (keep > 0 || r.lost > 0) return { events: r.items.slice(0, keep).map((l) => ({ event: 'log', message: l.message, timestamp: l.timestamp })), lost: r.lost };
      if (signal.aborted) return EMPTY;
      await this.ring.wait(this.pos, signal);
      if (signal.aborted) return EMPTY;
    }
  }

  close(): void {}
}
