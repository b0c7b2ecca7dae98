// The public face of the Chromium module: what main, the extensions module and the systemd
// integration may use. Everything else in daemon/chromium/ is private to it.
import type { Route } from '../http/router.js';

export type BrowserState = 'starting' | 'ready' | 'restarting' | 'failed' | 'stopped';

export interface LastExit {
  code: number | null;
  signal: string | null;
  at: string; // ISO time
  reason: string; // e.g. "crash", "restart requested", "stopped"
}

export interface BrowserSnapshot {
  id: string;
  state: BrowserState;
  /** Why the browser is `failed` (or the last launch error), else null. */
  reason: string | null;
  chromium: {
    pid: number | null;
    version: string | null;
    started_at: string | null;
    restarts: number;
    last_exit: LastExit | null;
  };
  /** The stable, authenticated CDP URL of this daemon (ws://host:port/browsers/{id}/cdp). */
  cdp_url: string;
  extensions: unknown[];
}

/** What the extensions module contributes to every launch. */
export interface LaunchExtras {
  /** Absolute paths of unpacked extensions, passed as --load-extension. */
  extensionPaths: string[];
  /** true when policy force-installs need Chromium's background networking (component updater). */
  allowBackgroundNetworking: boolean;
}

export interface DevToolsEndpoint {
  /** ws://127.0.0.1:PORT/devtools/browser/UUID of the current Chromium. */
  browserWsUrl: string;
  port: number;
  pid: number;
}

export interface RestartResult {
  pid: number;
  /** ms from spawn until ready. */
  readyMs: number;
}

export interface Browser {
  readonly routes: Route[];
  /** Begin launching (returns at once). */
  start(): void;
  /** null when ready, else why not (the 503 message of /readyz). */
  notReadyReason(): string | null;
  snapshot(): BrowserSnapshot;
  /** Resolves with the endpoint once ready; BrowserUnavailableError after `timeoutMs`. */
  waitReady(timeoutMs: number): Promise<DevToolsEndpoint>;
  /**
   * The one lifecycle lock: restarts, extension installs and shutdown never overlap; waiters
   * queue in order. `wait: false` and the lock held → ConflictError('busy').
   */
  withLock<T>(name: string, fn: () => Promise<T>, opts?: { wait?: boolean; signal?: AbortSignal }): Promise<T>;
  /**
   * Restart now; only call while holding the lock (from inside withLock). Resolves once ready.
   * `reason` is a short word used as the metric label (`request`, `extensions`, `policy`); a
   * `failed` or `stopped` browser is started afresh. Rejects with BrowserUnavailableError.
   */
  restartLocked(reason: string): Promise<RestartResult>;
  /** Called at every launch for the extension paths and networking needs. */
  setLaunchExtras(provider: () => LaunchExtras): void;
  /** Supplies the `extensions` list of GET /browsers/{id}. */
  setExtensionsLister(lister: () => unknown[]): void;
  /** Every state change (for sd_notify STATUS= and READY=1). */
  onStateChange(listener: (state: BrowserState, snapshot: BrowserSnapshot) => void): void;
  /**
   * Ends the Chromium processes an earlier run left on the profile (a daemon killed with SIGKILL
   * leaves its Chromium running). Call once at start, before listening, whatever
   * BROWSERD_BROWSER_AUTOSTART says. Never rejects (a failure is logged).
   */
  sweep(): Promise<void>;
  /**
   * Graceful stop of the whole process tree (under the lock, waited for until the shutdown
   * deadline, BROWSERD_SHUTDOWN_TIMEOUT_MS after beginShutdown; past it the tree is killed), then a
   * sweep of the profile. Idempotent.
   */
  close(): Promise<void>;
  /**
   * Closes live CDP connections (code 1001) and refuses new ones. Call before the HTTP server's
   * close: that waits for every connection, and upgraded sockets are not cut by its deadline.
   */
  beginShutdown(): void;
  /** SIGKILL to the whole tree now, without waiting (the daemon's second signal). Idempotent. */
  destroy(): void;
  /** The address the HTTP server listens on (known after listen()), for `cdp_url`. */
  setPublicAddress(host: string, port: number): void;
}
