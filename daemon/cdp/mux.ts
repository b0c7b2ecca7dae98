// The CDP multiplexer: many clients over Chromium's one DevTools pipe. Each channel gets its own
// session — a browser-level one (`Target.attachToBrowserTarget`: its own setDiscoverTargets and
// setAutoAttach state) or a page's (`Target.attachToTarget`, flat) — and talks as if it had the
// connection to itself: its command ids are replaced by the mux's own on the way in and restored on
// the way out, messages of its top session lose their `sessionId` on the way out, and every child
// session it attaches (by command or auto-attach, at any depth) is routed to it alone. A channel
// can name only sessions it owns. `Browser.close` of a client is answered by the mux and reported
// (the supervisor restarts Chromium, not counting a crash). The root session (no sessionId)
// belongs to the mux: readiness, attaching channels, listing targets.
//
// Messages from Chromium are routed without parsing when they have the shape Chromium writes
// (`{"id":N,...}` first, `,"sessionId":"…"}` last): large answers (screenshots) are relayed as
// bytes. Anything else is parsed, and nothing Chromium sends can throw out of the pipe's reader: a
// message that is not JSON or not of a DevTools message's shape is dropped and reported (malformed.ts);
// when it starts like an answer to a pending command, that command fails at once — a mux's own call
// with a CdpCallError marked `malformed`, a client's with an error answer of code
// MALFORMED_ANSWER_CODE — instead of waiting for its deadline.
import type { Deadline } from '../core/deadline.js';
import type { Logger } from '../core/log.js';
import { CdpPipe } from './pipe.js';
import { Channel, type ChannelEnd, type ChannelKind, type ChannelSink } from './channel.js';
import { MalformedReporter } from './malformed.js';
import { attachKind, badAnswer, commandGuard, errorReply, leadingId, MALFORMED_ANSWER_CODE, parseHead, parseObject, parseTail, rewrite } from './wire.js';

export interface MuxOptions {
  log: Logger;
  maxMessageBytes: number;
  /** A channel sent Browser.close (it was answered `{}` already). */
  onBrowserClose(channel: Channel): void;
  /** Settings of the shared browser that the daemon owns (the download behaviour): see CommandPolicy. */
  policy?: CommandPolicy;
  /** Where malformed messages from Chromium are reported (default: logged, not counted). */
  malformed?: MalformedReporter;
}

/**
 * What the daemon keeps for itself of the one browser every client shares. A client's command
 * may be rewritten before it reaches Chromium (same method, other params; the client gets
 * Chromium's answer as usual), and once a client's session is detached the policy hears of it,
 * so that what that client set can be undone.
 */
export interface CommandPolicy {
  /** Why the command is refused (the client gets a CDP error with that text; Chromium never sees it), or null. */
  refuse?(channel: Channel, method: string, params: Record<string, unknown>): string | null;
  /** Params to send instead of `params`, or undefined to send the command as it is. Synchronous: commands keep their order. */
  rewrite?(channel: Channel, method: string, params: Record<string, unknown>): Record<string, unknown> | undefined;
  /** The channel's session is detached in Chromium (Chromium has dropped that session's settings). */
  released?(channel: Channel): void;
}

/** The CDP error code of a command the daemon's policy refused (JSON-RPC's server error). */
export const REFUSED_COMMAND_CODE = -32000;

/** Several modules' policies as one: the first refusal wins; rewrites apply in order; every one hears of a release. */
export function composePolicies(policies: readonly CommandPolicy[]): CommandPolicy {
  return {
    refuse(channel, method, params) {
      for (const p of policies) {
        const why = p.refuse?.(channel, method, params) ?? null;
        if (why !== null) return why;
      }
      return null;
    },
    rewrite(channel, method, params) {
      let out: Record<string, unknown> | undefined;
      for (const p of policies) out = p.rewrite?.(channel, method, out ?? params) ?? out;
      return out;
    },
    released(channel) {
      for (const p of policies) p.released?.(channel);
    },
  };
}

interface Pending {
  /** null: the mux's own command. */
  channel: Channel | null;
  clientId: number;
  method: string;
  resolve?: (result: Record<string, unknown>) => void;
  reject?: (err: Error) => void;
}

export class CdpCallError extends Error {
  constructor(
    readonly method: string,
    readonly text: string,
    /** Chromium answered with an error (else: no answer, the browser went away, or a malformed answer). */
    readonly answered: boolean,
    /** Chromium's answer was not a DevTools message (not JSON, or not of an answer's shape). */
    readonly malformed = false,
  ) {
    super(`${method}: ${text}`);
    this.name = 'CdpCallError';
  }
}

