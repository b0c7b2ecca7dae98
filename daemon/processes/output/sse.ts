// One Server-Sent Events reader of a process's output (the one writer, core/streams/sse.ts). The
// reader holds only its offset into the replay buffer: it writes a batch of what is there (at most
// about SSE_BATCH_BYTES as text), waits for the socket to take it (the buffer keeps filling
// meanwhile, so the child and other readers never wait for it), and when the buffer has moved past
// it, it sends `event: lost` with the count of bytes it missed. `event: exit` is last. A reader that
// takes none of a batch for SSE_STALL_MS gets `event: dropped` with `{"event":"dropped","reason",
// "resume_offset"}` (a Last-Event-ID to go on from) and is dropped.
// The SDK's stream ignores the `event:` line and yields only the data JSON, so the data of `exit`,
// `lost` and `dropped` names its event too: `{"event":"exit","exit_code":…,"signal":…}`, `{"event":"lost","bytes":…}`.
import type { ServerResponse } from 'node:http';
import { SSE_BATCH_BYTES, sseEvent, writeEventStream } from '../../core/streams/sse.js';
import type { ReplayBuffer } from './replay-buffer.js';

/** Output bytes taken from the buffer per batch: their base64 (4/3 as many) is about SSE_BATCH_BYTES. */
const READ_BATCH_BYTES = (SSE_BATCH_BYTES * 3) / 4;

interface StreamOptions {
  /** The offset to start at (0, or the `Last-Event-ID` of a reconnecting client). */
  from: number;
  signal: AbortSignal;
  heartbeatMs?: number;
  stallMs?: number;
  onDrop?: () => void;
}

/** Writes the stream until the exit event, the client leaving or `signal` aborting. */
export async function streamOutput(res: ServerResponse, buffer: ReplayBuffer, opts: StreamOptions): Promise<void> {
  let offset = opts.from;
  /** Where the batch being written began: a dropped reader may resume there. */
  let sent = offset;
  let exited = false;
  const frames = (): string => {
    const batch = buffer.read(offset, READ_BATCH_BYTES);
    let text = batch.lost > 0 ? sseEvent({ event: 'lost', bytes: batch.lost }, { event: 'lost' }) : '';
    for (const c of batch.chunks) text += sseEvent({ stream: c.stream, data_b64: c.data.toString('base64') }, { id: c.start + c.data.length });
    sent = offset;
    offset = batch.next;
    if (text !== '') return text;
    const exit = buffer.exit;
    if (exit === null || offset < buffer.endOffset) return '';
    exited = true;
    return sseEvent({ event: 'exit', exit_code: exit.exit_code, signal: exit.signal }, { event: 'exit' });
  };
  await writeEventStream(
    res,
    {
      async next(idle) {
        if (exited) return null;
        const now = frames();
        if (now !== '') return now;
        await buffer.wait(offset, idle);
        return frames();
      },
      farewell: (reason) => sseEvent({ event: 'dropped', reason, resume_offset: sent }, { event: 'dropped' }),
    },
    opts,
  );
}
