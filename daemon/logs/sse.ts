// One log stream as Server-Sent Events (the one writer, core/streams/sse.ts): every line as
// `data: {"event":"log","message","timestamp"}` (the SDK's LogEvent), `event: lost` with
// `{"event":"lost","count":N,"timestamp"}` when the reader fell behind a ring, a comment line every
// 15 s of silence (proxies keep the stream open), and the end of the response when the source ends
// (follow=false) or the client or the daemon goes away. A reader that takes none of a batch for
// SSE_STALL_MS gets `event: dropped` with `{event, reason, timestamp}` and is dropped.
import type { ServerResponse } from 'node:http';
import { sseEvent, writeEventStream, type EventStreamOptions } from '../core/streams/sse.js';
import type { LogSource } from './source.js';

export async function streamLogs(res: ServerResponse, source: LogSource, opts: EventStreamOptions): Promise<void> {
  await writeEventStream(
    res,
    {
      async next(idle) {
        const batch = await source.next(idle);
        if (batch === null) return null;
        let text = '';
        if (batch.lost > 0) text += sseEvent({ event: 'lost', count: batch.lost, timestamp: new Date().toISOString() }, { event: 'lost' });
        for (const e of batch.events) text += sseEvent(e);
        return text;
      },
      farewell: (reason) => sseEvent({ event: 'dropped', reason, timestamp: new Date().toISOString() }, { event: 'dropped' }),
      close: () => source.close(),
    },
    opts,
  );
}
