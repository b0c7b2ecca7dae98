// The daemon's one CDP client, typed by devtools-protocol: commands with a deadline, events,
// flat child sessions (attached with cdp/attach.ts). It runs over a multiplexer channel in the
// daemon, one client (one browser-level session) per internal consumer: the computer controls,
// telemetry, downloads, each /curl request, each extension activation; and over a WebSocket for tests and
// benchmarks (through the daemon's authenticated proxy, or straight to a Chromium's port). What it
// receives is parsed defensively: a message that is not a DevTools message is dropped and reported
// (over a channel: with the mux's, malformed.ts), and when it starts like the answer to a pending
// command, that command fails at once (CdpCallError, `malformed`) instead of waiting for its deadline.
import WebSocket from 'ws';
import type { ProtocolMapping } from 'devtools-protocol/types/protocol-mapping.js';
import type { Deadline } from '../core/deadline.js';
import type { Channel } from './channel.js';
import type { MalformedReason, MalformedReport } from './malformed.js';
import { CdpCallError } from './mux.js';
import { badAnswer, badId, eventMethod, leadingId, MALFORMED_ANSWER_CODE } from './wire.js';

export { CdpCallError };

type Commands = ProtocolMapping.Commands;
type Events = ProtocolMapping.Events;
export type CommandName = keyof Commands;
export type EventName = keyof Events;
export type Params<M extends CommandName> = Commands[M]['paramsType'] extends [] ? Record<string, never> : Commands[M]['paramsType'][0];
export type Result<M extends CommandName> = Commands[M]['returnType'];
export type EventParams<E extends EventName> = Events[E] extends [infer P] ? P : undefined;

/** What a client talks over. */
export interface CdpTransport {
  send(text: string): void;
  close(): void;
}

export interface SendOptions {
  sessionId?: string;
  /** The whole operation's deadline; else `timeoutMs`. */
  deadline?: Deadline;
  timeoutMs?: number;
}

/** Without a deadline, a command waits at most this long: no answer never wedges a caller. */
export const DEFAULT_CALL_TIMEOUT_MS = 30_000;

interface Pending {
  method: string;
  resolve(v: unknown): void;
  reject(e: Error): void;
  cleanup(): void;
}

type Listener = (params: unknown, sessionId: string | undefined) => void;

export class CdpClient {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private readonly listeners = new Map<string, Set<Listener>>();
  private closedWith: Error | null = null;
  private readonly closedWaiters: (() => void)[] = [];

  constructor(
    private readonly transport: CdpTransport,
    private readonly opts: { onMalformed?: (text: string, report: MalformedReport) => void; browserCommands?: () => number } = {},
  ) {}

  /**
   * Over a multiplexer channel: how many commands all clients of the browser (this one included)
   * have sent so far (Channel.browserCommands); null over a WebSocket, where others cannot be seen.
   */
  browserCommands(): number | null {
    return this.opts.browserCommands?.() ?? null;
  }

  /** A client on a multiplexer channel (opened with a sink that feeds `receive` and `ended`). */
  static overChannel(open: (sink: { message(data: Buffer): void; ended(end: { message: string }): void }) => Promise<Channel>): Promise<CdpClient> {
    let client: CdpClient | null = null;
    let early: Error | null = null;
    const sink = {
      message: (data: Buffer) => client?.receiveBytes(data),
      ended: (end: { message: string }) => {
        if (client === null) early = new Error(end.message);
        else client.fail(new Error(end.message));
      },
    };
    return open(sink).then((channel) => {
      client = new CdpClient({ send: (text) => void channel.send(text), close: () => channel.close() }, { onMalformed: (text, report) => channel.reportMalformed(text, report), browserCommands: () => channel.browserCommands() });
      if (early !== null) client.fail(early);
      return client;
    });
  }

