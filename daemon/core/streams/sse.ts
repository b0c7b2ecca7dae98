// Server-Sent Events: the one writer every event stream of the daemon uses (process output, log
// streams, folder watches, telemetry): writeEventStream. The response's headers, one event's frame
// (a one-word event name, JSON data), the heartbeat comment while idle, one write of at most about
// SSE_BATCH_BYTES waiting for the socket to take it (so a reader costs at most one batch), the drop
// of a reader that takes none of it for SSE_STALL_MS (a last frame says why), the end when the
// client or the daemon goes away. What each stream sends, and when it ends, is its source's.
import type { ServerResponse } from 'node:http';

/** A comment line at this interval keeps idle connections (and proxies in between) open. */
export const SSE_HEARTBEAT_MS = 15_000;
/** The heartbeat: a comment line, which clients skip. */
export const SSE_KEEPALIVE = ': keepalive\n\n';

/**
 * Answers 200 with the event-stream headers (no caching, no buffering by a proxy) and sends them
 * now. False for a HEAD request: the headers are all it gets (the caller ends the response).
 */
export function openEventStream(res: ServerResponse): boolean {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' });
  if (res.req.method === 'HEAD') return false;
  res.flushHeaders();
  return true;
}

/** An event name: one word (a name with a line break would forge fields). */
const EVENT_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/**
 * One event: its `event:` and `id:` lines when given, then the data as one line of JSON (JSON
 * escapes CR and LF, so no text in the data can end the line or forge a field).
 */
export function sseEvent(data: unknown, head: { event?: string; id?: number } = {}): string {
  if (head.event !== undefined && !EVENT_NAME.test(head.event)) throw new TypeError(`an SSE event name must be one word, got ${JSON.stringify(head.event.slice(0, 40))}`);
  const event = head.event === undefined ? '' : `event: ${head.event}\n`;
  const id = head.id === undefined ? '' : `id: ${head.id}\n`;
  return `${event}${id}data: ${JSON.stringify(data)}\n\n`;
}

/** True once nothing more is to be written: `signal` aborted, or the response destroyed or ended. */
export function streamGone(res: ServerResponse, signal: AbortSignal): boolean {
  return signal.aborted || res.destroyed || res.writableEnded;
}

/** Ends the response unless it has ended or been destroyed already. */
export function endStream(res: ServerResponse): void {
  if (!res.destroyed && !res.writableEnded) res.end();
}

/** Bytes one write of a stream may hold at most (a batch stops before it; one event past it at most). */
export const SSE_BATCH_BYTES = 256 * 1024;
/** A reader whose socket takes none of a write for this long is told and dropped. */
export const SSE_STALL_MS = 30_000;

/**
 * Writes `text` (at most about SSE_BATCH_BYTES: the caller's batch) and waits for the socket to take
 * it, so a reader costs at most one batch in the daemon's memory. True: go on. False: the reader
 * took none of it for `stallMs`; `farewell` (one frame naming why) is written, the response ended
 * and its connection closed after it, or destroyed after another `stallMs` if it still reads nothing.
 */
export async function writeOrDrop(res: ServerResponse, text: string, signal: AbortSignal, farewell: () => string, stallMs = SSE_STALL_MS): Promise<boolean> {
  if (res.write(text)) return true;
  const stall = new AbortController();
  const timer = setTimeout(() => stall.abort(), stallMs);
  const either = AbortSignal.any([signal, stall.signal]);
  try {
    await waitDrain(res, either);
  } finally {
    clearTimeout(timer);
  }
  if (!stall.signal.aborted || signal.aborted || res.destroyed) return true;
  if (res.writableNeedDrain) {
    // Dropped with its connection: once the farewell is out the connection ends (it is not kept for
    // another request of a client that stopped reading), and it is destroyed if it still reads nothing.
    const socket = res.socket; // detached from the response once it finished
    res.end(farewell(), () => socket?.end());
    setTimeout(() => res.destroy(), stallMs).unref();
    return false;
  }
  return true;
}

/** Resolves when the full socket drains, the response closes, or `signal` aborts. */
export function waitDrain(res: ServerResponse, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      res.off('drain', done);
      res.off('close', done);
      signal.removeEventListener('abort', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
    signal.addEventListener('abort', done, { once: true });
  });
}

/**
 * Runs `wait` with a signal that aborts when `signal` does or after `ms`: what it resolved to, and
 * whether the time ran out (`quiet`: the stream owes its reader a heartbeat).
 */
export async function waitAtMost<T>(signal: AbortSignal, ms: number, wait: (signal: AbortSignal) => Promise<T>): Promise<{ value: T; quiet: boolean }> {
  const stop = new AbortController();
  const onAbort = (): void => stop.abort();
  signal.addEventListener('abort', onAbort, { once: true });
  let quiet = false;
  const timer = setTimeout(() => {
    quiet = true;
    stop.abort();
  }, ms);
  try {
    const value = await wait(stop.signal);
    return { value, quiet };
  } finally {
    clearTimeout(timer);
    signal.removeEventListener('abort', onAbort);
  }
}

/** What one event stream sends: its source gives the frames, the writer does the rest. */
export interface EventFeed {
  /**
   * The frames of the next batch (at most about SSE_BATCH_BYTES: one event past it at most), waiting
   * for some until `idle` aborts: '' when none came, null when the stream is over.
   */
  next(idle: AbortSignal): Promise<string | null>;
  /** The last frame for a reader that is dropped because it fell behind (`reason` says how). */
  farewell(reason: string): string;
  /** Called once when the stream ends, however it ends. */
  close?(): void;
}

export interface EventStreamOptions {
  signal: AbortSignal;
  heartbeatMs?: number;
  stallMs?: number;
  /** Called when a reader is dropped for falling behind (a metric counts it). */
  onDrop?: () => void;
}

/**
 * Answers with the event stream of `feed` until it is over (null), the client leaves or `signal`
 * aborts: each batch written and waited for (writeOrDrop), a heartbeat after `heartbeatMs` idle.
 */
export async function writeEventStream(res: ServerResponse, feed: EventFeed, opts: EventStreamOptions): Promise<void> {
  const { signal } = opts;
  const heartbeatMs = opts.heartbeatMs ?? SSE_HEARTBEAT_MS;
  const stallMs = opts.stallMs ?? SSE_STALL_MS;
  const gone = (): boolean => streamGone(res, signal);
  try {
    if (!openEventStream(res)) return;
    while (!gone()) {
      const { value: text, quiet } = await waitAtMost(signal, heartbeatMs, (idle) => feed.next(idle));
      if (text === null || gone()) break;
      if (text === '') {
        if (quiet) res.write(SSE_KEEPALIVE);
        continue;
      }
      const reason = `the reader took none of ${text.length} bytes for ${stallMs / 1000} s`;
      if (!(await writeOrDrop(res, text, signal, () => feed.farewell(reason), stallMs))) {
        opts.onDrop?.();
        return;
      }
    }
  } finally {
    feed.close?.();
    endStream(res);
  }
}
