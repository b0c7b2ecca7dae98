// The one counter of things at once (streams, uploads, requests, executions): a fixed number of
// slots; taking one past the limit is 429 limit_exceeded (LimitExceededError) naming what and the
// limit, and a taken slot is given back once, however its work ends.
import { LimitExceededError } from './errors.js';

export interface SlotsSpec {
  /** What is counted, plural ("log streams"): the error names it. */
  what: string;
  max: number;
  /** The refusal's message (default: "too many <what> at once (limit <max>)"). */
  message?: string;
  /** The refusal's Retry-After (default: LimitExceededError's). */
  retryAfterMs?: number;
}

export class Slots {
  private taken = 0;

  constructor(private readonly spec: SlotsSpec) {}

  get used(): number {
    return this.taken;
  }

  get max(): number {
    return this.spec.max;
  }

  /** Throws LimitExceededError when every slot is taken. */
  check(): void {
    const { what, max, message, retryAfterMs } = this.spec;
    if (this.taken >= max) throw new LimitExceededError(what, max, { message, retryAfterMs });
  }

  /** Takes a slot (or throws LimitExceededError); the function gives it back (once: later calls do nothing). */
  take(): () => void {
    this.check();
    this.taken++;
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      this.taken--;
    };
  }

  /** Runs `fn` in a slot, given back when it settles. */
  async run<T>(fn: () => Promise<T>): Promise<T> {
    const release = this.take();
    try {
      return await fn();
    } finally {
      release();
    }
  }
}
