// The Server-Sent Events of one folder watch: each event as `data: {"type","path","name","is_dir"}`,
// `event: lost` with `{"type":"LOST","path":<watched folder>,"count":N}` when N events were dropped
// (the queue was full), a comment line every 15 s while idle, and the end of the response when the
// watch ends (its folder deleted, the watch stopped, another reader took over, the daemon stops).
import type { ServerResponse } from 'node:http';
import { endStream, openEventStream, SSE_HEARTBEAT_MS, SSE_KEEPALIVE, sseEvent, streamGone, waitDrain } from '../../core/streams/sse.js';
import type { DirWatch } from './watch.js';

export async function streamWatch(res: ServerResponse, watch: DirWatch, signal: AbortSignal, heartbeatMs = SSE_HEARTBEAT_MS): Promise<void> {
  if (!openEventStream(res)) {
    res.end();
    return;
  }
  const gone = (): boolean => streamGone(res, signal);
  while (!gone()) {
    const { events, lost } = watch.take();
    let ok = true;
    if (lost > 0) ok = res.write(sseEvent({ type: 'LOST', path: watch.root, count: lost }, { event: 'lost' }));
    for (const e of events) ok = res.write(sseEvent(e)) && ok;
    if (!ok) {
      await waitDrain(res, signal);
      continue;
    }
    if (watch.ended !== null && !watch.hasQueued) break;
    const idle = await watch.wait(heartbeatMs, signal);
    if (idle && !gone()) res.write(SSE_KEEPALIVE);
  }
  endStream(res);
}
