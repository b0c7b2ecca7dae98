// The Chromium supervisor: one Chromium at a time, the state machine
//   stopped → starting → ready → restarting → ready …, failed after a crash loop,
// crash restarts with exponential backoff, the last exit, and the one lifecycle lock through
// which every launch and stop goes (start, requested and crash restarts, extension installs,
// shutdown).
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import type { Metrics } from '../core/metrics.js';
import { BrowserUnavailableError } from '../core/errors.js';
import { CrashLoop } from './crash-loop.js';
import { explainLaunchFailure, blockingPolicy, stderrGist } from './diagnose.js';
import { chromiumEnv, chromiumFlags } from './flags.js';
import { ChromiumIdentity } from './identity.js';
import { describeExit, launch, LaunchError, type LaunchedProcess } from './launcher.js';
import { LifecycleLock } from './lock.js';
import { LineRateLimiter } from './output.js';
import { endLeftovers, ensureProfileDir, findProfileProcesses, removeStaleFiles } from './profile.js';
import { probeReady } from './readiness.js';
import type { BrowserState, DevToolsEndpoint, LastExit, LaunchExtras, RestartResult } from './types.js';

/** Chromium's own output forwarded to the log, at most this many lines a second. */
const STDERR_LINES_PER_SECOND = 50;
/** How long the crashpad handlers get to end on their own after the browser is gone. */
const CRASHPAD_EXIT_WAIT_MS = 3000;
const NO_EXTRAS: LaunchExtras = { extensionPaths: [], allowBackgroundNetworking: false };
/** The lock name of a requested restart (POST /browsers/{id}/restart). */
export const RESTART_OP = 'restart requested';
/** Lock operations that launch Chromium: a CDP client waits for them (waitReady's whileRestartQueued). */
const LAUNCH_OPS: ReadonlySet<string> = new Set(['start', 'crash restart', RESTART_OP]);
/** Where the executables a wrapper binary runs are kept (identity.ts), in the state dir. */
const EXECUTABLES_FILE = 'chromium-executables.json';

export interface SupervisorDeps {
  config: Config;
  log: Logger;
  metrics: Metrics;
  profileDir: string;
  /** Called when a Chromium stops being the current one (restart, crash, stop): close its CDP clients. */
  onRunEnded(pid: number): void;
}

interface Run {
  proc: LaunchedProcess;
  endpoint: DevToolsEndpoint | null;
  version: string | null;
  /** Stopped on purpose: its exit is not a crash. */
  intentional: boolean;
}

export interface SupervisorStatus {
  state: BrowserState;
  reason: string | null;
  pid: number | null;
  version: string | null;
  startedAt: string | null;
  restarts: number;
  lastExit: LastExit | null;
}

export class Supervisor {
  readonly lock = new LifecycleLock();
  private state: BrowserState = 'stopped';
  private reason: string | null = null;
  private run: Run | null = null;
  /** A crashed run's remaining tree being stopped; every launch waits for it. */
  private dying: Promise<void> | null = null;
  private restarts = 0;
  private lastExit: LastExit | null = null;
  private launchedOnce = false;
  private readonly crashes: CrashLoop;
  private backoffTimer: NodeJS.Timeout | null = null;
  private closed = false;
  private closing: Promise<void> | null = null;
  private readonly shutdown = new AbortController();
  private extras: () => LaunchExtras = () => NO_EXTRAS;
  private readonly listeners = new Set<(state: BrowserState) => void>();
  private readonly identity: ChromiumIdentity;

  constructor(private readonly deps: SupervisorDeps) {
    const c = deps.config.chromium;
    this.identity = new ChromiumIdentity(c.binary, path.join(deps.config.stateDir, EXECUTABLES_FILE), deps.log);
    this.crashes = new CrashLoop({ max: c.crashLoopMax, windowMs: c.crashLoopWindowMs, initialBackoffMs: c.backoffInitialMs, maxBackoffMs: c.backoffMaxMs });
  }

