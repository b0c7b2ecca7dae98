// Messages from Chromium that are not DevTools messages (not JSON, the wrong shape, an answer to an
// id never sent): dropped, counted by reason in browserd_cdp_malformed_messages_total, and logged
// with a short excerpt, at most MALFORMED_LOGS_PER_MINUTE lines a minute (the next logged line says
// how many were left out), so a Chromium that writes garbage in a loop cannot flood the log.
import type { Counter } from 'prom-client';
import type { Logger } from '../core/log.js';

export type MalformedReason = 'not_json' | 'bad_shape' | 'unknown_id';

/** Log lines about malformed messages per minute; the rest are counted only. */
export const MALFORMED_LOGS_PER_MINUTE = 10;
/** Bytes of a malformed message shown in its log line. */
export const EXCERPT_BYTES = 160;
const WINDOW_MS = 60_000;

/** The first EXCERPT_BYTES of a message as text (an ellipsis when cut). */
export function excerpt(data: Buffer | string): string {
  const buf = typeof data === 'string' ? Buffer.from(data.slice(0, EXCERPT_BYTES * 4)) : data;
  const cut = buf.length > EXCERPT_BYTES;
  return `${buf.toString('utf8', 0, Math.min(buf.length, EXCERPT_BYTES))}${cut ? '…' : ''}`;
}

export interface MalformedReport {
  reason: MalformedReason;
  /** What was wrong, in a few words. */
  detail: string;
  /** The command it answered, when known. */
  method?: string;
}

export class MalformedReporter {
  private windowStart = -Infinity;
  private logged = 0;
  private suppressed = 0;

  constructor(
    private readonly log: Logger,
    private readonly counter?: Counter<'reason'>,
    private readonly now: () => number = Date.now,
  ) {}

  report(data: Buffer | string, r: MalformedReport): void {
    this.counter?.inc({ reason: r.reason });
    const t = this.now();
    if (t - this.windowStart >= WINDOW_MS) {
      this.windowStart = t;
      this.logged = 0;
    }
    if (this.logged >= MALFORMED_LOGS_PER_MINUTE) {
      this.suppressed++;
      return;
    }
    this.logged++;
    const bytes = typeof data === 'string' ? Buffer.byteLength(data) : data.length;
    const suppressed = this.suppressed;
    this.suppressed = 0;
    this.log.warn(
      { event: 'cdp_malformed_message', reason: r.reason, detail: r.detail, method: r.method, bytes, excerpt: excerpt(data), ...(suppressed > 0 ? { suppressed } : {}) },
      'a malformed DevTools message from Chromium was dropped',
    );
  }
}
