// WebSocket attach to a terminal process. Binary frames in are its stdin (through the process's one
// stdin queue, so every frame lands whole and in order, whoever sent it); binary frames out are its
// output; a text frame `{"type":"resize","rows":…,"cols":…}` resizes the terminal. Several clients
// may attach at once, and every one of them may type (as the clients of one tmux session): each
// gets all output.
//
// Output: each client reads the process's replay buffer at its own offset (from the oldest byte
// kept, or from now with ?replay=false), so a client holds at most SEND_BUFFER_BYTES unsent before it
// waits, and never slows the process or the other clients. One that falls so far behind that the
// buffer drops output it has not been sent is closed with 1013 (a terminal with a hole in its output
// shows garbage). Input: while more than INPUT_PAUSE_BYTES of a process's stdin are queued, the
// client's socket is not read (TCP pushes back); a client that still passes the queue's cap is
// closed with 1013. Close codes: 4000 when the process has exited and all its output was sent
// (reason: {"exit_code":…,"signal":…}), 1001 when the daemon stops, 1009 for a frame past
// BROWSERD_STDIN_LIMIT_BYTES, 1013 for a slow reader or too much input.
import WebSocket from 'ws';
import { z } from 'zod';
import { lazy } from '../../core/lazy.js';
import { BrowserdError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import { CLOSE, reasonText, WebSocketHub, type UpgradeRequest } from '../../core/streams/websocket.js';
import type { ManagedProcess } from '../managed-process.js';
import { resizeBody } from '../schemas.js';

export const CLOSE_PROCESS_EXITED = 4000;
/** Output sent to one client and not yet written to its socket before the client waits. */
export const SEND_BUFFER_BYTES = 1024 * 1024;
/** Stdin bytes queued for the process past which a client's socket is not read. */
export const INPUT_PAUSE_BYTES = 1024 * 1024;
const READ_BATCH_BYTES = 256 * 1024;
const INPUT_CHECK_MS = 20;

const controlMessage = lazy(() => z.discriminatedUnion('type', [resizeBody().extend({ type: z.literal('resize') })]));

export class AttachHub extends WebSocketHub {
  constructor(opts: { maxFrameBytes: number; log: Logger }) {
    super(opts.maxFrameBytes);
  }

  /** Completes the handshake and serves the client; a bad handshake or a stopping daemon is refused in the contract's error shape. */
  handle(ctx: UpgradeRequest, proc: ManagedProcess, replay: boolean): void {
    const refused = this.refusal(ctx);
    if (refused !== null) return ctx.refuse(refused);
    const log = ctx.log.child({ process_id: proc.id, child_pid: proc.pid });
    this.accept(
      { ...ctx, log },
      'attach',
      (ws) => {
        log.info({ event: 'attach_opened', attached: this.live.size, replay }, 'terminal attached');
        serve(ws, proc, replay, log);
      },
      (code) => log.info({ event: 'attach_closed', code }, 'terminal detached'),
    );
  }
}

function serve(ws: WebSocket, proc: ManagedProcess, replay: boolean, log: Logger): void {
  const stop = new AbortController();
  let paused: NodeJS.Timeout | null = null;
  ws.once('close', () => {
    stop.abort();
    if (paused !== null) clearInterval(paused);
  });
  const close = (code: number, reason: string): void => {
    if (ws.readyState === WebSocket.OPEN) ws.close(code, reasonText(reason));
  };

  ws.on('message', (data: Buffer, isBinary: boolean) => {
    if (!isBinary) return control(ws, proc, data.toString('utf8'));
    if (data.length === 0) return;
    let writing: Promise<number>;
    try {
      writing = proc.writeStdin(data, false);
    } catch (err) {
      if (err instanceof BrowserdError && err.code === 'limit_exceeded') {
        const total = err.inner?.code === 'stdin_queue_total';
        return close(CLOSE.TRY_AGAIN_LATER, total ? 'stdin_queue_total: too much input queued over every process' : 'too much input queued: the process is not reading');
      }
      return; // process_exited: the exit close follows once its output is sent
    }
    // 504 (the bytes stay queued and arrive when the child reads) and 409 (exited) need no answer here.
    writing.catch((err: unknown) => log.debug({ event: 'attach_input_pending', err: (err as Error).message }, 'attach input not yet in the terminal'));
    if (paused === null && proc.stdin.queuedBytes > INPUT_PAUSE_BYTES) {
      ws.pause();
      paused = setInterval(() => {
        if (proc.stdin.queuedBytes > INPUT_PAUSE_BYTES && proc.running) return;
        if (paused !== null) clearInterval(paused);
        paused = null;
        ws.resume();
      }, INPUT_CHECK_MS);
    }
  });

  void pumpOutput(ws, proc, replay, stop.signal, close).catch((err: unknown) => {
    log.error({ event: 'attach_failed', err }, 'attach output failed');
    ws.terminate();
  });
}

/** Sends the output from the client's offset until the exit (close 4000), the client leaving, or a hole (close 1013). */
async function pumpOutput(ws: WebSocket, proc: ManagedProcess, replay: boolean, signal: AbortSignal, close: (code: number, reason: string) => void): Promise<void> {
  const buffer = proc.output;
  let offset = replay ? buffer.startOffset : buffer.endOffset;
  while (ws.readyState === WebSocket.OPEN && !signal.aborted) {
    const batch = buffer.read(offset, READ_BATCH_BYTES);
    if (batch.lost > 0) return close(CLOSE.TRY_AGAIN_LATER, `the client reads too slowly: ${batch.lost} bytes of output passed it`);
    let flushed: Promise<void> | null = null;
    for (const [i, c] of batch.chunks.entries()) {
      if (i < batch.chunks.length - 1) ws.send(c.data, { binary: true });
      else flushed = new Promise((resolve) => ws.send(c.data, { binary: true }, () => resolve()));
    }
    offset = batch.next;
    if (flushed !== null && ws.bufferedAmount > SEND_BUFFER_BYTES) await flushed;
    if (batch.chunks.length > 0) continue;
    const exit = buffer.exit;
    if (exit !== null && offset >= buffer.endOffset) {
      return close(CLOSE_PROCESS_EXITED, JSON.stringify({ exit_code: exit.exit_code, signal: exit.signal }));
    }
    await buffer.wait(offset, signal);
  }
}

/** A text frame: a control message, or an error frame back (the connection stays). */
function control(ws: WebSocket, proc: ManagedProcess, text: string): void {
  let problem: string;
  try {
    const parsed = controlMessage().safeParse(JSON.parse(text));
    if (parsed.success) {
      proc.resize(parsed.data.rows, parsed.data.cols);
      return;
    }
    problem = parsed.error.issues.map((i) => `${i.path.join('.') || '(message)'}: ${i.message}`).join('; ');
  } catch (err) {
    problem = err instanceof SyntaxError ? `not JSON: ${err.message}` : (err as Error).message;
  }
  if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'error', message: `text frames are control messages ({"type":"resize","rows":…,"cols":…}): ${problem}` }));
}
