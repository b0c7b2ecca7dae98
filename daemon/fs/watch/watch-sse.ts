// The Server-Sent Events of one folder watch (the one writer, core/streams/sse.ts): each event as
// `data: {"type","path","name","is_dir"}`, `event: lost` with `{"type":"LOST","path":<watched
// folder>,"count":N}` when N events were dropped (the queue was full), a comment line every 15 s
// while idle, and the end of the response when the watch ends (its folder deleted, the watch
// stopped, another reader took over, the daemon stops). A write holds at most about SSE_BATCH_BYTES
// (the rest of what was taken waits for the next); a reader that takes none of it for SSE_STALL_MS
// gets `event: dropped` with `{"type":"DROPPED","path","reason"}` and is dropped (the watch goes on).
import type { ServerResponse } from 'node:http';
import { SSE_BATCH_BYTES, sseEvent, writeEventStream, type EventStreamOptions } from '../../core/streams/sse.js';
import type { DirWatch, FsEvent } from './watch.js';

/** Longer than any heartbeat (a setTimeout at most). */
const UNTIL_IDLE_MS = 2 ** 31 - 1;

export async function streamWatch(res: ServerResponse, watch: DirWatch, opts: EventStreamOptions): Promise<void> {
  /** Taken from the watch's queue but not written yet (bounded by the queue's length). */
  let pending: FsEvent[] = [];
  const frames = (): string => {
    let text = '';
    if (pending.length === 0) {
      const { events, lost } = watch.take();
      if (lost > 0) text = sseEvent({ type: 'LOST', path: watch.root, count: lost }, { event: 'lost' });
      pending = events;
    }
    let i = 0;
    while (i < pending.length && text.length < SSE_BATCH_BYTES) text += sseEvent(pending[i++]);
    pending = pending.slice(i);
    return text;
  };
  await writeEventStream(
    res,
    {
      async next(idle) {
        const now = frames();
        if (now !== '') return now;
        if (watch.ended !== null && !watch.hasQueued) return null;
        await watch.wait(UNTIL_IDLE_MS, idle); // `idle` ends the wait when a heartbeat is due
        return frames();
      },
      farewell: (reason) => sseEvent({ type: 'DROPPED', path: watch.root, reason }, { event: 'dropped' }),
    },
    opts,
  );
}
