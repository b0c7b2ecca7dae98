// Waiting for a ready Chromium: what a CDP client or a route that needs the browser does while it
// starts or restarts. A failed or stopped browser is an answer at once, unless the caller asked to
// wait for a launch that holds or waits for the lifecycle lock (then that launch's outcome is the
// answer). The lock names of the launching operations live here, since the wait reads them.
import type { CdpMux } from '../../cdp/mux.js';
import type { Deadline } from '../../core/deadline.js';
import { BrowserUnavailableError } from '../../core/errors.js';
import type { BrowserVersion } from '../run.js';
import type { BrowserState } from '../types.js';
import type { LifecycleLock } from './lock.js';

/** Lock names of the operations that launch Chromium: a CDP client waits for them (waitMux). */
export const RESTART_OP = 'restart requested';
export const CLIENT_CLOSE_OP = 'client close';
const LAUNCH_OPS: ReadonlySet<string> = new Set(['start', 'crash restart', RESTART_OP, CLIENT_CLOSE_OP]);

export interface ReadyMux {
  mux: CdpMux;
  pid: number;
  version: BrowserVersion;
}

/** What the wait reads of the supervisor. */
export interface ReadySource {
  readonly lock: LifecycleLock;
  current(): ReadyMux | null;
  state(): BrowserState;
  closed(): boolean;
  notReadyReason(): string | null;
  onState(listener: (state: BrowserState) => void): () => void;
}

/**
 * The ready Chromium's multiplexer, waited for within `deadline`. Not for a caller holding the
 * lock (it would wait for itself).
 */
export function waitReady(src: ReadySource, deadline: Deadline, opts: { whileLaunchQueued?: boolean } = {}): Promise<ReadyMux> {
  const now = src.current();
  if (now !== null) return Promise.resolve(now);
  const settled = (s: BrowserState): boolean => s === 'failed' || s === 'stopped';
  // A launch that holds the lock and ends in failed/stopped has failed: only a queued one is waited for.
  const launchPending = (orHolding: boolean): boolean =>
    opts.whileLaunchQueued === true && !src.closed() && ((orHolding && LAUNCH_OPS.has(src.lock.heldBy ?? '')) || [...LAUNCH_OPS].some((op) => src.lock.isQueued(op)));
  const unavailable = (why: string | null): BrowserUnavailableError =>
    new BrowserUnavailableError(why ?? 'Chromium is not ready', { retryable: (src.state() === 'starting' || src.state() === 'restarting') && !src.closed() });
  if (settled(src.state()) && !launchPending(true)) return Promise.reject(unavailable(src.notReadyReason()));
  return new Promise((resolve, reject) => {
    const onAbort = (): void => {
      off();
      reject(unavailable(`Chromium did not become ready in time: ${src.notReadyReason()}`));
    };
    const off = src.onState((s) => {
      const ready = src.current();
      if (ready === null && (!settled(s) || launchPending(false))) return;
      deadline.signal.removeEventListener('abort', onAbort);
      off();
      if (ready !== null) resolve(ready);
      else reject(unavailable(src.notReadyReason()));
    });
    if (deadline.expired) return onAbort();
    deadline.signal.addEventListener('abort', onAbort, { once: true });
  });
}