  /**
   * A client over a WebSocket (ws://…/devtools/browser/… of a Chromium, or the daemon's proxy with a
   * token). `onOpen` sees the open socket first (tests: close codes, frames the client would not send).
   */
  static overWebSocket(url: string, opts: { headers?: Record<string, string>; timeoutMs?: number; maxPayload?: number; onOpen?: (ws: WebSocket) => void } = {}): Promise<CdpClient> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, { headers: opts.headers, perMessageDeflate: false, handshakeTimeout: opts.timeoutMs ?? 10_000, maxPayload: opts.maxPayload });
      ws.once('unexpected-response', (_req, res) => reject(new Error(`the WebSocket handshake was answered ${res.statusCode}`)));
      ws.once('error', reject);
      ws.once('open', () => {
        opts.onOpen?.(ws);
        const client = new CdpClient({ send: (text) => ws.send(text), close: () => ws.close() });
        ws.on('message', (data) => client.receive(data.toString()));
        ws.on('close', (code, reason) => client.fail(new Error(`the WebSocket closed (${code}${reason.length > 0 ? ` ${reason.toString()}` : ''})`)));
        ws.on('error', (err) => client.fail(err));
        resolve(client);
      });
    });
  }

  get isClosed(): boolean {
    return this.closedWith !== null;
  }

  /** Resolves once the connection is gone. */
  whenClosed(): Promise<void> {
    if (this.closedWith !== null) return Promise.resolve();
    return new Promise((resolve) => this.closedWaiters.push(resolve));
  }

  send<M extends CommandName>(method: M, params?: Params<M>, opts: SendOptions = {}): Promise<Result<M>> {
    if (this.closedWith !== null) return Promise.reject(new CdpCallError(method, this.closedWith.message, false));
    const id = this.nextId++;
    return new Promise<Result<M>>((resolve, reject) => {
      const deadline = opts.deadline;
      const onAbort = (): void => settle(new CdpCallError(method, (deadline?.signal.reason as Error | undefined)?.message ?? 'no answer in time', false));
      const timer = deadline === undefined ? setTimeout(() => settle(new CdpCallError(method, `no answer within ${opts.timeoutMs ?? DEFAULT_CALL_TIMEOUT_MS} ms`, false)), opts.timeoutMs ?? DEFAULT_CALL_TIMEOUT_MS) : null;
      const settle = (err: Error | null, value?: unknown): void => {
        if (!this.pending.delete(id)) return;
        cleanup();
        if (err !== null) reject(err);
        else resolve(value as Result<M>);
      };
      const cleanup = (): void => {
        if (timer !== null) clearTimeout(timer);
        deadline?.signal.removeEventListener('abort', onAbort);
      };
      this.pending.set(id, { method, resolve: (v) => settle(null, v), reject: (e) => settle(e), cleanup });
      if (deadline?.expired) return onAbort();
      deadline?.signal.addEventListener('abort', onAbort, { once: true });
      const msg: Record<string, unknown> = { id, method, params: params ?? {} };
      if (opts.sessionId !== undefined) msg.sessionId = opts.sessionId;
      this.transport.send(JSON.stringify(msg));
    });
  }

  /** Every `event` (of any session); returns the unsubscribe function. */
  on<E extends EventName>(event: E, listener: (params: EventParams<E>, sessionId: string | undefined) => void): () => void {
    let set = this.listeners.get(event);
    if (set === undefined) this.listeners.set(event, (set = new Set()));
    set.add(listener as Listener);
    return () => set.delete(listener as Listener);
  }

  /** The first `event` for which `pred` holds, before the deadline. */
  waitFor<E extends EventName>(event: E, pred: (params: EventParams<E>, sessionId: string | undefined) => boolean, deadline: Deadline): Promise<EventParams<E>> {
    return new Promise((resolve, reject) => {
      const off = this.on(event, (p, s) => {
        if (!pred(p, s)) return;
        done();
        resolve(p);
      });
      const onAbort = (): void => {
        done();
        reject(new CdpCallError(event, `not seen: ${(deadline.signal.reason as Error | undefined)?.message ?? 'deadline'}`, false));
      };
      const done = (): void => {
        off();
        deadline.signal.removeEventListener('abort', onAbort);
      };
      if (deadline.expired) return onAbort();
      deadline.signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Ends the connection (its session is detached); pending commands fail. Idempotent. */
  close(): void {
    if (this.closedWith !== null) return;
    this.transport.close();
    this.fail(new Error('the CDP client was closed'));
  }

  /**
   * A message from a channel. An event nobody here listens to is dropped before it is decoded and
   * parsed: most of what the pages' Network and Runtime domains send the daemon's session
   * (ExtraInfo, dataReceived, execution contexts) has no listener, and parsing it was the bulk of
   * the client's time during page loads with telemetry on (bench/ANALYSIS.md §19).
   */
  private receiveBytes(data: Buffer): void {
    const method = eventMethod(data);
    if (method !== null && (this.listeners.get(method)?.size ?? 0) === 0) return;
    this.receive(data.toString('utf8'));
  }

  private receive(text: string): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (err) {
      return this.malformed(text, 'not_json', (err as Error).message, leadingId(text));
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return this.malformed(text, 'bad_shape', 'not a JSON object', leadingId(text));
    const msg = parsed as { id?: unknown; method?: unknown; params?: unknown; result?: unknown; error?: unknown; sessionId?: unknown };
    if (msg.sessionId !== undefined && typeof msg.sessionId !== 'string') return this.malformed(text, 'bad_shape', 'its sessionId is not a string', leadingId(text));
    if (msg.id !== undefined) {
      const wrongId = badId(msg.id);
      if (wrongId !== null) return this.malformed(text, 'bad_shape', wrongId, null);
      const id = msg.id as number;
      const p = this.pending.get(id);
      if (p === undefined) {
        // An answer after its caller gave up is expected; one to an id never sent is not.
        if (id < 1 || id >= this.nextId) this.malformed(text, 'unknown_id', `an answer to id ${id}, never sent`, null);
        return;
      }
      const wrong = badAnswer(msg);
      if (wrong !== null) return this.malformed(text, 'bad_shape', wrong, id);
      if (msg.error !== undefined) {
        const e = msg.error as { code?: unknown; message?: unknown };
        const replaced = e.code === MALFORMED_ANSWER_CODE; // the mux's stand-in for a malformed answer
        p.reject(new CdpCallError(p.method, typeof e.message === 'string' ? e.message : 'error', !replaced, replaced));
      } else {
        p.resolve(msg.result);
      }
      return;
    }
    if (typeof msg.method !== 'string') return this.malformed(text, 'bad_shape', msg.method === undefined ? 'neither an id nor a method' : 'its method is not a string', null);
    if (msg.params !== undefined && (typeof msg.params !== 'object' || msg.params === null || Array.isArray(msg.params))) {
      return this.malformed(text, 'bad_shape', `the params of ${msg.method} are not an object`, null);
    }
    for (const l of [...(this.listeners.get(msg.method) ?? [])]) {
      try {
        l(msg.params, msg.sessionId as string | undefined);
      } catch {
        // a listener's bug must not break the connection for the others
      }
    }
  }

  /** A message that is not a DevTools message: reported; the pending command `id` (when it is one) fails now. */
  private malformed(text: string, reason: MalformedReason, detail: string, id: number | null): void {
    const p = id === null ? undefined : this.pending.get(id);
    this.opts.onMalformed?.(text, { reason, detail, method: p?.method });
    p?.reject(new CdpCallError(p.method, `Chromium sent a malformed answer (${detail})`, false, true));
  }

  private fail(err: Error): void {
    if (this.closedWith !== null) return;
    this.closedWith = err;
    for (const p of [...this.pending.values()]) p.reject(new CdpCallError(p.method, err.message, false));
    this.pending.clear();
    for (const w of this.closedWaiters.splice(0)) w();
  }
}
