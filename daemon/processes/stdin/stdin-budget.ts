// The stdin bytes queued over every spawned process (accepted, not yet in a pipe or terminal), held
// to BROWSERD_STDIN_QUEUE_TOTAL_BYTES: each process's own cap (STDIN_QUEUE_FACTOR ×
// BROWSERD_STDIN_LIMIT_BYTES) times BROWSERD_MAX_PROCESSES would be gigabytes. A request that would
// pass it is refused whole with 429 limit_exceeded, inner_error `stdin_queue_total`.
import { LimitExceededError } from '../../core/errors.js';

export const STDIN_QUEUE_TOTAL_SETTING = 'BROWSERD_STDIN_QUEUE_TOTAL_BYTES';

export class StdinBudget {
  private used = 0;

  constructor(readonly limitBytes: number) {}

  /** Bytes queued over every process now. */
  get usedBytes(): number {
    return this.used;
  }

  /** Takes `bytes` for a request of process `processId`, or throws 429 (nothing taken). */
  take(bytes: number, processId: string): void {
    if (this.used + bytes > this.limitBytes) {
      const message =
        `too many stdin bytes queued over every process: ${this.used} bytes accepted are not yet read by their children, and the ` +
        `${bytes} bytes of this request to process ${processId} would pass the limit of ${this.limitBytes} bytes (${STDIN_QUEUE_TOTAL_SETTING}); ` +
        'nothing of this request was queued: retry once the children have read their stdin';
      throw new LimitExceededError('stdin bytes queued', this.limitBytes, { message, inner: { code: 'stdin_queue_total', message } });
    }
    this.used += bytes;
  }

  release(bytes: number): void {
    this.used = Math.max(0, this.used - bytes);
  }
}
