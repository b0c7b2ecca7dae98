// The telemetry stream as Server-Sent Events, as the SDK reads it: each event a frame with `id:`
// (its seq) and the envelope's JSON in `data:`, never an `event:` line; a comment line every 15 s
// of silence. A reader that fell behind the ring (or resumed from before its oldest event) gets a
// gap marker in the same envelope shape (type `events_dropped`, category `monitor`, data `{count,
// from_seq, to_seq}`, seq and id = the last seq lost) and goes on at the oldest event kept. The
// reader's pace is the socket's: a batch is written, then the next read waits for the drain.
import type { ServerResponse } from 'node:http';
import { endStream, openEventStream, SSE_HEARTBEAT_MS, SSE_KEEPALIVE, streamGone, waitAtMost, waitDrain } from '../core/streams/sse.js';
import type { TelemetryBus } from './bus.js';
import { nowMicros } from './event.js';

/** Events written per batch at most. */
const BATCH = 256;

export function gapFrame(from: number, count: number): string {
  const to = from + count - 1;
  const envelope = {
    seq: to,
    event: { ts: nowMicros(), type: 'events_dropped', category: 'monitor', source: { kind: 'kernel_api', event: 'ring_overrun' }, data: { count, from_seq: from, to_seq: to } },
  };
  return `id: ${to}\ndata: ${JSON.stringify(envelope)}\n\n`;
}

export async function streamTelemetry(res: ServerResponse, bus: TelemetryBus, from: number, opts: { signal: AbortSignal; heartbeatMs?: number }): Promise<void> {
  const { signal } = opts;
  const heartbeatMs = opts.heartbeatMs ?? SSE_HEARTBEAT_MS;
  const gone = (): boolean => streamGone(res, signal);
  let next = from;
  try {
    if (!openEventStream(res)) return;
    while (!gone()) {
      const { quiet } = await waitAtMost(signal, heartbeatMs, (s) => bus.wait(next, s));
      if (gone()) break;
      const batch = bus.read(next, BATCH);
      let text = batch.lost > 0 ? gapFrame(next, batch.lost) : '';
      for (const e of batch.events) text += `id: ${e.seq}\ndata: ${e.json}\n\n`;
      next = batch.next;
      if (text === '') {
        if (quiet) res.write(SSE_KEEPALIVE);
        continue;
      }
      if (!res.write(text)) await waitDrain(res, signal);
    }
  } finally {
    endStream(res);
  }
}