const MAX_ID = 2 ** 31 - 1;

export class CdpMux {
  readonly pipe: CdpPipe;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  /** Every session a channel owns (its top session and its children) → the channel. */
  private readonly sessions = new Map<string, Channel>();
  private readonly channels = new Set<Channel>();
  private ended: ChannelEnd | null = null;
  /** Every id up to MAX_ID has been handed out once (ids start again at 1). */
  private wrapped = false;
  private readonly malformed: MalformedReporter;
  /** Commands the channels have sent to Chromium: see Channel.browserCommands. */
  private clientCommands = 0;

  constructor(out: NodeJS.WritableStream, input: NodeJS.ReadableStream, private readonly opts: MuxOptions) {
    this.malformed = opts.malformed ?? new MalformedReporter(opts.log);
    this.pipe = new CdpPipe(out as never, input as never, opts.maxMessageBytes, {
      message: (data) => this.fromChromium(data),
      tooBig: (head, bytes) => this.tooBig(head, bytes),
      closed: () => this.closeAll({ code: 'browser_gone', message: 'Chromium went away' }),
    });
  }

  get channelCount(): number {
    return this.channels.size;
  }

  get isClosed(): boolean {
    return this.ended !== null;
  }

  /** A command on the root session; rejects with CdpCallError (answered or not), or when `signal` aborts. */
  call<T = Record<string, unknown>>(method: string, params: Record<string, unknown> = {}, signal?: AbortSignal): Promise<T> {
    if (this.ended !== null) return Promise.reject(new CdpCallError(method, this.ended.message, false));
    return new Promise<T>((resolve, reject) => {
      const id = this.takeId();
      const onAbort = (): void => {
        if (this.pending.delete(id)) reject(new CdpCallError(method, (signal?.reason as Error | undefined)?.message ?? 'aborted', false));
      };
      this.pending.set(id, {
        channel: null,
        clientId: id,
        method,
        resolve: (r) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(r as T);
        },
        reject: (e) => {
          signal?.removeEventListener('abort', onAbort);
          reject(e);
        },
      });
      if (signal?.aborted) return onAbort();
      signal?.addEventListener('abort', onAbort, { once: true });
      this.pipe.send(JSON.stringify({ id, method, params }));
    });
  }

  /**
   * A new channel with its own session; rejects when the session cannot be attached, or when
   * `deadline` ends first. The attach is not withdrawn then: a session Chromium attaches after the
   * caller gave up is detached again, never left attached with no channel.
   */
  async open(kind: ChannelKind, sink: ChannelSink, deadline?: Deadline): Promise<Channel> {
    const attaching =
      kind.kind === 'browser'
        ? this.call<{ sessionId: string }>('Target.attachToBrowserTarget', {})
        : this.call<{ sessionId: string }>('Target.attachToTarget', { targetId: kind.targetId, flatten: true });
    let result: { sessionId: string };
    try {
      result = await (deadline === undefined ? attaching : deadline.race(attaching));
    } catch (err) {
      attaching.then(
        (late) => void this.call('Target.detachFromTarget', { sessionId: late.sessionId }).catch(() => undefined),
        () => undefined,
      );
      throw err;
    }
    const channel = new Channel(kind, result.sessionId, sink, {
      send: (c, data) => this.fromClient(c, data),
      close: (c) => this.drop(c, true),
      whenWritable: (cb) => this.pipe.whenDrained(cb),
      malformed: (data, report) => this.malformed.report(data, report),
      commands: () => this.clientCommands,
    });
    if (this.ended !== null) {
      channel.end(this.ended);
      return channel;
    }
    this.channels.add(channel);
    this.sessions.set(result.sessionId, channel);
    return channel;
  }

  /** Ends every channel (Chromium gone, restart, shutdown) and fails the mux's own commands. Idempotent. */
  closeAll(end: ChannelEnd): void {
    if (this.ended !== null) return;
    this.ended = end;
    for (const p of this.pending.values()) p.reject?.(new CdpCallError(p.method, end.message, false));
    this.pending.clear();
    for (const c of [...this.channels]) this.drop(c, false, end);
    this.pipe.close();
  }

  private takeId(): number {
    const id = this.nextId;
    if (this.nextId >= MAX_ID) this.wrapped = true;
    this.nextId = this.nextId >= MAX_ID ? 1 : this.nextId + 1;
    return id;
  }

  /** A client's command: checked, its id replaced, its session filled in, written to the pipe. */
  private fromClient(channel: Channel, data: Buffer | string): boolean {
    if (this.ended !== null || channel.isEnded) return true;
    let msg: Record<string, unknown>;
    try {
      msg = JSON.parse(typeof data === 'string' ? data : data.toString('utf8')) as Record<string, unknown>;
    } catch (err) {
      channel.deliver(errorReply(undefined, -32700, `JSON: ${(err as Error).message}`));
      return true;
    }
    const refusal = commandGuard(msg, (sid) => this.sessions.get(sid) === channel);
    if (refusal !== null) {
      channel.deliver(refusal);
      return true;
    }
    const clientId = msg.id as number;
    const method = msg.method as string;
    const sessionId = (msg.sessionId as string | undefined) ?? channel.session;
    if (method === 'Browser.close' && sessionId === channel.session && channel.kind.kind === 'browser') {
      channel.deliver(Buffer.from(JSON.stringify({ id: clientId, result: {} })));
      this.opts.onBrowserClose(channel);
      return true;
    }
    const given = (msg.params as Record<string, unknown> | undefined) ?? {};
    const refused = this.opts.policy?.refuse?.(channel, method, given) ?? null;
    if (refused !== null) {
      channel.deliver(errorReply(clientId, REFUSED_COMMAND_CODE, `browserd: ${method} refused: ${refused}`, msg.sessionId as string | undefined));
      return true;
    }
    const params = this.opts.policy?.rewrite?.(channel, method, given);
    const id = this.takeId();
    this.clientCommands++;
    this.pending.set(id, { channel, clientId, method });
    return this.pipe.send(JSON.stringify(params === undefined ? { ...msg, id, sessionId } : { ...msg, params, id, sessionId }));
  }

  private fromChromium(data: Buffer): void {
    try {
      this.route(data);
    } catch (err) {
      // A message that got past the checks and still broke routing: dropped, the pipe goes on.
      this.malformed.report(data, { reason: 'bad_shape', detail: `routing failed: ${(err as Error).message}` });
    }
  }

  private route(data: Buffer): void {
    const head = parseHead(data);
    if (head.kind === 'response') return this.onResponse(head.id, data);
    if (head.kind === 'event') return this.onEvent(head.method, data);
    if (head.kind === 'malformed') {
      const p = head.id === null ? undefined : this.pending.get(head.id);
      this.malformed.report(data, { reason: head.reason, detail: head.detail, method: p?.method });
      if (p !== undefined) this.failMalformed(head.id as number, p, head.detail);
      return;
    }
    // An error without an id: a message of ours Chromium could not parse (never a client's: those are parsed first).
    this.opts.log.warn({ event: 'cdp_unroutable', head: data.subarray(0, 200).toString() }, 'a DevTools message without id or method');
  }

  /** A pending command whose answer was malformed fails now: the mux's own call rejects, a client gets an error answer. */
  private failMalformed(id: number, p: Pending, detail: string): void {
    this.pending.delete(id);
    const text = `Chromium sent a malformed answer (${detail})`;
    if (p.channel === null) p.reject?.(new CdpCallError(p.method, text, false, true));
    else if (!p.channel.isEnded) p.channel.deliver(errorReply(p.clientId, MALFORMED_ANSWER_CODE, `browserd: ${text}`));
  }

  private onResponse(id: number, data: Buffer): void {
    const p = this.pending.get(id);
    if (p === undefined) {
      // Its channel went away, or a command the mux gave up on; an id never handed out is Chromium's error.
      if (id < 1 || id > MAX_ID || (!this.wrapped && id >= this.nextId)) this.malformed.report(data, { reason: 'unknown_id', detail: `an answer to id ${id}, never sent` });
      return;
    }
    const bad = (detail: string, reason: 'not_json' | 'bad_shape' = 'bad_shape'): void => {
      this.malformed.report(data, { reason, detail, method: p.method });
      this.failMalformed(id, p, detail);
    };
    if (p.channel === null) {
      // (In Chromium's layout, starting `{"id":N,`: when it is not an object, it is not JSON.)
      const msg = parseObject(data) as { result?: Record<string, unknown>; error?: { message?: unknown } } | null;
      if (msg === null) return bad('not JSON', 'not_json');
      const wrong = badAnswer(msg);
      if (wrong !== null) return bad(wrong);
      this.pending.delete(id);
      const m = msg as NonNullable<typeof msg>;
      if (m.error !== undefined) p.reject?.(new CdpCallError(p.method, typeof m.error.message === 'string' ? m.error.message : 'error', true));
      else p.resolve?.(m.result ?? {});
      return;
    }
    const channel = p.channel;
    if (channel.isEnded) return void this.pending.delete(id);
    if (attachKind(p.method)) {
      // The session a client attached by command is its own (the event on its parent may have come first).
      const msg = parseObject(data) as { result?: { sessionId?: unknown }; error?: unknown } | null;
      if (msg === null) return bad('not JSON', 'not_json');
      const wrong = badAnswer(msg);
      if (wrong !== null) return bad(wrong);
      const sid = msg.result?.sessionId;
      if (typeof sid === 'string') this.own(channel, sid);
    }
    const out = rewrite(data, { id: p.clientId, stripSession: channel.session, reuse: true });
    if (out === null) return bad('not JSON', 'not_json');
    this.pending.delete(id);
    channel.deliver(out);
  }

  private onEvent(method: string, data: Buffer): void {
    const sid = parseTail(data);
    if (sid === null) return this.onRootEvent(method, data);
    const channel = this.sessions.get(sid);
    if (channel === undefined || channel.isEnded) return;
    const attached = method === 'Target.attachedToTarget';
    let child: unknown;
    if (attached || method === 'Target.detachedFromTarget') {
      const msg = parseObject(data);
      if (msg === null) return this.malformed.report(data, { reason: 'not_json', detail: `a ${method} event that is not a JSON object` });
      child = (msg.params as { sessionId?: unknown } | undefined)?.sessionId;
    }
    if (attached && typeof child === 'string') this.own(channel, child);
    // `data` is given up here (rewritten in place): read nothing of it afterwards.
    const out = sid === channel.session ? rewrite(data, { stripSession: sid, reuse: true }) : data;
    if (out === null) return this.malformed.report(data, { reason: 'not_json', detail: `a ${method} event that is not a JSON object` });
    channel.deliver(out);
    if (!attached && typeof child === 'string' && child !== channel.session) this.disown(channel, child);
  }

  /** Root events: a channel's top session detached (its page closed, or Chromium let it go). */
  private onRootEvent(method: string, data: Buffer): void {
    if (method !== 'Target.detachedFromTarget') return;
    const msg = parseObject(data);
    if (msg === null) return this.malformed.report(data, { reason: 'not_json', detail: `a ${method} event that is not a JSON object` });
    const sid = (msg.params as { sessionId?: unknown } | undefined)?.sessionId;
    const channel = typeof sid === 'string' ? this.sessions.get(sid) : undefined;
    if (channel === undefined || channel.session !== sid) return;
    this.drop(channel, false, { code: 'target_closed', message: channel.kind.kind === 'target' ? 'the target closed' : 'the session was detached' });
  }

  private tooBig(head: Buffer, bytes: number): void {
    const id = leadingId(head);
    const p = id === null ? undefined : this.pending.get(id);
    this.opts.log.warn({ event: 'cdp_message_too_big', bytes, limit: this.opts.maxMessageBytes, method: p?.method }, 'a DevTools message over BROWSERD_CDP_MAX_MESSAGE_BYTES was dropped');
    if (id === null || p === undefined) return;
    this.pending.delete(id);
    if (p.channel === null) p.reject?.(new CdpCallError(p.method, `the answer is over ${this.opts.maxMessageBytes} bytes`, false));
    else this.drop(p.channel, true, { code: 'too_big', message: `a message from Chromium (${bytes} bytes) is over ${this.opts.maxMessageBytes} bytes` });
  }

  private own(channel: Channel, sid: string): void {
    this.sessions.set(sid, channel);
    channel.owned.add(sid);
  }

  private disown(channel: Channel, sid: string): void {
    if (this.sessions.get(sid) === channel) this.sessions.delete(sid);
    channel.owned.delete(sid);
  }

  /** Forgets a channel; `detach`: its session is detached in Chromium (its children go with it). */
  private drop(channel: Channel, detach: boolean, end?: ChannelEnd): void {
    if (!this.channels.delete(channel)) {
      if (end !== undefined) channel.end(end);
      return;
    }
    for (const sid of channel.owned) if (this.sessions.get(sid) === channel) this.sessions.delete(sid);
    for (const [id, p] of this.pending) if (p.channel === channel) this.pending.delete(id);
    if (detach && this.ended === null) {
      const policy = this.opts.policy;
      void this.call('Target.detachFromTarget', { sessionId: channel.session })
        .catch(() => undefined)
        .then(() => {
          if (this.ended === null) policy?.released?.(channel);
        });
    }
    channel.end(end ?? { code: 'client_closed', message: 'the client closed the connection' });
  }
}
