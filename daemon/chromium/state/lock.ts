// The one lifecycle lock: restarts, crash restarts, extension installs and shutdown never overlap.
// Waiters are served strictly in arrival order: the lock is handed to the next waiter directly,
// so a newcomer can never overtake the queue.
import { BrowserUnavailableError, ConflictError } from '../../core/errors.js';

interface Waiter {
  name: string;
  resolve(): void;
}

export class LifecycleLock {
  private holder: string | null = null;
  private readonly queue: Waiter[] = [];

  /** The name of the operation holding the lock, or null. */
  get heldBy(): string | null {
    return this.holder;
  }

  get waiting(): number {
    return this.queue.length;
  }

  /** true when an operation named `name` waits in the queue (not counting the holder). */
  isQueued(name: string): boolean {
    return this.queue.some((w) => w.name === name);
  }

  /**
   * Runs `fn` holding the lock. When it is held: queue (default), or with `wait: false` throw
   * ConflictError('busy'). An aborted `signal` takes a queued caller out of the queue.
   */
  async run<T>(name: string, fn: () => Promise<T>, opts: { wait?: boolean; signal?: AbortSignal } = {}): Promise<T> {
    if (this.holder !== null) {
      if (opts.wait === false) {
        throw new ConflictError('busy', `another browser operation is running (${this.holder}); retry later, or leave out wait=false to queue behind it`);
      }
      await this.enqueue(name, opts.signal);
    } else {
      this.holder = name;
    }
    try {
      return await fn();
    } finally {
      this.release();
    }
  }

  private enqueue(name: string, signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = { name, resolve };
      const onAbort = (): void => {
        const i = this.queue.indexOf(waiter);
        if (i >= 0) this.queue.splice(i, 1);
        reject(new BrowserUnavailableError(`${name}: gave up waiting for the browser's lifecycle lock (the client went away or browserd is stopping)`));
      };
      waiter.resolve = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      if (signal?.aborted) return onAbort();
      signal?.addEventListener('abort', onAbort, { once: true });
      this.queue.push(waiter);
    });
  }

  private release(): void {
    const next = this.queue.shift();
    if (next) {
      this.holder = next.name;
      next.resolve();
    } else {
      this.holder = null;
    }
  }
}
