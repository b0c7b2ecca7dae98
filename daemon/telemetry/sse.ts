// The telemetry stream as Server-Sent Events, as the SDK reads it (the one writer,
// core/streams/sse.ts): each event a frame with `id:` (its seq) and the envelope's JSON in `data:`,
// never an `event:` line; a comment line every 15 s of silence. A reader that fell behind the ring
// (or resumed from before its oldest event) gets a gap marker in the same envelope shape (type
// `events_dropped`, category `monitor`, data `{count, from_seq, to_seq}`, seq and id = the last seq
// lost) and goes on at the oldest event kept. The reader's pace is the socket's: a batch (at most
// SSE_BATCH_BYTES, one event past it at most) is written, then the next read waits for the drain; a
// reader that takes none of a batch for SSE_STALL_MS gets a last frame (type `stream_dropped`, data
// `{reason, next_seq}`) and is dropped, so a stalled reader costs at most one batch
// (docs/memory.md). A Last-Event-ID ahead of the newest event (the daemon restarted: its seqs began
// again) gets one frame saying so (type `cursor_ahead`, data `{last_event_id, next_seq}`) and the
// stream goes on with the next new event.
import type { ServerResponse } from 'node:http';
import { SSE_BATCH_BYTES, writeEventStream, type EventStreamOptions } from '../core/streams/sse.js';
import type { TelemetryBus } from './bus.js';
import { nowMicros } from './event.js';

/** Events written per batch at most. */
const BATCH = 256;

/** A frame of the stream's own (not in the ring): `seq` and id the last seq the reader has. */
function noticeFrame(seq: number, type: string, why: string, data: Record<string, unknown>): string {
  const envelope = { seq, event: { ts: nowMicros(), type, category: 'monitor', source: { kind: 'kernel_api', event: why }, data } };
  return `id: ${seq}\ndata: ${JSON.stringify(envelope)}\n\n`;
}

export function gapFrame(from: number, count: number): string {
  const to = from + count - 1;
  return noticeFrame(to, 'events_dropped', 'ring_overrun', { count, from_seq: from, to_seq: to });
}

/** The frames of up to BATCH events from `from` (at most SSE_BATCH_BYTES, one past it at most) and the seq after them. */
function readBatch(bus: TelemetryBus, from: number): { text: string; next: number } {
  const batch = bus.read(from, BATCH);
  let text = batch.lost > 0 ? gapFrame(from, batch.lost) : '';
  let next = batch.next;
  for (const e of batch.events) {
    if (text.length >= SSE_BATCH_BYTES) {
      next = e.seq; // the rest in the next batch, once this one is taken
      break;
    }
    text += `id: ${e.seq}\ndata: ${e.json}\n\n`;
  }
  return { text, next };
}

export async function streamTelemetry(res: ServerResponse, bus: TelemetryBus, from: number, opts: EventStreamOptions): Promise<void> {
  let next = from;
  let ahead = bus.end < from;
  await writeEventStream(
    res,
    {
      async next(idle) {
        if (ahead) {
          ahead = false;
          next = bus.end;
          return noticeFrame(next - 1, 'cursor_ahead', 'last_event_id_ahead', { last_event_id: from - 1, next_seq: next, reason: 'Last-Event-ID is ahead of the newest event (the daemon restarted and its seqs began again): the stream goes on with the next new event' });
        }
        await bus.wait(next, idle);
        const batch = readBatch(bus, next);
        next = batch.next;
        return batch.text;
      },
      farewell: (reason) => noticeFrame(next - 1, 'stream_dropped', 'slow_reader', { reason, next_seq: next }),
    },
    opts,
  );
}
