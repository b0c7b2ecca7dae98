// The idle-request timeout: a request whose body stops arriving (no byte on its connection for
// BROWSERD_REQUEST_IDLE_TIMEOUT_MS while the daemon is ready to read) is ended, however long the
// whole request takes: a 4 GiB upload that keeps sending is never cut, a stalled one does not hold
// its handler, its spool file and its upload slot forever. Time the daemon itself does not read
// (its disk or a child is slow: the connection is paused by backpressure) never counts as idle.
// Node's own whole-request timeout (`requestTimeout`) is off in server.ts for that reason.
import type { IncomingMessage } from 'node:http';

/** How many times per timeout the connection's byte count is looked at (the precision: timeout/TICKS). */
const TICKS = 4;
/** The shortest look interval, whatever the timeout. */
const MIN_TICK_MS = 25;

/**
 * Calls `onIdle` once when no byte of `req` arrives for `idleMs` while its body is still coming;
 * stops by itself once the body is complete or the request is gone. Returns the stop function.
 */
export function watchRequestIdle(req: IncomingMessage, idleMs: number, onIdle: () => void): () => void {
  const socket = req.socket;
  const tickMs = Math.max(MIN_TICK_MS, Math.floor(idleMs / TICKS));
  let seen = socket.bytesRead;
  let quietSince = Date.now();
  let lastTick = quietSince;
  const timer = setInterval(() => {
    if (req.complete || req.destroyed || socket.destroyed) return stop();
    const now = Date.now();
    // A tick this late means the daemon's own event loop was stalled: the bytes that came meanwhile
    // are not read yet, so the quiet time is unknown and starts again.
    const stalled = now - lastTick > 2 * tickMs;
    lastTick = now;
    // bytesRead counts what the connection received, whoever reads it (the HTTP parser consumes the socket natively).
    if (stalled || socket.bytesRead !== seen || socket.isPaused()) {
      seen = socket.bytesRead;
      quietSince = now;
      return;
    }
    if (now - quietSince < idleMs) return;
    stop();
    onIdle();
  }, tickMs);
  timer.unref();
  const stop = (): void => {
    clearInterval(timer);
    req.off('end', stop);
    req.off('close', stop);
  };
  req.once('end', stop);
  req.once('close', stop);
  return stop;
}
