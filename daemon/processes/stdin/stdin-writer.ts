// The stdin of one spawned process: a FIFO of accepted requests, written one after another so each
// request's bytes land contiguously in acceptance order. A request is answered with
// `written_bytes` only once its bytes are in the pipe (the write callback fired), never when they
// are merely buffered in the daemon. Past its deadline a request is answered 504 with how many
// of its bytes are still queued; those bytes stay queued, in order, and reach the child once it
// reads. `close: true` ends stdin after the request's data. A child that closes its stdin or
// exits fails what is still queued with a 409; EPIPE never reaches the daemon as an uncaught error.
// The bytes a process holds queued (accepted, not yet in the pipe) are capped, and so are those of
// every process together (StdinBudget): a request that would pass either cap is refused with 429
// (inner_error stdin_queue_process or stdin_queue_total) and nothing of it is queued.
// One timer per writer, not one per request: every request has the same timeout and the queue is in
// acceptance order, so the deadlines are in queue order and the timer waits for the first request
// not yet answered (a request answered in time leaves it armed; when it fires it finds nothing due
// and waits for the next one).
import type { Writable } from 'node:stream';
import { ConflictError, LimitExceededError, TimeoutError, type BrowserdError } from '../../core/errors.js';
import type { StdinBudget } from './stdin-budget.js';

/** Bytes per write call: progress (and the 504's count) is tracked per slice. */
export const SLICE_BYTES = 64 * 1024;
/** The stdin bytes one process may hold queued: this many times BROWSERD_STDIN_LIMIT_BYTES. */
export const STDIN_QUEUE_FACTOR = 4;
/** After EPIPE, how long to wait for the exit event to tell "exited" from "closed its stdin". */
const EXIT_SETTLE_MS = 200;

interface Job {
  data: Buffer;
  close: boolean;
  /** Bytes whose write callback has fired. */
  written: number;
  /** Length of the slice handed to the stream and not yet acknowledged. */
  inFlight: number;
  /** Bytes of this job still taken from the shared budget (not yet acknowledged by the stream). */
  reserved: number;
  settled: boolean;
  /** performance.now() past which the request is answered 504. */
  deadline: number;
  resolve(written: number): void;
  reject(err: BrowserdError): void;
}

export type StdinState = 'open' | 'closing' | 'closed' | 'broken' | 'exited';

export interface StdinWriterOptions {
  processId: string;
  timeoutMs: number;
  /** Most bytes accepted and not yet in the pipe at once, over every queued request. */
  maxQueuedBytes: number;
  /** The bytes queued over every process (BROWSERD_STDIN_QUEUE_TOTAL_BYTES); none: no shared cap. */
  budget?: StdinBudget;
  /** Resolves when the process has exited. */
  exited: Promise<unknown>;
  /** Called with every count of bytes that reached the pipe. */
  onWritten(bytes: number): void;
}

