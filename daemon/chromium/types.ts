// The public face of the Chromium module: what main, the other modules and the systemd
// integration may use. Everything else in daemon/chromium/ is private to it.
import type { CdpClient } from '../cdp/client.js';
import type { CdpBridge, ReadyMux } from '../cdp/bridge.js';
import type { Deadline } from '../core/deadline.js';
import type { ZodType } from 'zod';
import type { Scope } from '../http/auth.js';
import type { RequestContext, Route } from '../http/router.js';
import type { Module } from '../module.js';
import type { BrowserPlug } from './plugs.js';

export type BrowserState = 'starting' | 'ready' | 'restarting' | 'failed' | 'stopped';

export interface LastExit {
  code: number | null;
  signal: string | null;
  at: string; // ISO time
  reason: string; // e.g. "crash", "restart requested", "stopped"
}

export interface BrowserSnapshot {
  id: string;
  /** The SDK's name for `id`. */
  session_id: string;
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
  /** The SDK's name for `cdp_url`. */
  cdp_ws_url: string;
  /** BiDi is not served: always "". */
  webdriver_ws_url: string;
  /** When this daemon started serving the session (ISO time). */
  created_at: string;
  headless: boolean;
  stealth: boolean;
  /** No inactivity timeout on the VM: 0. */
  timeout_seconds: number;
  extensions: unknown[];
  /** The size every tab renders at (BROWSERD_VIEWPORT until PATCH /browsers/{id} changes it). */
  viewport: { width: number; height: number; refresh_rate?: number };
  [extra: string]: unknown;
}

/** What the extensions module contributes to every launch. */
export interface LaunchExtras {
  /** Absolute paths of unpacked extensions, passed as --load-extension. */
  extensionPaths: string[];
  /** true when policy force-installs need Chromium's background networking (component updater). */
  allowBackgroundNetworking: boolean;
  /** The browser module's own settings (the viewport, flags set through the API, a start URL); set by createBrowser. */
  settings?: LaunchSettings;
}

/** What the browser's configuration (PATCH /browsers/{id}, …/chromium/flags, …/configure) adds to a launch. */
export interface LaunchSettings {
  viewport: { width: number; height: number };
  /** Flags set through the API (checked: never one the daemon owns); after BROWSERD_CHROMIUM_FLAGS. */
  flags: readonly string[];
  /** The page Chromium opens at start instead of about:blank (configure's start_url), or null. */
  startUrl: string | null;
}

/** Work after a stop (a plug's stopWork); `orderly`: Chromium exited on Browser.close (its stores flushed), not by a signal. */
export type StopWork = (stop: { orderly: boolean }) => Promise<void>;

export interface RestartResult {
  pid: number;
  /** ms from spawn until ready. */
  readyMs: number;
}

export interface Browser extends Module {
  readonly routes: Route[];
  /** Begin launching (returns at once). */
  launch(): void;
  /** null when ready, else why not (the 503 message of /readyz). */
  notReadyReason(): string | null;
  /** Throws BrowserUnavailableError unless ready, saying the state and why (retryable while it starts or restarts). */
  ensureReady(): void;
  snapshot(): BrowserSnapshot;
  /**
   * Waits for the ready Chromium (within the deadline; not from inside withLock unless the
   * browser is ready), opens a CDP client on its own browser-level session, runs `fn`, closes it.
   * Rejects with BrowserUnavailableError when Chromium is not ready in time.
   */
  withCdp<T>(fn: (cdp: CdpClient, pid: number) => Promise<T>, deadline: Deadline): Promise<T>;
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
  /**
   * A module's additions to the browser (plugs.ts): launch extras, stop work, the proxy port, the CDP
   * policy (slots: one owner each, a second claim throws SlotTakenError), and launch hooks, state
   * listeners, CDP client events, snapshot, PATCH and configure fields (lists). Call while the
   * modules are made, before the daemon starts.
   */
  use(plug: BrowserPlug): void;
  /** The CDP endpoint's bridge and the ready multiplexer, for another DevTools endpoint of the daemon (the WebDriver module's, for ChromeDriver). */
  readonly cdpAccess: { bridge: CdpBridge; waitMux(deadline: Deadline): Promise<ReadyMux> };
  /**
   * Module start: ends the Chromium processes an earlier run left on the profile (whatever
   * BROWSERD_BROWSER_AUTOSTART says) and restores the daemon's policy file. Never rejects.
   */
  start(): Promise<void>;
  /** Once the daemon listens: launches Chromium when BROWSERD_BROWSER_AUTOSTART is on. */
  serve(): void;
  /**
   * Closes live CDP connections (code 1001) and refuses new ones. Called before the HTTP server's
   * close: that waits for every connection, and upgraded sockets are not cut by its deadline.
   */
  beginShutdown(): void;
  /**
   * Graceful stop of the whole process tree (under the lock, waited for until the shutdown
   * deadline, BROWSERD_SHUTDOWN_TIMEOUT_MS after beginShutdown; past it the tree is killed), then a
   * sweep of the profile. Idempotent.
   */
  close(): Promise<void>;
  /** SIGKILL to the whole tree now, without waiting (the daemon's second signal). Idempotent. */
  destroy(): void;
}

/** A module's fields of PATCH /browsers/{id}. */
export interface BrowserUpdatePart {
  /** The body fields it owns, with their schemas (validation and the OpenAPI document): made on first use (a core/lazy.ts `lazy`). */
  fields: () => Record<string, ZodType>;
  /** A scope needed, besides browser:write, when one of its fields is present. */
  scope?: Scope;
  /** Refuses (throws) before anything applies: called for every part first. */
  check?(body: Record<string, unknown>, ctx: RequestContext): void;
  /** Applies its fields of the checked body (called when at least one of them is present). */
  apply(body: Record<string, unknown>, ctx: RequestContext): Promise<void>;
}

/** Every problem of a configure part, nothing changed: each line starts with the field. */
export interface ConfigureProblems {
  /** Fails validation (400 bad_request). */
  invalid: string[];
  /** Refers to something that does not exist (an extension, a profile): detail code not_found. */
  missing: string[];
}

/**
 * A module's field of POST /browsers/{id}/configure: checked with every other part before anything
 * changes, then staged under the lifecycle lock so that configure's one Chromium restart applies it.
 */
export interface ConfigurePart {
  /** The body field it owns. */
  field: string;
  /** The field's schema (validation and the OpenAPI document), made on first use (a core/lazy.ts `lazy`); its problems are listed like every other part's. */
  schema: () => ZodType;
  /** A scope needed, besides browser:configure, when the field is present. */
  scope?: Scope;
  /** Adds the problems of the parsed value (references that do not exist, for this caller). */
  check(value: unknown, ctx: RequestContext, problems: ConfigureProblems): void;
  /**
   * Under the lifecycle lock, before the restart: makes the restart apply the value. A throw here
   * changes nothing (the parts staged before are undone).
   */
  stage(value: unknown, ctx: RequestContext): Promise<StagedConfigure>;
}

/** A staged configure part, in the order: the restart, verify, then commit, or undo. */
export interface StagedConfigure {
  /** Once Chromium is ready after the restart: throws when the part is not in effect. */
  verify(): Promise<void>;
  /** Every part is in effect: drop what undo would have needed. */
  commit(): Promise<void>;
  /** The restart or a verification failed: put back what the part changed (a rollback restart follows). */
  undo(): Promise<void>;
}