  status(): SupervisorStatus {
    const run = this.run;
    return {
      state: this.state,
      reason: this.reason,
      pid: run?.proc.pid ?? null,
      version: run?.version ?? null,
      startedAt: run?.proc.spawnedAt.toISOString() ?? null,
      restarts: this.restarts,
      lastExit: this.lastExit,
    };
  }

  /** The endpoint when ready, else null. */
  endpoint(): DevToolsEndpoint | null {
    return this.state === 'ready' ? (this.run?.endpoint ?? null) : null;
  }

  notReadyReason(): string | null {
    switch (this.state) {
      case 'ready':
        return null;
      case 'starting':
        return 'Chromium is starting';
      case 'restarting':
        return this.reason === null ? 'Chromium is restarting' : `Chromium is restarting after: ${this.reason}`;
      case 'failed':
        return `Chromium failed: ${this.reason ?? 'unknown reason'}; POST /browsers/{id}/restart starts it afresh`;
      case 'stopped':
        return this.closed ? 'browserd is stopping' : 'Chromium is not started (BROWSERD_BROWSER_AUTOSTART=false); POST /browsers/{id}/restart starts it';
    }
  }

  /** Every state change; returns the unsubscribe function. */
  onState(listener: (state: BrowserState) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  setLaunchExtras(provider: () => LaunchExtras): void {
    this.extras = provider;
  }

  start(): void {
    if (this.closed || this.state !== 'stopped') return;
    this.setState('starting', null);
    void this.lock
      .run('start', async () => {
        if (this.run === null && !this.closed && this.state === 'starting') await this.launchLocked(true, 'start');
      })
      .catch(() => {}); // a failed launch is already handled (crash restart or `failed`)
  }

  /**
   * Resolves with the endpoint once ready. A failed or stopped browser rejects at once, unless
   * `whileRestartQueued` (the CDP proxy) and a launch holds or waits for the lifecycle lock: then
   * it is waited for, and its outcome is the answer. Not for a caller holding the lock itself (it
   * would wait for an operation queued behind it).
   */
  waitReady(timeoutMs: number, opts: { whileRestartQueued?: boolean } = {}): Promise<DevToolsEndpoint> {
    const now = this.endpoint();
    if (now !== null) return Promise.resolve(now);
    const settled = (s: BrowserState): boolean => s === 'failed' || s === 'stopped';
    // A launch that holds the lock and ends in failed/stopped has failed: only a queued one is waited for.
    const launchPending = (orHolding: boolean): boolean =>
      opts.whileRestartQueued === true && !this.closed && ((orHolding && LAUNCH_OPS.has(this.lock.heldBy ?? '')) || [...LAUNCH_OPS].some((op) => this.lock.isQueued(op)));
    if (settled(this.state) && !launchPending(true)) return Promise.reject(new BrowserUnavailableError(this.notReadyReason() ?? undefined));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        off();
        reject(new BrowserUnavailableError(`Chromium did not become ready within ${timeoutMs} ms: ${this.notReadyReason()}`));
      }, timeoutMs);
      const off = this.onState((s) => {
        const ep = this.endpoint();
        if (ep === null && (!settled(s) || launchPending(false))) return;
        clearTimeout(timer);
        off();
        if (ep !== null) resolve(ep);
        else reject(new BrowserUnavailableError(this.notReadyReason() ?? undefined));
      });
    });
  }

  /** Restart now (stop, launch, wait ready); the caller holds the lock. A failed or stopped browser starts afresh. */
  async restartLocked(reason: string): Promise<RestartResult> {
    if (this.lock.heldBy === null) throw new Error('restartLocked needs the lifecycle lock: call it inside withLock');
    if (this.closed) throw new BrowserUnavailableError('browserd is stopping');
    this.cancelBackoff();
    const fresh = this.state === 'failed' || this.state === 'stopped';
    if (fresh) this.crashes.reset();
    this.deps.log.info({ event: 'chromium_restart', reason, backoff_ms: 0, fresh }, 'restarting Chromium');
    this.setState(fresh ? 'starting' : 'restarting', null);
    await this.stopRun(reason === 'request' ? 'restart requested' : `restart: ${reason}`);
    return this.launchLocked(fresh, metricReason(reason));
  }

  /**
   * Ends the Chromium processes an earlier run left on the profile (a daemon killed with SIGKILL
   * leaves its Chromium), under the lock. At daemon start, whether or not Chromium autostarts.
   * Never throws: a failure is logged, and the next launch tries again.
   */
  async sweep(): Promise<void> {
    const { profileDir, config, log } = this.deps;
    try {
      await this.lock.run('sweep', () => endLeftovers(profileDir, this.identity, config.chromium.stopGraceMs, log));
    } catch (err) {
      log.error({ event: 'chromium_sweep_failed', err }, 'Chromium processes left on the profile could not be ended');
    }
  }

  /**
   * Graceful stop of the whole tree under the lock, then a sweep of the profile; no launch after
   * it. The lock is waited for until `lockDeadline` (epoch ms): an operation holding it longer (an
   * extension install and its rollback) is not waited for; the tree is then killed at once
   * (SIGKILL) and the holder fails with browser_unavailable. Idempotent.
   */
  close(lockDeadline = Number.POSITIVE_INFINITY): Promise<void> {
    this.closing ??= (async () => {
      this.closed = true;
      this.cancelBackoff();
      this.shutdown.abort();
      const { log, profileDir, config } = this.deps;
      const waitMs = Math.max(0, lockDeadline - Date.now());
      const gaveUp = new AbortController();
      const timer = Number.isFinite(waitMs) ? setTimeout(() => gaveUp.abort(), waitMs) : undefined;
      let locked = false;
      try {
        await this.lock.run(
          'shutdown',
          async () => {
            locked = true;
            clearTimeout(timer);
            await this.stopRun('stopped');
            await endLeftovers(profileDir, this.identity, config.chromium.stopGraceMs, log);
          },
          { signal: gaveUp.signal },
        );
      } catch (err) {
        if (locked) throw err;
      } finally {
        clearTimeout(timer);
      }
      if (!locked) {
        log.warn({ event: 'chromium_stop_forced', held_by: this.lock.heldBy, waited_ms: waitMs }, 'the browser lifecycle lock is still held at the shutdown deadline: killing Chromium now');
        await this.stopRun('stopped', 0);
        await endLeftovers(profileDir, this.identity, 0, log);
      }
      this.setState('stopped', null);
      log.info({ event: 'chromium_stopped', forced: !locked }, 'Chromium stopped');
    })();
    return this.closing;
  }

  /** SIGKILL to the tree now, without waiting. Idempotent. */
  destroy(): void {
    this.closed = true;
    this.cancelBackoff();
    this.shutdown.abort();
    this.run?.proc.killNow();
    this.deps.metrics.chromiumReady.set(0);
  }

  /** Launches Chromium and waits until it is ready; the caller holds the lock. */
  private async launchLocked(fresh: boolean, metric: string): Promise<RestartResult> {
    const { config, log, metrics, profileDir } = this.deps;
    const c = config.chromium;
    if (this.closed) throw new BrowserUnavailableError('browserd is stopping');
    if (this.dying) {
      await this.dying;
      this.dying = null;
    }
    if (c.binary === null) return this.failAndThrow('no Chromium binary found (/usr/lib/chromium/chromium, or chromium, chromium-browser, google-chrome on PATH): install chromium or set BROWSERD_CHROMIUM');
    const policy = blockingPolicy(c.policyDir);
    if (policy !== null) return this.failAndThrow(policy);
    if (this.launchedOnce) {
      this.restarts++;
      metrics.chromiumRestarts.inc({ reason: metric });
    }
    this.launchedOnce = true;
    this.setState(fresh ? 'starting' : 'restarting', this.reason);
    let proc: LaunchedProcess | null = null;
    try {
      ensureProfileDir(profileDir);
      await endLeftovers(profileDir, this.identity, c.stopGraceMs, log);
      // A shutdown that gave up waiting for the lock may have swept the profile meanwhile.
      if (this.closed) throw new BrowserUnavailableError('browserd is stopping');
      removeStaleFiles(profileDir);
      const args = chromiumFlags({ profileDir, headless: c.headless, extraFlags: c.extraFlags, extras: this.extras(), isRoot: process.getuid?.() === 0 });
      const pidRef = { pid: 0 };
      const limiter = new LineRateLimiter(
        STDERR_LINES_PER_SECOND,
        (line) => log.debug({ event: 'chromium_stderr', pid: pidRef.pid, line }, 'chromium'),
        (n) => log.debug({ event: 'chromium_stderr', pid: pidRef.pid, dropped: n }, `${n} lines of Chromium output dropped (over ${STDERR_LINES_PER_SECOND}/s)`),
      );
      proc = await launch({ command: c.binary, args, env: chromiumEnv(process.env, profileDir), cwd: profileDir, onLine: (line) => limiter.push(line) });
      const started = proc;
      pidRef.pid = started.pid;
      const run: Run = { proc: started, endpoint: null, version: null, intentional: false };
      this.run = run;
      log.info({ event: 'chromium_launched', pid: started.pid, binary: c.binary, flags: args }, 'Chromium launched');
      void started.exited.then((exit) => {
        limiter.flush();
        log.info({ event: 'chromium_exited', pid: started.pid, code: exit.code, signal: exit.signal, expected: run.intentional }, 'Chromium exited');
        this.onExit(run);
      });
      const ready = await started.waitReady((signal) => probeReady(started, signal), {
        deadlineMs: c.readyTimeoutMs,
        graceMs: c.stopGraceMs,
        signal: this.shutdown.signal,
      });
      run.endpoint = { browserWsUrl: ready.browserWsUrl, port: ready.port, pid: started.pid };
      run.version = ready.version.product;
      await this.identity.learnFrom(started.pid);
      const readyMs = Date.now() - started.spawnedAt.getTime();
      log.info({ event: 'chromium_ready', pid: started.pid, ms: readyMs, version: run.version, port: ready.port }, 'Chromium is ready');
      metrics.chromiumReady.set(1);
      this.setState('ready', null);
      return { pid: started.pid, readyMs };
    } catch (err) {
      if (proc !== null && this.run?.proc === proc) this.run = null;
      const diag =
        err instanceof LaunchError
          ? explainLaunchFailure(err, { binary: c.binary, profileDir, policyDir: c.policyDir, readyTimeoutMs: c.readyTimeoutMs })
          : { message: (err as Error).message, permanent: false };
      const exit = proc?.exitInfo;
      if (exit) this.lastExit = { code: exit.code, signal: exit.signal, at: exit.at.toISOString(), reason: this.closed ? 'stopped' : 'launch failed' };
      log.warn({ event: 'chromium_launch_failed', pid: proc?.pid, reason: diag.message }, 'Chromium did not become ready');
      this.onCrash(diag.message, diag.permanent);
      throw new BrowserUnavailableError(`Chromium did not become ready: ${diag.message}`);
    }
  }

  /** The leader exited. A ready Chromium that we did not stop has crashed. */
  private onExit(run: Run): void {
    if (run !== this.run || run.intentional || run.endpoint === null) return; // stopped on purpose, or a failed launch
    const exit = run.proc.exitInfo;
    this.run = null;
    this.deps.metrics.chromiumReady.set(0);
    this.deps.onRunEnded(run.proc.pid);
    if (exit) this.lastExit = { code: exit.code, signal: exit.signal, at: exit.at.toISOString(), reason: 'crash' };
    const gist = stderrGist(run.proc.output.lines());
    const message = `Chromium exited unexpectedly ${exit ? describeExit(exit) : ''}${gist === '' ? '' : `; last stderr: ${gist}`}`;
    // The rest of the tree (zygotes, renderers) may still run: stop it before any new launch.
    this.dying = this.stopTree(run.proc).catch((err: unknown) => {
      this.deps.log.error({ event: 'chromium_stop_failed', pid: run.proc.pid, err }, 'the crashed Chromium tree did not stop');
    });
    this.onCrash(message, false);
  }

  /** A crash or failed launch: back off and restart, or `failed` on a crash loop or a permanent cause. */
  private onCrash(message: string, permanent: boolean): void {
    if (this.closed) return;
    if (permanent) return this.fail(message);
    const verdict = this.crashes.record();
    const c = this.deps.config.chromium;
    if (verdict.loop) {
      return this.fail(`crash loop: Chromium crashed or failed to start ${verdict.count} times within ${c.crashLoopWindowMs / 1000} s; the last time: ${message}`);
    }
    this.setState('restarting', message);
    this.deps.log.warn({ event: 'chromium_restart', reason: message, backoff_ms: verdict.backoffMs, crashes: verdict.count }, 'Chromium will be restarted');
    this.cancelBackoff();
    this.backoffTimer = setTimeout(() => {
      this.backoffTimer = null;
      void this.lock
        .run('crash restart', async () => {
          if (!this.closed && this.state === 'restarting' && this.run === null) await this.launchLocked(false, 'crash');
        })
        .catch(() => {}); // handled inside launchLocked
    }, verdict.backoffMs);
  }

  private fail(message: string): void {
    this.cancelBackoff();
    this.deps.metrics.chromiumReady.set(0);
    this.setState('failed', message);
    this.deps.log.error({ event: 'chromium_failed', reason: message }, 'Chromium failed');
  }

  private failAndThrow(message: string): never {
    this.fail(message);
    throw new BrowserUnavailableError(`Chromium cannot start: ${message}`);
  }

  /** Stops the current run on purpose and records its exit with `why`; `graceMs` 0 kills it at once. */
  private async stopRun(why: string, graceMs = this.deps.config.chromium.stopGraceMs): Promise<void> {
    const run = this.run;
    if (run !== null) {
      run.intentional = true;
      this.run = null;
      this.deps.metrics.chromiumReady.set(0);
      this.deps.onRunEnded(run.proc.pid);
      if (graceMs <= 0) run.proc.killNow();
      await this.stopTree(run.proc, graceMs);
      const e = run.proc.exitInfo;
      if (e) this.lastExit = { code: e.code, signal: e.signal, at: e.at.toISOString(), reason: why };
    }
    if (this.dying) {
      await this.dying;
      this.dying = null;
    }
  }

  /**
   * Stops the process group, then the processes of this run outside it (the crashpad handlers,
   * own session, parent 1): they end on their own soon after the browser; whatever Chromium
   * process still names the profile after CRASHPAD_EXIT_WAIT_MS is ended. No process of the old
   * tree remains; processes that only name the profile are neither waited for nor ended.
   */
  private async stopTree(proc: LaunchedProcess, graceMs = this.deps.config.chromium.stopGraceMs): Promise<void> {
    const { profileDir, log } = this.deps;
    await proc.stop(graceMs);
    const until = Date.now() + (graceMs > 0 ? CRASHPAD_EXIT_WAIT_MS : 0);
    while (findProfileProcesses(profileDir, this.identity).length > 0 && Date.now() < until) await sleep(25);
    await endLeftovers(profileDir, this.identity, graceMs, log);
  }

  private cancelBackoff(): void {
    if (this.backoffTimer !== null) clearTimeout(this.backoffTimer);
    this.backoffTimer = null;
  }

  private setState(state: BrowserState, reason: string | null): void {
    if (state === this.state && reason === this.reason) return;
    this.state = state;
    this.reason = reason;
    for (const l of [...this.listeners]) {
      try {
        l(state);
      } catch (err) {
        this.deps.log.error({ event: 'state_listener_error', err }, 'a browser state listener threw');
      }
    }
  }
}

/** A low-cardinality metric label from a restart reason ('request', 'extensions', 'policy', ...). */
function metricReason(reason: string): string {
  return /^[a-z_]{1,32}$/.test(reason) ? reason : 'other';
}
