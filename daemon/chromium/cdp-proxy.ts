// The stable CDP endpoint: GET /browsers/{id}/cdp (already authenticated by the server, scope
// `cdp`) is proxied to the current Chromium's browser endpoint. The upstream connection is made
// before the client's handshake is answered, so a client only gets 101 when Chromium is there.
// Messages are bounded (ws maxPayload → close 1009); a side whose peer is slow to drain is paused
// (its socket stops being read, TCP pushes back) instead of buffering without bound. When the
// Chromium behind a socket exits or restarts, the client is closed with 1012.
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket, { WebSocketServer, type RawData } from 'ws';
import type { Logger } from '../core/log.js';
import { BrowserdError, BrowserUnavailableError, InvalidRequestError, toBrowserdError } from '../core/errors.js';
import type { UpgradeContext } from '../http/router.js';
import type { DevToolsEndpoint } from './types.js';

/** How long a CDP client waits for a starting or restarting Chromium before a 503. */
export const CDP_READY_WAIT_MS = 15_000;
/** Upstream WebSocket handshake with Chromium. */
const UPSTREAM_HANDSHAKE_MS = 5000;
/** Between upstream attempts when Chromium refused (it may be going away). */
const UPSTREAM_RETRY_MS = 100;
/** Pause the sending side once this much waits unsent towards its peer ... */
export const HIGH_WATER_BYTES = 8 * 1024 * 1024;
/** ... and resume it once the backlog is below this. */
const LOW_WATER_BYTES = 1024 * 1024;
/** Close codes (RFC 6455 and the IANA registry). */
export const CLOSE_GOING_AWAY = 1001;
export const CLOSE_TOO_BIG = 1009;
export const CLOSE_SERVICE_RESTART = 1012;

export interface CdpProxyDeps {
  log: Logger;
  maxMessageBytes: number;
  /** Resolves with the current endpoint once Chromium is ready; BrowserUnavailableError otherwise. */
  waitEndpoint(timeoutMs: number): Promise<DevToolsEndpoint>;
  /** The pid of the Chromium that is ready now, or null. */
  currentPid(): number | null;
  /** Why Chromium is not ready (for the log of a waiting client). */
  notReadyReason(): string | null;
}

interface Pair {
  client: WebSocket;
  upstream: WebSocket;
  pid: number;
  upstreamTooBig: boolean;
  /** Who ended the pair, for the log. */
  closedBy: 'client' | 'chromium' | 'daemon' | null;
}

export class CdpProxy {
  private readonly wss: WebSocketServer;
  private readonly live = new Set<Pair>();
  private closed = false;

  constructor(private readonly deps: CdpProxyDeps) {
    this.wss = new WebSocketServer({ noServer: true, maxPayload: deps.maxMessageBytes, perMessageDeflate: false, clientTracking: false });
  }

  get connections(): number {
    return this.live.size;
  }

  /** The upgrade handler of GET /browsers/{id}/cdp. */
  handle(ctx: UpgradeContext): void {
    void this.connect(ctx).catch((err: unknown) => {
      ctx.refuse(err);
    });
  }

  /** Closes every proxied client with `code` (1012 on a Chromium restart or exit, from `pid` only if given). */
  closeAll(code: number, reason: string, pid?: number): void {
    for (const pair of [...this.live]) {
      if (pid !== undefined && pair.pid !== pid) continue;
      this.live.delete(pair);
      pair.closedBy = 'daemon';
      pair.client.close(code, reason);
      pair.upstream.terminate();
    }
  }

  /** Refuses new connections and closes the live ones with 1001. Idempotent. */
  close(): void {
    this.closed = true;
    this.closeAll(CLOSE_GOING_AWAY, 'browserd is stopping');
  }

  /** Cuts every connection now. Idempotent. */
  destroy(): void {
    this.closed = true;
    for (const pair of this.live) {
      pair.client.terminate();
      pair.upstream.terminate();
    }
    this.live.clear();
  }

  private async connect(ctx: UpgradeContext): Promise<void> {
    const { req, socket, head, reqId, log } = ctx;
    const bad = handshakeProblem(req);
    if (bad !== null) return this.refuse(ctx, new InvalidRequestError(bad));
    if (this.closed) return this.refuse(ctx, new BrowserUnavailableError('browserd is stopping'));
    // A restart may begin at any point of the set-up: Chromium may have died a moment before the
    // supervisor saw its exit (the upstream is refused), or be replaced while the upstream
    // handshake runs (the endpoint is no longer current). Either way the client waits for the next
    // ready endpoint, until the deadline; it is never refused only because a restart runs.
    const deadline = Date.now() + CDP_READY_WAIT_MS;
    if (this.deps.currentPid() === null) log.debug({ event: 'cdp_wait', reason: this.deps.notReadyReason() }, 'CDP client waits for Chromium');
    let endpoint: DevToolsEndpoint;
    let upstream: WebSocket;
    for (;;) {
      endpoint = await this.deps.waitEndpoint(Math.max(1, deadline - Date.now()));
      if (socket.destroyed) return;
      try {
        upstream = await this.openUpstream(endpoint);
      } catch (err) {
        log.warn({ event: 'cdp_upstream_failed', pid: endpoint.pid, err: (err as Error).message }, 'cannot reach Chromium DevTools');
        if (Date.now() + UPSTREAM_RETRY_MS >= deadline || socket.destroyed || this.closed) {
          return this.refuse(ctx, new BrowserUnavailableError(`cannot reach Chromium's DevTools endpoint: ${(err as Error).message}`));
        }
        await sleep(UPSTREAM_RETRY_MS);
        continue;
      }
      upstream.removeAllListeners();
      upstream.on('error', () => {}); // until pair() attaches its own
      if (socket.destroyed || this.closed) {
        upstream.terminate();
        return this.refuse(ctx, new BrowserUnavailableError('browserd is stopping'));
      }
      if (this.deps.currentPid() === endpoint.pid) break;
      upstream.terminate();
      log.debug({ event: 'cdp_wait', pid: endpoint.pid, reason: 'Chromium restarted while the connection was set up' }, 'CDP client waits for the next Chromium');
      if (Date.now() >= deadline) {
        return this.refuse(ctx, new BrowserUnavailableError(`Chromium restarted while the connection was set up and was not ready again within ${CDP_READY_WAIT_MS} ms`));
      }
    }
    this.wss.handleUpgrade(req, socket, head, (client) => this.pair(client, upstream, endpoint.pid, log));
  }

