// Crash restarts: exponential backoff between attempts, and a crash loop (too many crashes within
// a window) that stops retrying. Launch failures count as crashes. Pure arithmetic on timestamps.

interface CrashLoopOptions {
  /** This many crashes within `windowMs` is a crash loop. */
  max: number;
  windowMs: number;
  /** Backoff before the first restart; doubles with every crash still inside the window. */
  initialBackoffMs: number;
  maxBackoffMs: number;
}

interface CrashVerdict {
  /** Crashes within the window, this one included. */
  count: number;
  /** true: stop retrying (the browser becomes `failed`). */
  loop: boolean;
  /** Wait this long before the next launch (0 when `loop`). */
  backoffMs: number;
}

export class CrashLoop {
  private times: number[] = [];

  constructor(
    private readonly opts: CrashLoopOptions,
    private readonly now: () => number = Date.now,
  ) {}

  /** Records a crash now and says what to do next. */
  record(): CrashVerdict {
    const t = this.now();
    this.times = this.times.filter((x) => t - x < this.opts.windowMs);
    this.times.push(t);
    const count = this.times.length;
    if (count >= this.opts.max) return { count, loop: true, backoffMs: 0 };
    return { count, loop: false, backoffMs: backoffFor(count, this.opts.initialBackoffMs, this.opts.maxBackoffMs) };
  }

  /** Forget every crash (a fresh start asked for by an operator). */
  reset(): void {
    this.times = [];
  }
}

/** initial · 2^(n−1), capped at `max`; n ≥ 1. */
export function backoffFor(n: number, initialMs: number, maxMs: number): number {
  const exp = Math.min(n - 1, 52); // 2^52 is already past any cap; keeps the number finite
  return Math.min(maxMs, initialMs * 2 ** exp);
}
