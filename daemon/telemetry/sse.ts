// The telemetry stream as Server-Sent Events, as the SDK reads it: each event a frame with `id:`
// (its seq) and the envelope's JSON in `data:`, never an `event:` line; a comment line every 15 s
// of silence. A reader that fell behind the ring (or resumed from before its oldest event) gets a
// gap marker in the same envelope shape (type `events_dropped`, category `monitor`, data `{count,
// from_seq, to_seq}`, seq and id = the last seq lost) and goes on at the oldest event kept. The
// reader's pace is the socket's: a batch (at most SSE_BATCH_BYTES, one event past it at most) is
// written, then the next read waits for the drain; a reader that takes none of a batch for
// SSE_STALL_MS gets a last frame (type `stream_dropped`, data `{reason, next_seq}`) and is dropped, so
// a stalled reader costs at most one batch (docs/memory.md). A Last-Event-ID ahead of the newest
// event (the daemon restarted: its seqs began again) gets one frame saying so (type `cursor_ahead`,
// data `{last_event_id, next_seq}`) and the stream goes on with the next new event.
import type { ServerResponse } from 'node:http';
import { endStream, openEventStream, SSE_BATCH_BYTES, SSE_STALL_MS, SSE_HEARTBEAT_MS, SSE_KEEPALIVE, streamGone, waitAtMost, writeOrDrop } from '../core/streams/sse.js';
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

export async function streamTelemetry(res: ServerResponse, bus: TelemetryBus, from: number, opts: { signal: AbortSignal; heartbeatMs?: number }): Promise<void> {
  const { signal } = opts;
  const heartbeatMs = opts.heartbeatMs ?? SSE_HEARTBEAT_MS;
  const gone = (): boolean => streamGone(res, signal);
  let next = from;
  try {
    if (!openEventStream(res)) return;
    if (from > bus.end) {
      res.write(noticeFrame(bus.end - 1, 'cursor_ahead', 'last_event_id_ahead', { last_event_id: from - 1, next_seq: bus.end, reason: 'Last-Event-ID is ahead of the newest event (the daemon restarted and its seqs began again): the stream goes on with the next new event' }));
      next = bus.end;
    }
    while (!gone()) {
      const { quiet } = await waitAtMost(signal, heartbeatMs, (s) => bus.wait(next, s));
      if (gone()) break;
      const batch = bus.read(next, BATCH);
      let text = batch.lost > 0 ? gapFrame(next, batch.lost) : '';
      next = batch.next;
      for (const e of batch.events) {
        if (text.length >= SSE_BATCH_BYTES) {
          next = e.seq; // the rest in the next batch, once this one is taken
          break;
        }
        text += `id: ${e.seq}\ndata: ${e.json}\n\n`;
      }
      if (text === '') {
        if (quiet) res.write(SSE_KEEPALIVE);
        continue;
      }
      const sent = next - 1;
      const farewell = (): string => noticeFrame(sent, 'stream_dropped', 'slow_reader', { reason: `the reader took none of ${text.length} bytes for ${SSE_STALL_MS / 1000} s`, next_seq: next });
      if (!(await writeOrDrop(res, text, signal, farewell))) return;
    }
  } finally {
    endStream(res);
  }
}
