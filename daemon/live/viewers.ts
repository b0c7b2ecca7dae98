// The viewers of the live view: one WebSocket each. Frames go out as binary messages (JPEG bytes
// as the shared screencast made them), the newest only: while a frame is still being written to a
// viewer (or more than FRAME_HIGH_WATER_BYTES wait in its socket) later frames replace each other
// in one slot, sent when the socket drains; a slow viewer never grows a queue. A viewer subscribes
// to the screencast while it is open (the last one leaving stops it, unless a recording still
// watches). Text messages both ways are JSON: to the viewer `hello` (whether it may control),
// `state` (tabs, URL, history; when it changed, checked every STATE_MS), `copied` (the selected
// text after a copy) and `error`; from it the input of input.ts, one message at a time
// in order on the controls' input queue (mouse moves waiting behind others are merged: the newest
// wins). A view-only viewer's input is ignored (each message answered with an `error`).
import type { RawData, WebSocket } from 'ws';
import type { ComputerModule, Frame, Screencast } from '../computer/index.js';
import { dispatchLiveInput, liveInputSchema, liveState, type LiveInput } from './input.js';
import { BrowserdError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { CLOSE, WebSocketHub, type UpgradeRequest } from '../core/streams/websocket.js';
import { NewestFrame } from './newest-frame.js';

/** Bytes waiting in a viewer's socket above which frames are held back (the newest kept). */
export const FRAME_HIGH_WATER_BYTES = 256 * 1024;
/** How often a viewer's tabs, URL and history are checked. */
export const STATE_MS = 1000;
/** The largest message a viewer may send (a paste of LIVE_TEXT_MAX UTF-16 units as UTF-8 JSON, and some). */
export const MAX_MESSAGE_BYTES = 256 * 1024;
/** Input messages a viewer may have waiting; more closes it with 1013 (it sends faster than the page takes input). */
export const MAX_PENDING_INPUT = 1000;

export interface ViewerDeps {
  screencast: Screencast;
  computer: ComputerModule;
  log: Logger;
}

export class LiveHub extends WebSocketHub {
  constructor(private readonly deps: ViewerDeps) {
    super(MAX_MESSAGE_BYTES);
  }

  /** Completes the handshake and serves the viewer; `control` false: its input is ignored. */
  handle(ctx: UpgradeRequest, control: boolean): void {
    const refused = this.refusal(ctx);
    if (refused !== null) return ctx.refuse(refused);
    const log = ctx.log.child({ viewer_control: control });
    this.accept(
      { ...ctx, log },
      'live',
      (ws) => {
        log.info({ event: 'live_viewer_opened', viewers: this.live.size }, 'a live viewer connected');
        serve(ws, control, this.deps, log);
      },
      (code) => log.info({ event: 'live_viewer_closed', code, viewers: this.live.size }, 'a live viewer left'),
    );
  }
}

function serve(ws: WebSocket, control: boolean, deps: ViewerDeps, log: Logger): void {
  const stop = new AbortController();
  const sendJson = (msg: Record<string, unknown>): void => {
    if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(msg));
  };
  sendJson({ t: 'hello', control });

  // Frames: one in flight, the newest waiting.
  const slot = new NewestFrame(
    {
      get bufferedAmount() {
        return ws.bufferedAmount;
      },
      get open() {
        return ws.readyState === ws.OPEN;
      },
      send: (data, done) => ws.send(data, { binary: true }, () => done()),
    },
    FRAME_HIGH_WATER_BYTES,
  );
  const sendFrame = (frame: Frame): void => slot.offer(frame.jpeg);
  const latest = deps.screencast.latest();
  if (latest !== null) sendFrame(latest);
  const unsubscribe = deps.screencast.subscribe(sendFrame);

  // State: when it changed.
  let lastState = '';
  let checking = false;
  const checkState = (): void => {
    if (checking) return;
    checking = true;
    liveState(deps.computer, stop.signal)
      .then((s) => {
        const text = JSON.stringify({ t: 'state', ...s });
        if (text !== lastState && ws.readyState === ws.OPEN) ws.send(text);
        lastState = text;
      })
      .catch((err: unknown) => log.debug({ event: 'live_state_failed', reason: (err as Error).message }, 'no live state'))
      .finally(() => (checking = false));
  };
  checkState();
  const timer = setInterval(checkState, STATE_MS);

  // Input: in order, one at a time.
  const pending: LiveInput[] = [];
  let working = false;
  const work = async (): Promise<void> => {
    if (working) return;
    working = true;
    while (pending.length > 0 && !stop.signal.aborted) {
      const msg = pending.shift() as LiveInput;
      if (msg.t === 'move' && pending[0]?.t === 'move') continue; // a newer move waits: it wins
      try {
        const copied = await dispatchLiveInput(deps.computer, msg, stop.signal);
        if (msg.t === 'copy' && copied !== null) sendJson({ t: 'copied', text: copied });
        if (msg.t !== 'move' && msg.t !== 'wheel') checkState();
      } catch (err) {
        if (stop.signal.aborted) break;
        sendJson({ t: 'error', message: err instanceof BrowserdError ? `${err.code}: ${err.message}` : 'the input failed' });
      }
    }
    working = false;
  };

  ws.on('message', (data: RawData, isBinary: boolean) => {
    if (isBinary) return;
    if (!control) {
      sendJson({ t: 'error', message: 'view only: input is ignored' });
      return;
    }
    let parsed;
    try {
      parsed = liveInputSchema().safeParse(JSON.parse(String(data)));
    } catch {
      parsed = null;
    }
    if (parsed === null || !parsed.success) {
      sendJson({ t: 'error', message: `invalid input message${parsed ? `: ${parsed.error.issues[0]?.path.join('.')} ${parsed.error.issues[0]?.message}` : ' (not JSON)'}` });
      return;
    }
    if (pending.length >= MAX_PENDING_INPUT) {
      ws.close(CLOSE.TRY_AGAIN_LATER, 'too much input waiting: the page does not take it as fast as it comes');
      return;
    }
    pending.push(parsed.data);
    void work();
  });

  ws.once('close', () => {
    stop.abort();
    clearInterval(timer);
    unsubscribe();
    slot.clear();
    pending.length = 0;
  });
}
