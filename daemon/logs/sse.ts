// One log stream as Server-Sent Events: every line as `data: {"event":"log","message","timestamp"}`
// (the SDK's LogEvent), `event: lost` with `{"event":"lost","count":N,"timestamp"}` when the reader
// fell behind a ring, a comment line every 15 s of silence (proxies keep the stream open), and the
// end of the response when the source ends (follow=false) or the client or the daemon goes away. A
// reader that takes none of a batch for SSE_STALL_MS gets `event: dropped` with `{event, reason,
// timestamp}` and is dropped (core/streams/sse.ts writeOrDrop).
import type { ServerResponse } from 'node:http';
import { endStream, openEventStream, SSE_HEARTBEAT_MS, SSE_KEEPALIVE, SSE_STALL_MS, sseEvent, streamGone, waitAtMost, writeOrDrop } from '../core/streams/sse.js';
import type { LogSource } from './source.js';

export async function streamLogs(res: ServerResponse, source: LogSource, opts: { signal: AbortSignal; heartbeatMs?: number }): Promise<void> {
  const { signal } = opts;
  const heartbeatMs = opts.heartbeatMs ?? SSE_HEARTBEAT_MS;
  const gone = (): boolean => streamGone(res, signal);
  try {
    if (!openEventStream(res)) return;
    while (!gone()) {
      const { value: batch, quiet } = await waitAtMost(signal, heartbeatMs, (idle) => source.next(idle));
      if (batch === null) break;
      let text = '';
      if (batch.lost > 0) text += sseEvent({ event: 'lost', count: batch.lost, timestamp: new Date().toISOString() }, { event: 'lost' });
      for (const e of batch.events) text += sseEvent(e);
      if (text === '') {
        if (quiet && !gone()) res.write(SSE_KEEPALIVE);
        continue;
      }
      if (gone()) break;
      const farewell = (): string => sseEvent({ event: 'dropped', reason: `the reader took none of ${text.length} bytes for ${SSE_STALL_MS / 1000} s`, timestamp: new Date().toISOString() }, { event: 'dropped' });
      if (!(await writeOrDrop(res, text, signal, farewell))) return;
    }
  } finally {
    source.close();
    endStream(res);
  }
}