  private async openUpstream(endpoint: DevToolsEndpoint): Promise<WebSocket> {
    const upstream = new WebSocket(endpoint.browserWsUrl, {
      perMessageDeflate: false,
      maxPayload: this.deps.maxMessageBytes,
      handshakeTimeout: UPSTREAM_HANDSHAKE_MS,
    });
    try {
      await new Promise<void>((resolve, reject) => {
        upstream.once('open', resolve);
        upstream.once('error', reject);
        upstream.once('close', () => reject(new Error('closed during the handshake')));
      });
      return upstream;
    } catch (err) {
      upstream.terminate();
      throw err;
    }
  }

  private pair(client: WebSocket, upstream: WebSocket, pid: number, log: Logger): void {
    const pair: Pair = { client, upstream, pid, upstreamTooBig: false, closedBy: null };
    this.live.add(pair);
    log.info({ event: 'cdp_connected', pid, connections: this.live.size }, 'CDP client connected');
    forward(client, upstream);
    forward(upstream, client);
    client.on('error', (err) => log.debug({ event: 'cdp_client_error', err: err.message }, 'CDP client socket error'));
    upstream.on('error', (err) => {
      if ((err as { code?: string }).code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH') pair.upstreamTooBig = true;
      log.debug({ event: 'cdp_upstream_error', pid, err: err.message }, 'CDP upstream socket error');
    });
    client.on('close', (code) => {
      this.live.delete(pair);
      pair.closedBy ??= 'client';
      log.info({ event: 'cdp_closed', pid, code, by: pair.closedBy }, 'CDP connection closed');
      if (upstream.readyState === WebSocket.OPEN) upstream.close(1000);
      else upstream.terminate();
    });
    upstream.on('close', (code) => {
      if (!this.live.delete(pair)) return; // closed from the other side already
      pair.closedBy = 'chromium';
      log.debug({ event: 'cdp_upstream_closed', pid, code }, 'Chromium closed the CDP connection');
      if (client.readyState !== WebSocket.OPEN) return;
      if (pair.upstreamTooBig) client.close(CLOSE_TOO_BIG, `a message from Chromium is over ${this.deps.maxMessageBytes} bytes`);
      else client.close(CLOSE_SERVICE_RESTART, 'Chromium went away; reconnect to the same URL');
    });
  }

  private refuse(ctx: UpgradeContext, err: BrowserdError): void {
    ctx.refuse(err);
  }
}

/** The part of a ws WebSocket that forward() uses. */
export interface RelaySocket {
  readonly readyState: number;
  readonly bufferedAmount: number;
  readonly isPaused: boolean;
  on(event: 'message', listener: (data: RawData, isBinary: boolean) => void): unknown;
  send(data: RawData, opts: { binary: boolean }, cb: (err?: Error) => void): void;
  pause(): void;
  resume(): void;
}

/** Relays messages from `from` to `to`, pausing `from` while `to` has too much unsent. */
export function forward(from: RelaySocket, to: RelaySocket): void {
  from.on('message', (data: RawData, isBinary: boolean) => {
    if (to.readyState !== WebSocket.OPEN) return;
    to.send(data, { binary: isBinary }, () => {
      if (from.isPaused && to.bufferedAmount < LOW_WATER_BYTES) from.resume();
    });
    if (to.bufferedAmount > HIGH_WATER_BYTES && !from.isPaused) from.pause();
  });
}

/** A reason the request is not a usable WebSocket handshake, or null. */
function handshakeProblem(req: IncomingMessage): string | null {
  if ((req.headers.upgrade ?? '').toLowerCase() !== 'websocket') return 'the Upgrade header must be "websocket"';
  const key = req.headers['sec-websocket-key'];
  if (typeof key !== 'string' || !/^[A-Za-z0-9+/]{22}==$/.test(key)) return 'Sec-WebSocket-Key is missing or malformed';
  if (req.headers['sec-websocket-version'] !== '13') return 'Sec-WebSocket-Version must be 13';
  return null;
}
