// The daemon's one serial queue: tasks run one at a time, in the order they were queued. A task's
// result or error is its caller's; a failing task does not stop the ones after it. close() refuses
// new tasks and resolves once the queued ones have settled; drain() waits for those queued so far.

/** A task queued after close(): it never ran. */
export class QueueClosedError extends Error {
  constructor(why: string) {
    super(why);
    this.name = 'QueueClosedError';
  }
}

export class SerialQueue {
  /** Settles once the last task queued has settled; never rejects. */
  private tail: Promise<void> = Promise.resolve();
  private waiting = 0;
  private closedWhy: string | null = null;

  /** Tasks queued and not yet settled (the running one included). */
  get size(): number {
    return this.waiting;
  }

  /**
   * Runs `task` once every task queued before it has settled; resolves or rejects as it does. Once
   * closed: rejects with QueueClosedError, and `task` never runs.
   */
  run<T>(task: () => T | Promise<T>): Promise<T> {
    if (this.closedWhy !== null) return Promise.reject(new QueueClosedError(this.closedWhy));
    this.waiting++;
    const result = this.tail.then(task);
    this.tail = result.then(
      () => void this.waiting--,
      () => void this.waiting--,
    );
    return result;
  }

  /** Resolves once every task queued so far has settled (whatever their outcome). */
  drain(): Promise<void> {
    return this.tail;
  }

  /** Refuses new tasks from now on (`why` is their error's message); resolves once the queued ones have settled. Idempotent. */
  close(why = 'the queue is closed'): Promise<void> {
    this.closedWhy ??= why;
    return this.tail;
  }
}
