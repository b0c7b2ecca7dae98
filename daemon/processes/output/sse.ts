// One Server-Sent Events reader of a process's output. The reader holds only its offset into the
// replay buffer: it writes what is there, waits for 'drain' when the socket is full (the buffer keeps
// filling meanwhile, so the child and other readers never wait for it), and when the buffer has
// moved past it, it sends `event: lost` with the count of bytes it missed. `event: exit` is last.
// The SDK's stream ignores the `event:` line and yields only the data JSON, so the data of `exit`
// and `lost` names its event too: `{"event":"exit","exit_code":…,"signal":…}`, `{"event":"lost","bytes":…}`.
import type { ServerResponse } from 'node:http';
import type { ReplayBuffer } from './replay-buffer.js';

/** A comment line at this interval keeps idle connections (and proxies in between) open. */
export const SSE_HEARTBEAT_MS = 15_000;
/** Chunks are taken from the buffer in batches of about this many bytes. */
const READ_BATCH_BYTES = 256 * 1024;

export interface StreamOptions {
  /** The offset to start at (0, or the `Last-Event-ID` of a reconnecting client). */
  from: number;
  signal: AbortSignal;
  heartbeatMs?: number;
}

function waitDrain(res: ServerResponse, signal: AbortSignal): Promise<void> {
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

/** Waits for output past `offset` (or the exit), at most `ms`; true when the time ran out idle. */
async function waitForOutput(buffer: ReplayBuffer, offset: number, signal: AbortSignal, ms: number): Promise<boolean> {
  const stop = new AbortController();
  const onAbort = (): void => stop.abort();
  signal.addEventListener('abort', onAbort, { once: true });
  let idle = false;
  const timer = setTimeout(() => {
    idle = true;
    stop.abort();
  }, ms);
  await buffer.wait(offset, stop.signal);
  clearTimeout(timer);
  signal.removeEventListener('abort', onAbort);
  return idle && buffer.endOffset <= offset && buffer.exit === null;
}

/** Writes the stream until the exit event, the client leaving or `signal` aborting. */
export async function streamOutput(res: ServerResponse, buffer: ReplayBuffer, opts: StreamOptions): Promise<void> {
  const { signal } = opts;
  const heartbeatMs = opts.heartbeatMs ?? SSE_HEARTBEAT_MS;
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    'x-accel-buffering': 'no',
  });
  if (res.req.method === 'HEAD') {
    res.end();
    return;
  }
  res.flushHeaders();
  const gone = (): boolean => signal.aborted || res.destroyed || res.writableEnded;

  let offset = opts.from;
  while (!gone()) {
    const batch = buffer.read(offset, READ_BATCH_BYTES);
    let ok = true;
    if (batch.lost > 0) ok = res.write(`event: lost\ndata: ${JSON.stringify({ event: 'lost', bytes: batch.lost })}\n\n`);
    for (const c of batch.chunks) {
      const payload = JSON.stringify({ stream: c.stream, data_b64: c.data.toString('base64') });
      ok = res.write(`id: ${c.start + c.data.length}\ndata: ${payload}\n\n`) && ok;
    }
    offset = batch.next;
    if (!ok) {
      await waitDrain(res, signal);
      continue;
    }
    if (batch.chunks.length > 0) continue;
    const exit = buffer.exit;
    if (exit !== null && offset >= buffer.endOffset) {
      res.write(`event: exit\ndata: ${JSON.stringify({ event: 'exit', exit_code: exit.exit_code, signal: exit.signal })}\n\n`);
      break;
    }
    const idle = await waitForOutput(buffer, offset, signal, heartbeatMs);
    if (idle && !gone()) res.write(': keepalive\n\n');
  }
  if (!res.destroyed && !res.writableEnded) res.end();
}
