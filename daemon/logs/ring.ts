// A bounded ring of recent log lines (the daemon's own, Chromium's), each numbered: the shared event
// ring (core/seq-ring.ts) bounded by lines and, through the cut of long lines, by bytes. A reader
// holds only the number of the next line it wants: it reads what is there, waits for more, and, when
// the ring has moved past it meanwhile (it read too slowly), learns how many lines it lost. Pushing
// never waits for a reader.
import { SeqRing } from '../core/seq-ring.js';

/** A line longer than this is cut (and marked with "…"): memory is bounded by lines × this. */
export const MAX_LINE_CHARS = 16 * 1024;

/** A line's size in the ring: its text in memory (two bytes a char) and the fixed rest of the entry. */
function lineBytes(message: string): number {
  return 2 * message.length + 64;
}

export interface LogLine {
  seq: number;
  message: string;
  /** ISO time the line was logged (or received from Chromium). */
  timestamp: string;
}

export class LogRing extends SeqRing<LogLine> {
  constructor(readonly maxLines: number) {
    if (!Number.isInteger(maxLines) || maxLines < 1) throw new RangeError('maxLines must be a whole number ≥ 1');
    super({ maxItems: maxLines, maxBytes: maxLines * (2 * (MAX_LINE_CHARS + 1) + 64) });
  }

  /** Keeps one line (cut past MAX_LINE_CHARS), numbered `end`. */
  add(message: string, at: Date = new Date()): void {
    const text = message.length > MAX_LINE_CHARS ? `${message.slice(0, MAX_LINE_CHARS)}…` : message;
    this.push({ seq: this.end, message: text, timestamp: at.toISOString() }, lineBytes(text));
  }
}
