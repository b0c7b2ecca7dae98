// WebSocket clients of the CDP endpoint, each bridged to its own multiplexer channel. The channel
// (the client's own session in Chromium) is opened before the handshake is answered, so a client
// gets 101 only when Chromium is there; a client arriving while Chromium starts or restarts waits
// for it, within one deadline. Messages are bounded (ws maxPayload: close 1009); a client whose
// Chromium went away is closed with 1012 (reconnect to the same URL); a client that reads too
// slowly is closed with 1013 rather than buffered without bound (send-budget.ts: its own limit, and
// one over every client; the reason starts with slow_client or cdp_queue_full); one that does not
// read even its close frame is cut at the next message that finds the total still passed. A client
// writing faster than Chromium reads is paused (its socket stops being read, TCP pushes back).
import type { Protocol } from 'devtools-protocol';
import WebSocket from 'ws';
import { Deadline, DeadlineError } from '../core/deadline.js';
import { BrowserUnavailableError, NotFoundError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { CLOSE, reasonText, WebSocketHub, type UpgradeRequest } from '../core/streams/websocket.js';
import type { Channel, ChannelEnd, ChannelKind } from './channel.js';
import { CdpCallError, type CdpMux } from './mux.js';
import { SendBudget, type QueuedClient } from './send-budget.js';

/** How long a CDP client waits for a starting or restarting Chromium before a 503. */
export const CDP_READY_WAIT_MS = 15_000;

export interface ReadyMux {
  mux: CdpMux;
  pid: number;
  version: Protocol.Browser.GetVersionResponse;
}

export interface BridgeHost {
  /** The multiplexer of the ready Chromium, waited for within `deadline`; BrowserUnavailableError otherwise. */
  waitMux(deadline: Deadline): Promise<ReadyMux>;
  /** null when Chromium is ready, else why not (logged when a client has to wait). */
  notReadyReason(): string | null;
}

/** A CDP client's connection, for the telemetry's cdp_connect / cdp_disconnect. */
export interface CdpClientEvents {
  connected(c: { remote: string; target: string | undefined; pid: number }): void;
  closed(c: { remote: string; reason: 'client_close' | 'upstream_changed' | 'upstream_error' | 'context_cancelled'; ms: number; messages: number; code: number }): void;
}

/** Why a connection ended, in the SDK's words (BrowserCdpDisconnectEvent.reason). */
const REASON_BY_END: Record<ChannelEnd['code'], 'client_close' | 'upstream_changed' | 'upstream_error' | 'context_cancelled'> = {
  browser_gone: 'upstream_changed',
  restart: 'upstream_changed',
  stopping: 'context_cancelled',
  target_closed: 'upstream_error',
  too_big: 'upstream_error',
  client_closed: 'client_close',
};

const CLOSE_BY_END: Record<ChannelEnd['code'], number> = {
  browser_gone: CLOSE.SERVICE_RESTART,
  restart: CLOSE.SERVICE_RESTART,
  stopping: CLOSE.GOING_AWAY,
  target_closed: CLOSE.NORMAL,
  too_big: CLOSE.TOO_BIG,
  client_closed: CLOSE.NORMAL,
};

/** A connected client: its socket and channel, as the send budget sees it. */
class Client implements QueuedClient {
  constructor(
    readonly ws: WebSocket,
    readonly channel: Channel,
  ) {}

  get bufferedAmount(): number {
    return this.ws.bufferedAmount;
  }

  get closing(): boolean {
    return this.ws.readyState === WebSocket.CLOSING;
  }
}

export interface CdpBridgeOptions {
  maxMessageBytes: number;
  /** CDP clients connecting and leaving (the telemetry). */
  events?: CdpClientEvents;
  /** Unsent bytes one client may hold before a message (BROWSERD_CDP_CLIENT_QUEUE_BYTES). */
  clientQueueBytes: number;
  /** Unsent bytes over every client before a message (BROWSERD_CDP_QUEUE_TOTAL_BYTES). */
  queueTotalBytes: number;
  log: Logger;
}

export class CdpBridge extends WebSocketHub {
  private readonly clients = new Map<WebSocket, Client>();
  private readonly budget: SendBudget<Client>;

  constructor(
    private readonly host: BridgeHost,
    private readonly opts: CdpBridgeOptions,
  ) {
    super(opts.maxMessageBytes);
    this.budget = new SendBudget({ clientBytes: opts.clientQueueBytes, totalBytes: opts.queueTotalBytes });
  }

  /** Bytes held unsent for every client (browserd_memory_pool_bytes{pool="cdp_client_queue"}). */
  get queuedBytes(): number {
    return SendBudget.total(this.clients.values());
  }

  /** The upgrade handler: a browser-level client, or a client of one target (`/devtools/page/{id}`). */
  handle(ctx: UpgradeRequest, kind: ChannelKind): void {
    void this.connect(ctx, kind).catch((err: unknown) => ctx.refuse(err));
  }

  private async connect(ctx: UpgradeRequest, kind: ChannelKind): Promise<void> {
    const refused = this.refusal(ctx);
    if (refused !== null) throw refused;
    const deadline = Deadline.in(CDP_READY_WAIT_MS, 'waiting for Chromium');
    const holder: { ws: WebSocket | null; early: Buffer[]; end: ChannelEnd | null; messages: number } = { ws: null, early: [], end: null, messages: 0 };
    const sink = {
      message: (data: Buffer) => {
        holder.messages++;
        if (holder.ws === null) holder.early.push(data);
        else this.toClient(holder.ws, data);
      },
      ended: (end: ChannelEnd) => {
        holder.end = end;
        if (holder.ws !== null) this.closeClient(holder.ws, end);
      },
    };
    let channel: Channel | null = null;
    let pid = 0;
    const notReady = this.host.notReadyReason();
    if (notReady !== null) ctx.log.debug({ event: 'cdp_wait', reason: notReady }, 'CDP client waits for Chromium');
    try {
      // A restart may begin at any point of the set-up (Chromium dies a moment before the supervisor
      // sees it, or is replaced while the session is attached): the client waits for the next one.
      while (channel === null) {
        const current = await this.host.waitMux(deadline);
        if (ctx.socket.destroyed) return;
        try {
          channel = await current.mux.open(kind, sink, deadline);
          pid = current.pid;
        } catch (err) {
          if (err instanceof CdpCallError && err.answered) throw new NotFoundError(`no target ${kind.kind === 'target' ? kind.targetId : ''}: ${err.text}`);
          if (deadline.expired) throw err;
          ctx.log.debug({ event: 'cdp_wait', reason: (err as Error).message }, 'Chromium went away while the client connected; waiting for the next one');
          await deadline.sleep(50);
        }
      }
    } catch (err) {
      if (err instanceof DeadlineError || (err instanceof CdpCallError && !err.answered)) {
        throw new BrowserUnavailableError(`Chromium was not ready within ${CDP_READY_WAIT_MS} ms`);
      }
      throw err;
    } finally {
      deadline.dispose();
    }
    const ch = channel;
    if (ctx.socket.destroyed || this.closed || holder.end !== null) {
      ch.close();
      if (!ctx.socket.destroyed) throw new BrowserUnavailableError(holder.end?.message ?? 'browserd is stopping');
      return;
    }
    const remote = `${ctx.req.socket.remoteAddress ?? ''}:${ctx.req.socket.remotePort ?? ''}`;
    let since = 0;
    this.accept(ctx, 'cdp_client', (ws) => {
      holder.ws = ws;
      this.clients.set(ws, new Client(ws, ch));
      since = performance.now();
      ws.on('message', () => holder.messages++);
      this.opts.events?.connected({ remote, target: kind.kind === 'target' ? kind.targetId : undefined, pid });
      ctx.log.info({ event: 'cdp_connected', chromium_pid: pid, target: kind.kind === 'target' ? kind.targetId : undefined, connections: this.live.size }, 'CDP client connected');
      ws.on('message', (data: Buffer, isBinary: boolean) => {
        if (isBinary) return this.closeClient(ws, { code: 'client_closed', message: 'binary frames are not CDP' }, 1003);
        if (!ch.send(data)) {
          ws.pause();
          ch.whenWritable(() => ws.resume());
        }
      });
      for (const data of holder.early.splice(0)) this.toClient(ws, data);
    }, (code, ws) => {
      this.clients.delete(ws);
      ch.close();
      ctx.log.info({ event: 'cdp_closed', chromium_pid: pid, code, by: ch.endReason?.code ?? 'client' }, 'CDP connection closed');
      this.opts.events?.closed({ remote, reason: REASON_BY_END[ch.endReason?.code ?? 'client_closed'], ms: performance.now() - since, messages: holder.messages, code });
    });
  }

  private toClient(ws: WebSocket, data: Buffer): void {
    const client = this.clients.get(ws);
    if (ws.readyState !== WebSocket.OPEN || client === undefined) return;
    ws.send(data, { binary: false });
    const verdict = this.budget.check(client, data.length, this.clients.values());
    if (verdict === null) return;
    const victim = verdict.client;
    this.opts.log.warn(
      { event: 'cdp_client_slow', code: verdict.code, unsent: victim.bufferedAmount, total_unsent: this.queuedBytes, closing: victim.closing },
      victim.closing ? 'a CDP client closed for reading too slowly still does not read: cut' : 'a CDP client reads too slowly: closed with 1013',
    );
    // Closed already and still not reading (its close frame waits behind what it has not read): cut now.
    // Else the 1013 goes first: the channel's own end would close with 1000.
    if (victim.closing) victim.ws.terminate();
    else this.closeClient(victim.ws, { code: 'client_closed', message: verdict.reason }, CLOSE.TRY_AGAIN_LATER);
    victim.channel.close();
  }

  private closeClient(ws: WebSocket, end: ChannelEnd, code = CLOSE_BY_END[end.code]): void {
    if (ws.readyState === WebSocket.OPEN) ws.close(code, reasonText(end.code === 'browser_gone' || end.code === 'restart' ? `${end.message}; reconnect to the same URL` : end.message));
    else if (ws.readyState === WebSocket.CONNECTING) ws.terminate();
  }
}
