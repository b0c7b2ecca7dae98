// How the API server's connections end. It holds every connection (a keep-alive one waits
// KEEP_ALIVE_MS for its next request), the requests in flight (their shutdown signal) and the sockets
// handed to upgrade routes. close() is graceful within a deadline: requests' signals are aborted, an
// answer still to come says `Connection: close`, and every connection not carrying an answer is ended
// by the daemon itself, so nothing waits out keep-alive. What is still open at the deadline is cut and
// logged (`http_close_forced`). destroy() cuts everything at once.
import type { Server, IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from '../core/log.js';
import type { LazyAbort } from './lazy-abort.js';

/**
 * How long a keep-alive connection may wait for its next request (docs/operations.md). Longer than
 * any client keeps an idle connection (undici and Node's agent follow the `Keep-Alive: timeout=` hint;
 * Go's transport keeps one 90 s): the client always closes first, so a request is never sent on a
 * connection the daemon is closing at that moment (which the client sees as "other side closed",
 * with no answer and no safe retry for a POST).
 */
export const KEEP_ALIVE_MS = 120_000;

/** A request in flight, as shutdown sees it. */
interface LiveRequest {
  res: ServerResponse;
  abort: LazyAbort;
}

export class Drain {
  private stopping = false;
  /** Requests whose response has not closed: shutdown aborts their signal. */
  private readonly live = new Set<LiveRequest>();
  /** Every open connection (close() ends those that never sent a byte: Node's closeIdleConnections leaves them). */
  private readonly sockets = new Set<Socket>();
  /** Sockets handed to upgrade routes: server.close() would wait for them forever. */
  private readonly upgrades = new Set<Duplex>();
  private closing: Promise<void> | null = null;

  constructor(
    private readonly server: Server,
    private readonly log: Logger,
  ) {
    server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
  }

  /** A request begins; `abort` is aborted at shutdown. Returns what to call once its response has closed. */
  request(req: IncomingMessage, res: ServerResponse, abort: LazyAbort): () => void {
    const socket = req.socket;
    // During shutdown no connection is kept for another request.
    if (this.stopping) res.setHeader('connection', 'close');
    const live: LiveRequest = { res, abort };
    this.live.add(live);
    return () => {
      this.live.delete(live);
      // An answer that ended during shutdown: its headers went out before it and said keep-alive.
      if (this.stopping && !socket.destroyed) socket.end();
    };
  }

  /** A socket now owned by an upgrade route (a WebSocket). */
  upgraded(socket: Duplex): void {
    this.upgrades.add(socket);
    socket.once('close', () => this.upgrades.delete(socket));
  }

  /** Graceful: stop accepting, end streams, let requests in flight finish within `deadlineMs`. Idempotent. */
  close(deadlineMs: number): Promise<void> {
    this.closing ??= new Promise<void>((resolve) => {
      this.stopRequests();
      const timer = setTimeout(() => {
        this.log.warn(
          { event: 'http_close_forced', connections: this.sockets.size, upgraded: this.upgrades.size, deadline_ms: deadlineMs },
          'connections still open at the shutdown deadline are cut',
        );
        this.server.closeAllConnections();
        for (const socket of this.upgrades) socket.destroy();
      }, deadlineMs);
      this.server.close(() => {
        clearTimeout(timer);
        resolve();
      });
      this.server.closeIdleConnections();
      // A connection that has sent nothing yet is idle too (no request is lost), but Node waits for its headers.
      for (const socket of this.sockets) if (socket.bytesRead === 0) socket.destroy();
    });
    return this.closing;
  }

  /** Now: every connection is cut. Idempotent. */
  destroy(): void {
    this.stopRequests();
    this.server.close();
    this.server.closeAllConnections();
    for (const socket of this.upgrades) socket.destroy();
  }

  /** Shutdown: the signal of every request in flight is aborted; a reply still to come closes its connection. */
  private stopRequests(): void {
    if (this.stopping) return;
    this.stopping = true;
    for (const { res, abort } of this.live) {
      if (!res.headersSent) res.setHeader('connection', 'close');
      abort.abort();
    }
  }
}
