// One deadline threaded through a whole operation (launch → ready, connect → call), in the manner
// of Playwright's `progress`: every step asks it how long is left and races against it, instead
// of recomputing `deadline - Date.now()` by hand. Aborting (shutdown, a client gone) ends it early.
import { BrowserUnavailableError, TimeoutError, type BrowserdError } from './errors.js';

export class DeadlineError extends Error {
  constructor(
    message: string,
    /** true: the time ran out; false: aborted. */
    readonly timedOut: boolean,
  ) {
    super(message);
    this.name = 'DeadlineError';
  }
}

export class Deadline {
  private readonly controller = new AbortController();
  private readonly timer: NodeJS.Timeout | null;
  /** The parent and our listener on it, removed by dispose(): a parent (the daemon's shutdown signal) may outlive many deadlines. */
  private parent: { signal: AbortSignal; onAbort: () => void } | null = null;

  private constructor(
    /** Epoch ms; Infinity for none. */
    readonly at: number,
    readonly what: string,
    parent?: AbortSignal,
  ) {
    const ms = at - Date.now();
    this.timer = Number.isFinite(at) ? setTimeout(() => this.controller.abort(new DeadlineError(`${what}: not done within its deadline`, true)), Math.max(0, ms)) : null;
    this.timer?.unref();
    if (parent !== undefined) {
      if (parent.aborted) this.abortWith(parent.reason);
      else {
        const onAbort = (): void => this.abortWith(parent.reason);
        parent.addEventListener('abort', onAbort, { once: true });
        this.parent = { signal: parent, onAbort };
      }
    }
  }

  /** A deadline `ms` from now (Infinity: none), aborted with `parent`. */
  static in(ms: number, what: string, parent?: AbortSignal): Deadline {
    return new Deadline(Date.now() + ms, what, parent);
  }

  static at(epochMs: number, what: string, parent?: AbortSignal): Deadline {
    return new Deadline(epochMs, what, parent);
  }

  /** A deadline for one step: `ms` from now, but never past this one, and aborted with it. */
  child(ms: number, what: string): Deadline {
    return new Deadline(Math.min(this.at, Date.now() + ms), what, this.signal);
  }

  /** Aborted when the time runs out or the parent aborts; its reason is a DeadlineError. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get expired(): boolean {
    return this.controller.signal.aborted;
  }

  /** Milliseconds left (0 once expired). */
  left(): number {
    if (this.expired) return 0;
    return Math.max(0, this.at - Date.now());
  }

  /** Throws the DeadlineError once expired or aborted. */
  check(): void {
    if (this.expired) throw this.controller.signal.reason as Error;
  }

  /** `p`, or the DeadlineError when the deadline comes first. */
  race<T>(p: Promise<T>): Promise<T> {
    if (this.expired) return Promise.reject(this.controller.signal.reason as Error);
    return new Promise<T>((resolve, reject) => {
      const onAbort = (): void => reject(this.controller.signal.reason as Error);
      this.controller.signal.addEventListener('abort', onAbort, { once: true });
      p.then(
        (v) => {
          this.controller.signal.removeEventListener('abort', onAbort);
          resolve(v);
        },
        (e: unknown) => {
          this.controller.signal.removeEventListener('abort', onAbort);
          reject(e as Error);
        },
      );
    });
  }

  /** Sleeps `ms` (at most what is left); rejects when the deadline ends first. */
  sleep(ms: number): Promise<void> {
    return this.race(new Promise<void>((resolve) => setTimeout(resolve, Math.min(ms, this.left())).unref()));
  }

  /** Stops the timer and lets go of the parent (the operation is done). Idempotent. */
  dispose(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.parent?.signal.removeEventListener('abort', this.parent.onAbort);
    this.parent = null;
  }

  private abortWith(reason: unknown): void {
    if (this.expired) return;
    const why = reason instanceof Error ? reason.message : 'aborted';
    this.controller.abort(new DeadlineError(`${this.what}: ${why}`, false));
  }
}

/**
 * The contract's error when an operation's deadline ended it (one mapping for every operation on the
 * browser): its own time ran out → 504 TimeoutError(`timedOut`); the deadline aborted (the client went
 * away, the daemon stopping) → 503 BrowserUnavailableError(`abandoned`); null when `err` is not the deadline's.
 */
export function deadlineEnded(err: unknown, deadline: Deadline, texts: { timedOut: string; abandoned: string }): BrowserdError | null {
  const timedOut = err instanceof DeadlineError ? err.timedOut : deadline.expired && (deadline.signal.reason as DeadlineError | undefined)?.timedOut === true;
  if (timedOut) return new TimeoutError(texts.timedOut);
  if (deadline.expired) return new BrowserUnavailableError(texts.abandoned);
  return null;
}
