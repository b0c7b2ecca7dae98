// WebDriver BiDi through the daemon: a client's WebSocket at /browsers/{id}/webdriver/session/<sid>
// (a classic session's webSocketUrl) or /browsers/{id}/webdriver/session (a BiDi-only session: the
// client sends session.new) is bridged to ChromeDriver's own socket for it. Messages go both ways
// unchanged, but for what the daemon reads: session.new (capabilities checked and attached, caps.ts;
// a refusal is BiDi's error answer `invalid argument` carrying the daemon's bad_request message),
// its answer (the session is known from then on), browsingContext.create's answer (the tab is the
// session's) and session.end. A BiDi-only session ends with its socket (ChromeDriver ends it); its
// tabs are closed then. The upstream socket is opened before the client's handshake is answered, so a
// client gets 101 only once ChromeDriver took it.
import WebSocket from 'ws';
import { Deadline } from '../core/deadline.js';
import { BadRequestError, BrowserUnavailableError, InvalidRequestError, NotFoundError, toBrowserdError } from '../core/errors.js';
import { CLOSE, handshakeProblem, reasonText, WebSocketHub, type UpgradeRequest } from '../core/streams/websocket.js';
import { attachCapabilities } from './caps.js';
import { DRIVER_START_MS } from './driver.js';
import type { Sessions } from './sessions.js';

export interface BidiDeps {
  driverSocket(deadline: Deadline): Promise<string>;
  sessions: Sessions;
  closeTabs(targetIds: string[]): Promise<void>;
}

/** A BiDi message of the client's, or of ChromeDriver's: only these fields are read. */
interface Message {
  id?: unknown;
  method?: unknown;
  params?: { capabilities?: unknown };
  type?: unknown;
  result?: { sessionId?: unknown; context?: unknown };
}

function parse(data: WebSocket.RawData): Message | null {
  try {
    const m = JSON.parse(data.toString()) as unknown;
    return typeof m === 'object' && m !== null ? (m as Message) : null;
  } catch {
    return null;
  }
}

function openUpstream(url: string, maxPayload: number): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { maxPayload, perMessageDeflate: false });
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (_req, res) => {
      res.resume();
      reject(res.statusCode === 404 ? new NotFoundError('no such WebDriver session') : new BrowserUnavailableError(`ChromeDriver refused the BiDi socket (${res.statusCode})`));
    });
    ws.once('error', (err) => reject(new BrowserUnavailableError('ChromeDriver is not reachable', { inner: { code: 'chromedriver_gone', message: err.message } })));
  });
}

export class BidiBridge extends WebSocketHub {
  constructor(
    private readonly deps: BidiDeps,
    private readonly maxPayload: number,
  ) {
    super(maxPayload);
  }

  /** The upgrade handler; `sessionId` null for a BiDi-only session (session.new over the socket). */
  handle(ctx: UpgradeRequest, sessionId: string | null): void {
    void this.connect(ctx, sessionId).catch((err: unknown) => ctx.refuse(err));
  }

  private async connect(ctx: UpgradeRequest, sessionId: string | null): Promise<void> {
    const bad = handshakeProblem(ctx.req);
    if (bad !== null) throw new InvalidRequestError(bad);
    if (this.closed) throw new BrowserUnavailableError('browserd is stopping', { retryable: false });
    if (sessionId !== null && !this.deps.sessions.has(sessionId)) throw new NotFoundError(`no WebDriver session ${sessionId} (it ended, or it was not made through this daemon)`);
    const deadline = Deadline.in(DRIVER_START_MS, 'starting ChromeDriver');
    let socketPath: string;
    try {
      socketPath = await this.deps.driverSocket(deadline);
    } finally {
      deadline.dispose();
    }
    const upstream = await openUpstream(`ws+unix://${socketPath}:/session${sessionId === null ? '' : `/${encodeURIComponent(sessionId)}`}`, this.maxPayload);
    if (ctx.socket.destroyed) return void upstream.terminate();
    this.wss.handleUpgrade(ctx.req, ctx.socket, ctx.head, (client) => this.bridge(client, upstream, sessionId, ctx));
  }

  private bridge(client: WebSocket, upstream: WebSocket, attachedTo: string | null, ctx: UpgradeRequest): void {
    this.live.add(client);
    let session = attachedTo;
    if (session !== null) this.deps.sessions.socket(session, client);
    /** Commands whose answers the daemon reads: id → method. */
    const asked = new Map<number, string>();
    client.on('message', (data, isBinary) => {
      const msg = isBinary ? null : parse(data);
      if (msg !== null && typeof msg.id === 'number' && typeof msg.method === 'string') {
        if (msg.method === 'session.new') {
          try {
            const capabilities = attachCapabilities(msg.params?.capabilities, 'params.capabilities');
            asked.set(msg.id, msg.method);
            return upstream.send(JSON.stringify({ ...msg, params: { ...msg.params, capabilities } }));
          } catch (err) {
            const e = toBrowserdError(err);
            const details = e instanceof BadRequestError ? e.toBody().details : undefined;
            return client.send(JSON.stringify({ type: 'error', id: msg.id, error: 'invalid argument', message: `${e.code}: ${e.message}`, details }));
          }
        }
        if (msg.method === 'browsingContext.create' || msg.method === 'session.end') asked.set(msg.id, msg.method);
      }
      upstream.send(data, { binary: isBinary });
    });
    upstream.on('message', (data, isBinary) => {
      if (!isBinary && asked.size > 0) {
        const msg = parse(data);
        const method = msg !== null && typeof msg.id === 'number' ? asked.get(msg.id) : undefined;
        if (method !== undefined && msg !== null && msg.type === 'success') {
          asked.delete(msg.id as number);
          if (method === 'session.new' && typeof msg.result?.sessionId === 'string') {
            session = msg.result.sessionId;
            this.deps.sessions.opened(session);
            this.deps.sessions.socket(session, client);
          } else if (method === 'browsingContext.create' && session !== null && typeof msg.result?.context === 'string') {
            this.deps.sessions.tab(session, msg.result.context);
          } else if (method === 'session.end' && session !== null) {
            void this.deps.closeTabs(this.deps.sessions.ended(session, 'session.end'));
          }
        } else if (method !== undefined && msg?.type === 'error') {
          asked.delete(msg.id as number);
        }
      }
      if (client.readyState === WebSocket.OPEN) client.send(data, { binary: isBinary });
    });
    const onGone = (code: number, why: string): void => {
      this.live.delete(client);
      if (client.readyState === WebSocket.OPEN) client.close(code, reasonText(why));
      if (upstream.readyState === WebSocket.OPEN) upstream.close(CLOSE.NORMAL);
      // A BiDi-only session lives as long as its socket (ChromeDriver ends it with the socket).
      if (attachedTo === null && session !== null) void this.deps.closeTabs(this.deps.sessions.ended(session));
    };
    client.on('close', () => onGone(CLOSE.NORMAL, 'client closed'));
    upstream.on('close', (code) => onGone(code === CLOSE.NORMAL ? CLOSE.NORMAL : CLOSE.SERVICE_RESTART, 'ChromeDriver closed the session\'s socket (the session ended, or Chromium restarted)'));
    client.on('error', (err) => ctx.log.debug({ event: 'webdriver_bidi_client_error', err: err.message }, 'BiDi client socket error'));
    upstream.on('error', (err) => ctx.log.debug({ event: 'webdriver_bidi_upstream_error', err: err.message }, 'BiDi upstream socket error'));
    ctx.log.info({ event: 'webdriver_bidi_connected', session: attachedTo }, 'WebDriver BiDi client connected');
  }
}
