// The WebSocket endpoints of the daemon (the CDP proxy, the terminal attach, the live view) share
// this: what an upgrade route hands over, the handshake checks made before it is answered, the one
// accept sequence, the close codes and reasons, and the set of live clients that shutdown closes. What flows over a socket is each
// endpoint's own.
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { BrowserUnavailableError, InvalidRequestError } from '../errors.js';
import type { Logger } from '../log.js';

/** Close codes (RFC 6455 and the IANA registry). */
export const CLOSE = { NORMAL: 1000, GOING_AWAY: 1001, TOO_BIG: 1009, SERVICE_RESTART: 1012, TRY_AGAIN_LATER: 1013 } as const;

/** What an upgrade hands the endpoint (the route's UpgradeContext). */
export interface UpgradeRequest {
  req: IncomingMessage;
  socket: Duplex;
  head: Buffer;
  log: Logger;
  /** Answers the upgrade request with this error (in the contract's shape) and ends the socket. */
  refuse(err: unknown): void;
}

/** A close reason fits 123 bytes. */
export function reasonText(text: string): string {
  return Buffer.byteLength(text) <= 123 ? text : `${Buffer.from(text).subarray(0, 120).toString()}…`;
}

/** A reason the request is not a usable WebSocket handshake, or null. */
export function handshakeProblem(req: IncomingMessage): string | null {
  if ((req.headers.upgrade ?? '').toLowerCase() !== 'websocket') return 'the Upgrade header must be "websocket"';
  const key = req.headers['sec-websocket-key'];
  if (typeof key !== 'string' || !/^[A-Za-z0-9+/]{22}==$/.test(key)) return 'Sec-WebSocket-Key is missing or malformed';
  if (req.headers['sec-websocket-version'] !== '13') return 'Sec-WebSocket-Version must be 13';
  return null;
}

/**
 * The clients of one endpoint: the server that completes their handshakes (no compression, frames
 * up to `maxPayload`: larger is close 1009), the live ones, and whether the daemon is stopping.
 */
export class WebSocketHub {
  protected readonly wss: WebSocketServer;
  protected readonly live = new Set<WebSocket>();
  protected closed = false;

  constructor(maxPayload: number) {
    this.wss = new WebSocketServer({ noServer: true, maxPayload, perMessageDeflate: false, clientTracking: false });
  }

  get connections(): number {
    return this.live.size;
  }

  /** Why this handshake is refused before anything else (a malformed handshake: 400; the daemon stopping: 503), or null. */
  protected refusal(ctx: UpgradeRequest): Error | null {
    const bad = handshakeProblem(ctx.req);
    if (bad !== null) return new InvalidRequestError(bad);
    if (this.closed) return new BrowserUnavailableError('browserd is stopping', { retryable: false });
    return null;
  }

  /**
   * The one accept sequence of every endpoint: completes the handshake, keeps the client among the
   * live ones until it closes, logs its socket errors at debug (`<name>_socket_error`), then hands it
   * to `open`; `closed` follows its close (after it left the live set).
   */
  protected accept(ctx: UpgradeRequest, name: string, open: (ws: WebSocket) => void, closed: (code: number, ws: WebSocket) => void): void {
    this.wss.handleUpgrade(ctx.req, ctx.socket, ctx.head, (ws) => {
      this.live.add(ws);
      ws.on('error', (err) => ctx.log.debug({ event: `${name}_socket_error`, err: err.message }, `${name} socket error`));
      ws.once('close', (code) => {
        this.live.delete(ws);
        closed(code, ws);
      });
      open(ws);
    });
  }

  /** Refuses new clients and closes the live ones with 1001. Idempotent. */
  close(): void {
    this.closed = true;
    for (const ws of [...this.live]) ws.close(CLOSE.GOING_AWAY, 'browserd is stopping');
  }

  /** Cuts every client now. Idempotent. */
  destroy(): void {
    this.closed = true;
    for (const ws of [...this.live]) ws.terminate();
    this.live.clear();
  }
}