export class StdinWriter {
  private readonly queue: Job[] = [];
  private state: StdinState = 'open';
  private pumping = false;
  /** The one deadline timer (see the top). */
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly stdin: Writable,
    private readonly opts: StdinWriterOptions,
  ) {
    // The stream's own errors (EPIPE, ERR_STREAM_DESTROYED) arrive through write callbacks; this
    // listener only keeps an 'error' event from becoming an uncaught exception.
    stdin.on('error', () => {});
  }

  get currentState(): StdinState {
    return this.state;
  }

  /** Bytes accepted and not yet in the pipe, over every queued request. */
  get queuedBytes(): number {
    return this.queue.reduce((n, j) => n + this.pending(j), 0);
  }

  /**
   * Queues `data` (and EOF after it when `close`). Resolves with the byte count once every byte is
   * in the pipe; rejects with 504 at the deadline (the bytes stay queued), 409 stdin_closed /
   * process_exited when they cannot be written. Throws 429 limit_exceeded (nothing queued) when
   * the bytes would pass maxQueuedBytes.
   */
  write(data: Buffer, close: boolean): Promise<number> {
    this.assertWritable();
    const queued = this.queuedBytes;
    if (queued + data.length > this.opts.maxQueuedBytes) {
      const message =
        `too many stdin bytes queued for process ${this.opts.processId}: ${queued} bytes of earlier requests are not yet in the pipe ` +
        `(the child is not reading) and the ${data.length} bytes of this request would pass the limit of ${this.opts.maxQueuedBytes} ` +
        `bytes queued per process (${STDIN_QUEUE_FACTOR} × BROWSERD_STDIN_LIMIT_BYTES); nothing of this request was queued`;
      throw new LimitExceededError('stdin bytes queued', this.opts.maxQueuedBytes, { message, inner: { code: 'stdin_queue_process', message } });
    }
    this.opts.budget?.take(data.length, this.opts.processId);
    if (close) this.state = 'closing';
    return new Promise<number>((resolve, reject) => {
      const job: Job = { data, close, written: 0, inFlight: 0, reserved: data.length, settled: false, deadline: performance.now() + this.opts.timeoutMs, resolve, reject };
      this.queue.push(job);
      // Armed for an earlier request, the timer comes before this one's deadline anyway.
      if (this.timer === null) this.armFor(job.deadline);
      this.pump();
    });
  }

  /** The process exited: what is still queued can never be written. */
  processExited(): void {
    if (this.state === 'exited') return;
    this.state = 'exited';
    this.failAll('process_exited');
  }

  private assertWritable(): void {
    switch (this.state) {
      case 'open':
        return;
      case 'closing':
      case 'closed':
        throw new ConflictError('stdin_closed', `the stdin of process ${this.opts.processId} was closed by an earlier request (close: true)`);
      case 'broken':
        throw new ConflictError('stdin_closed', `process ${this.opts.processId} closed its stdin`);
      case 'exited':
        throw new ConflictError('process_exited', `process ${this.opts.processId} has exited`);
    }
  }

  /** Bytes of `job` not yet in the pipe: the unwritten rest minus what the kernel took of the slice in flight. */
  private pending(job: Job): number {
    let inPipe = 0;
    if (job.inFlight > 0) {
      // A socket's handle counts what libuv still holds; a terminal's input (core/process/pty.ts) counts it itself.
      const stream = this.stdin as unknown as { writeQueueSize?: unknown; _handle?: { writeQueueSize?: unknown } };
      const queued = stream.writeQueueSize ?? stream._handle?.writeQueueSize;
      if (typeof queued === 'number' && queued >= 0 && queued <= job.inFlight) inPipe = job.inFlight - queued;
    }
    return job.data.length - job.written - inPipe;
  }

  private armFor(deadline: number): void {
    this.timer = setTimeout(() => this.onTimer(), Math.max(1, Math.ceil(deadline - performance.now())));
    this.timer.unref();
  }

  /** Answers every request past its deadline, then waits for the first one that is not. */
  private onTimer(): void {
    this.timer = null;
    const now = performance.now();
    for (const job of this.queue) {
      if (job.settled) continue;
      if (job.deadline > now) return this.armFor(job.deadline);
      this.onDeadline(job);
    }
  }

  private onDeadline(job: Job): void {
    if (job.settled) return;
    const index = this.queue.indexOf(job);
    const ahead = this.queue.slice(0, Math.max(index, 0)).reduce((n, j) => n + this.pending(j), 0);
    const queued = this.pending(job);
    const eof = job.close ? '; stdin will be closed after them' : '';
    this.settle(
      job,
      new TimeoutError(
        `the child is not reading its stdin: ${queued} of ${job.data.length} bytes of this request stay queued ` +
          `(behind ${ahead} bytes of earlier requests) and will be written in order when it reads${eof}`,
      ),
    );
  }

  private settle(job: Job, outcome: number | BrowserdError): void {
    if (job.settled) return;
    job.settled = true;
    if (typeof outcome === 'number') job.resolve(outcome);
    else job.reject(outcome);
  }

  private pump(): void {
    if (this.pumping) return;
    const job = this.queue[0];
    if (job === undefined) return;
    this.pumping = true;
    if (job.written < job.data.length) {
      const slice = job.data.subarray(job.written, job.written + SLICE_BYTES);
      job.inFlight = slice.length;
      this.stdin.write(slice, (err) => {
        job.inFlight = 0;
        this.pumping = false;
        if (err) return this.onBroken(err);
        job.written += slice.length;
        this.release(job, slice.length);
        this.opts.onWritten(slice.length);
        this.pump();
      });
      return;
    }
    if (job.close) {
      this.stdin.end(() => {
        this.pumping = false;
        this.state = this.state === 'closing' ? 'closed' : this.state;
        this.finishJob(job);
      });
      return;
    }
    this.pumping = false;
    this.finishJob(job);
  }

  /** Gives back up to `bytes` of what `job` took from the shared budget (never more than it took). */
  private release(job: Job, bytes: number): void {
    const n = Math.min(bytes, job.reserved);
    job.reserved -= n;
    this.opts.budget?.release(n);
  }

  private finishJob(job: Job): void {
    this.queue.shift();
    this.release(job, job.reserved);
    this.settle(job, job.data.length);
    this.pump();
  }

  /** A write failed (EPIPE, destroyed stream): the process exited or closed its stdin. */
  private onBroken(_err: Error): void {
    if (this.state === 'exited' || this.state === 'broken') return;
    this.state = 'broken';
    let settled = false;
    const timer = setTimeout(() => {
      if (settled) return;
      settled = true;
      if (this.state === 'broken') this.failAll('stdin_closed');
    }, EXIT_SETTLE_MS);
    timer.unref();
    void this.opts.exited.then(() => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      this.processExited();
    });
  }

  private failAll(code: 'process_exited' | 'stdin_closed'): void {
    const jobs = this.queue.splice(0);
    for (const job of jobs) {
      this.release(job, job.reserved);
      const left = job.data.length - job.written;
      const why = code === 'process_exited' ? `process ${this.opts.processId} exited` : `process ${this.opts.processId} closed its stdin`;
      this.settle(job, new ConflictError(code, `${why} before reading ${left} of the ${job.data.length} bytes of this request`));
    }
  }
}
