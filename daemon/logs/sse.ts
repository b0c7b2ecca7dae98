// One log stream as Server-Sent Events: every line as `data: {"event":"log","message","timestamp"}`
// (the SDK's LogEvent), `event: lost` with `{"event":"lost","count":N,"timestamp"}` when the reader
// fell behind a ring, a comment line every 15 s of silence (proxies keep the stream open), and the
// end of the response when the source ends (follow=false) or the client or the daemon goes away.
import type { ServerResponse } from 'node:http';
import type { LogSource } from './source.js';

/** A comment line at this interval keeps idle connections (and proxies in between) open. */
export const SSE_HEARTBEAT_MS = 15_000;

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

export async function streamLogs(res: ServerResponse, source: LogSource, opts: { signal: AbortSignal; heartbeatMs?: number }): Promise<void> {
  const { signal } = opts;
  const heartbeatMs = opts.heartbeatMs ?? SSE_HEARTBEAT_MS;
  const gone = (): boolean => signal.aborted || res.destroyed || res.writableEnded;
  try {
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' });
    if (res.req.method === 'HEAD') return;
    res.flushHeaders();
    while (!gone()) {
      const idle = new AbortController();
      const onAbort = (): void => idle.abort();
      signal.addEventListener('abort', onAbort, { once: true });
      let quiet = false;
      const timer = setTimeout(() => {
        quiet = true;
        idle.abort();
      }, heartbeatMs);
      let batch;
      try {
        batch = await source.next(idle.signal);
      } finally {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
      }
      if (batch === null) break;
      let text = '';
      if (batch.lost > 0) text += `event: lost\ndata: ${JSON.stringify({ event: 'lost', count: batch.lost, timestamp: new Date().toISOString() })}\n\n`;
      for (const e of batch.events) text += `data: ${JSON.stringify(e)}\n\n`;
      if (text === '') {
        if (quiet && !gone()) res.write(': keepalive\n\n');
        continue;
      }
      if (gone()) break;
      if (!res.write(text)) await waitDrain(res, signal);
    }
  } finally {
    source.close();
    if (!res.destroyed && !res.writableEnded) res.end();
  }
}
