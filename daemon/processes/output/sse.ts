// One Server-Sent Events reader of a process's output. The reader holds only its offset into the
// replay buffer: it writes what is there, waits for 'drain' when the socket is full (the buffer keeps
// filling meanwhile, so the child and other readers never wait for it), and when the buffer has
// moved past it, it sends `event: lost` with the count of bytes it missed. `event: exit` is last.
// The SDK's stream ignores the `event:` line and yields only the data JSON, so the data of `exit`
// and `lost` names its event too: `{"event":"exit","exit_code":…,"signal":…}`, `{"event":"lost","bytes":…}`.
import type { ServerResponse } from 'node:http';
import { endStream, openEventStream, SSE_HEARTBEAT_MS, SSE_KEEPALIVE, sseEvent, streamGone, waitAtMost, waitDrain } from '../../core/streams/sse.js';
import type { ReplayBuffer } from './replay-buffer.js';

/** Chunks are taken from the buffer in batches of about this many bytes. */
const READ_BATCH_BYTES = 256 * 1024;

interface StreamOptions {
  /** The offset to start at (0, or the `Last-Event-ID` of a reconnecting client). */
  from: number;
  signal: AbortSignal;
  heartbeatMs?: number;
}

/** Waits for output past `offset` (or the exit), at most `ms`; true when the time ran out idle. */
async function waitForOutput(buffer: ReplayBuffer, offset: number, signal: AbortSignal, ms: number): Promise<boolean> {
  const { quiet } = await waitAtMost(signal, ms, (stop) => buffer.wait(offset, stop));
  return quiet && buffer.endOffset <= offset && buffer.exit === null;
}

/** Writes the stream until the exit event, the client leaving or `signal` aborting. */
export async function streamOutput(res: ServerResponse, buffer: ReplayBuffer, opts: StreamOptions): Promise<void> {
  const { signal } = opts;
  const heartbeatMs = opts.heartbeatMs ?? SSE_HEARTBEAT_MS;
  if (!openEventStream(res)) {
    res.end();
    return;
  }
  const gone = (): boolean => streamGone(res, signal);

  let offset = opts.from;
  while (!gone()) {
    const batch = buffer.read(offset, READ_BATCH_BYTES);
    let ok = true;
    if (batch.lost > 0) ok = res.write(sseEvent({ event: 'lost', bytes: batch.lost }, { event: 'lost' }));
    for (const c of batch.chunks) {
      ok = res.write(sseEvent({ stream: c.stream, data_b64: c.data.toString('base64') }, { id: c.start + c.data.length })) && ok;
    }
    offset = batch.next;
    if (!ok) {
      await waitDrain(res, signal);
      continue;
    }
    if (batch.chunks.length > 0) continue;
    const exit = buffer.exit;
    if (exit !== null && offset >= buffer.endOffset) {
      res.write(sseEvent({ event: 'exit', exit_code: exit.exit_code, signal: exit.signal }, { event: 'exit' }));
      break;
    }
    const idle = await waitForOutput(buffer, offset, signal, heartbeatMs);
    if (idle && !gone()) res.write(SSE_KEEPALIVE);
  }
  endStream(res);
}
