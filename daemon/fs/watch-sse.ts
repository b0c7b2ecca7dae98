// The Server-Sent Events of one folder watch: each event as `data: {"type","path","name","is_dir"}`,
// `event: lost` with `{"type":"LOST","path":<watched folder>,"count":N}` when N events were dropped
// (the queue was full), a comment line every 15 s while idle, and the end of the response when the
// watch ends (its folder deleted, the watch stopped, another reader took over, the daemon stops).
import type { ServerResponse } from 'node:http';
import type { DirWatch } from './watch.js';

export const WATCH_HEARTBEAT_MS = 15_000;

function waitDrain(res: ServerResponse, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      res.off('drain', done).off('close', done);
      signal.removeEventListener('abort', done);
      resolve();
    };
    res.on('drain', done).on('close', done);
    signal.addEventListener('abort', done, { once: true });
  });
}

export async function streamWatch(res: ServerResponse, watch: DirWatch, signal: AbortSignal, heartbeatMs = WATCH_HEARTBEAT_MS): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' });
  if (res.req.method === 'HEAD') {
    res.end();
    return;
  }
  res.flushHeaders();
  const gone = (): boolean => signal.aborted || res.destroyed || res.writableEnded;
  while (!gone()) {
    const { events, lost } = watch.take();
    let ok = true;
    if (lost > 0) ok = res.write(`event: lost\ndata: ${JSON.stringify({ type: 'LOST', path: watch.root, count: lost })}\n\n`);
    for (const e of events) ok = res.write(`data: ${JSON.stringify(e)}\n\n`) && ok;
    if (!ok) {
      await waitDrain(res, signal);
      continue;
    }
    if (watch.ended !== null && !watch.hasQueued) break;
    const idle = await watch.wait(heartbeatMs, signal);
    if (idle && !gone()) res.write(': keepalive\n\n');
  }
  if (!res.destroyed && !res.writableEnded) res.end();
}
