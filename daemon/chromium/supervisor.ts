// The Chromium supervisor: one Chromium at a time, the state machine
//   stopped → starting → ready → restarting → ready …, failed after a crash loop,
// crash restarts with exponential backoff, the last exit, and the one lifecycle lock through
// which every launch and stop goes (start, requested, client and crash restarts, extension
// installs, shutdown). A run (run.ts) is one Chromium with its DevTools pipe and multiplexer; a
// caller waits for a ready one through state/wait.ts.
import path from 'node:path';
import { Deadline } from '../core/deadline.js';
import { BrowserUnavailableError } from '../core/errors.js';
import type { Channel, ChannelEnd } from '../cdp/channel.js';
import type { CdpClient } from '../cdp/client.js';
import { MalformedReporter } from '../cdp/malformed.js';
import { CrashLoop } from './state/crash-loop.js';
import { explainLaunchFailure, blockingPolicy, stderrGist } from './launch/diagnose.js';
import { ChromiumIdentity } from './sweep/identity.js';
import { describeExit, LaunchError } from './launch/launcher.js';
import { LifecycleLock } from './state/lock.js';
import { metricReason, notReadyReason } from './state/reasons.js';
import { CLIENT_CLOSE_OP, waitReady, type ReadyMux, type ReadySource } from './state/wait.js';
import type { OldRunSweep } from './sweep/old-run.js';
import { endLeftovers } from './sweep/profile.js';
import { ChromiumRun, emptyDir } from './run.js';
import type { SupervisorDeps, SupervisorPlugs, SupervisorStatus } from './state/deps.js';
import type { BrowserState, LastExit, LaunchExtras, RestartResult, StopWork } from './types.js';

export type { SupervisorDeps, SupervisorPlugs, SupervisorStatus };

export { RESTART_OP } from './state/wait.js';

const NO_EXTRAS: LaunchExtras = { extensionPaths: [], allowBackgroundNetworking: false };
/** Where the executables a wrapper binary runs are kept (identity.ts), in the state dir. */
const EXECUTABLES_FILE = 'chromium-executables.json';

export class Supervisor {
  readonly lock = new LifecycleLock();
  private state: BrowserState = 'stopped';
  private reason: string | null = null;
  private run: ChromiumRun | null = null;
  /** A crashed run's remaining tree being stopped; every launch waits for it. */
  private dying: Promise<void> | null = null;
  /** The sweeps of restarted runs' leftovers, in the background (OldRunSweep); a shutdown awaits them. */
  private sweeping: Promise<void> = Promise.resolve();
  private restarts = 0;
  private lastExit: LastExit | null = null;
  private launchedOnce = false;
  private readonly crashes: CrashLoop;
  private backoffTimer: NodeJS.Timeout | null = null;
  private closed = false;
  private closing: Promise<void> | null = null;
  private readonly shutdown = new AbortController();
  private readonly plugs: SupervisorPlugs;
  private readonly listeners = new Set<(state: BrowserState) => void>();
  private readonly readyHooks: ((run: ChromiumRun) => Promise<void>)[] = [];
  private readonly identity: ChromiumIdentity;
  /** Malformed DevTools messages of every run: counted, and logged at a bounded rate. */
  private readonly malformed: MalformedReporter;

  constructor(private readonly deps: SupervisorDeps) {
    const c = deps.config.chromium;
    this.identity = new ChromiumIdentity(c.binary, path.join(deps.config.stateDir, EXECUTABLES_FILE), deps.log);
    this.malformed = new MalformedReporter(deps.log, deps.metrics.cdpMalformed);
    this.plugs = deps.plugs ?? { launchExtras: () => NO_EXTRAS, stopWork: () => null, proxyPort: () => null, cdpPolicy: () => undefined };
    this.crashes = new CrashLoop({ max: c.crashLoopMax, windowMs: c.crashLoopWindowMs, initialBackoffMs: c.backoffInitialMs, maxBackoffMs: c.backoffMaxMs });
  }

  status(): SupervisorStatus {
    const run = this.run;
    return {
      state: this.state,
      reason: this.reason,
      pid: run?.pid ?? null,
      version: run?.version?.product ?? null,
      startedAt: run?.proc.spawnedAt.toISOString() ?? null,
      restarts: this.restarts,
      lastExit: this.lastExit,
    };
  }

  /** The ready run's multiplexer, pid and version; null when not ready. */
  current(): ReadyMux | null {
    const run = this.run;
    return this.state === 'ready' && run !== null && run.version !== null && !run.mux.isClosed ? { mux: run.mux, pid: run.pid, version: run.version } : null;
  }

  /** The browser module's own session of the ready run (ChromiumRun.cdp), else null. */
  runCdp(): CdpClient | null {
    return this.current() === null ? null : (this.run?.cdp ?? null);
  }

  notReadyReason(): string | null {
    return notReadyReason(this.state, this.reason, this.closed);
  }

  /** Every state change; returns the unsubscribe function. */
  onState(listener: (state: BrowserState) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Runs at every launch once Chromium answers, before it counts as ready (download behaviour, the proxy's auth...). */
  onReady(hook: (run: ChromiumRun) => Promise<void>): void {
    this.readyHooks.push(hook);
  }

  /** Browser.close to the current run, for a stop whose profile is saved after it (ChromiumRun.closeOrderly). */
  private async closeOrderly(): Promise<boolean> {
    const run = this.run;
    if (run === null) return true;
    run.intentional = true; // its exit is not a crash
    const t0 = performance.now();
    const exited = await run.closeOrderly(this.deps.config.chromium.stopGraceMs);
    this.deps.log.info({ event: 'chromium_closed_orderly', chromium_pid: run.pid, exited, ms: Math.round(performance.now() - t0) }, exited ? 'Chromium closed on Browser.close' : 'Chromium did not exit on Browser.close in time: stopping it with signals');
    return exited;
  }

  private async runStopHook(work: StopWork | null, orderly: boolean): Promise<void> {
    if (work === null) return;
    try {
      await work({ orderly });
    } catch (err) {
      this.deps.log.error({ event: 'stop_hook_failed', err }, 'the work after a browser stop failed');
    }
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
   * The ready Chromium's multiplexer, waited for within `deadline` (state/wait.ts). A failed or
   * stopped browser is refused at once unless `whileLaunchQueued` and a launch holds or waits for
   * the lifecycle lock. Not for a caller holding the lock (it would wait for itself).
   */
  waitMux(deadline: Deadline, opts: { whileLaunchQueued?: boolean } = {}): Promise<ReadyMux> {
    const src: ReadySource = {
      lock: this.lock,
      current: () => this.current(),
      state: () => this.state,
      closed: () => this.closed,
      notReadyReason: () => this.notReadyReason(),
      onState: (listener) => this.onState(listener),
    };
    return waitReady(src, deadline, opts);
  }

  /** Restart now (stop, launch, wait ready); the caller holds the lock. A failed or stopped browser starts afresh. */
  async restartLocked(reason: string): Promise<RestartResult> {
    if (this.lock.heldBy === null) throw new Error('restartLocked needs the lifecycle lock: call it inside withLock');
    if (this.closed) throw new BrowserUnavailableError('browserd is stopping', { retryable: false });
    this.cancelBackoff();
    const fresh = this.state === 'failed' || this.state === 'stopped';
    if (fresh) this.crashes.reset();
    this.deps.log.info({ event: 'chromium_restart', reason, backoff_ms: 0, fresh }, 'restarting Chromium');
    this.setState(fresh ? 'starting' : 'restarting', null);
    const after = this.plugs.stopWork();
    const orderly = after !== null ? await this.closeOrderly() : false;
    const old = await this.stopRun(reason === 'request' ? 'restart requested' : `restart: ${reason}`, { code: 'restart', message: 'Chromium restarted' }, undefined, after === null);
    if (after !== null) {
      await endLeftovers(this.deps.profileDir, this.identity, this.deps.config.chromium.stopGraceMs, this.deps.log);
      await this.runStopHook(after, orderly);
    }
    try {
      return await this.launchLocked(fresh, metricReason(reason), old);
    } finally {
      old?.start(null); // nothing launched: everything on the profile is old (a no-op once started)
    }
  }

  /**
   * Ends the Chromium processes an earlier run left on the profile, under the lock: at daemon
   * start, before the daemon serves (its reads of /proc may hold the event loop: SweepOptions),
   * whether or not Chromium autostarts. Never throws: a failure is logged, the next launch tries again.
   */
  async sweep(): Promise<void> {
    const { profileDir, config, log } = this.deps;
    try {
      await this.lock.run('sweep', async () => {
        await endLeftovers(profileDir, this.identity, config.chromium.stopGraceMs, log, { beforeServing: true });
        await emptyDir(this.deps.tmpDir);
      });
    } catch (err) {
      log.error({ event: 'chromium_sweep_failed', err }, 'Chromium processes left on the profile could not be ended');
    }
  }

  /** Ends every CDP client of the current run (shutdown: 1001), without touching Chromium. */
  endClients(end: ChannelEnd): void {
    this.run?.mux.closeAll(end);
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
      const gaveUp = Deadline.at(lockDeadline, 'waiting for the browser lifecycle lock');
      let locked = false;
      const stopping: ChannelEnd = { code: 'stopping', message: 'browserd is stopping' };
      try {
        await this.lock.run(
          'shutdown',
          async () => {
            locked = true;
            gaveUp.dispose();
            const after = this.plugs.stopWork();
            const orderly = after !== null ? await this.closeOrderly() : false;
            await this.stopRun('stopped', stopping);
            await endLeftovers(profileDir, this.identity, config.chromium.stopGraceMs, log);
            await this.runStopHook(after, orderly);
          },
          { signal: gaveUp.signal },
        );
      } catch (err) {
        if (locked) throw err;
      } finally {
        gaveUp.dispose();
      }
      if (!locked) {
        log.warn({ event: 'chromium_stop_forced', held_by: this.lock.heldBy }, 'the browser lifecycle lock is still held at the shutdown deadline: killing Chromium now');
        await this.stopRun('stopped', stopping, 0);
        await endLeftovers(profileDir, this.identity, 0, log);
      }
      await emptyDir(this.deps.tmpDir);
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

  /** A CDP client sent Browser.close: a fresh Chromium, not counted as a crash. */
  private onBrowserClose(_channel: Channel): void {
    if (this.closed || this.lock.isQueued(CLIENT_CLOSE_OP)) return; // one queued is enough for every close sent meanwhile
    this.deps.log.info({ event: 'chromium_client_close' }, 'a CDP client sent Browser.close: restarting Chromium');
    void this.lock.run(CLIENT_CLOSE_OP, () => this.restartLocked('client_close')).catch(() => {}); // a failed launch is handled inside
  }

  /** Launches Chromium and waits until it is ready; the caller holds the lock. */
  private async launchLocked(fresh: boolean, metric: string, old: OldRunSweep | null = null): Promise<RestartResult> {
    const { config, log, metrics, profileDir } = this.deps;
    const c = config.chromium;
    if (this.closed) throw new BrowserUnavailableError('browserd is stopping', { retryable: false });
    if (this.dying) {
      await this.dying;
      this.dying = null;
    }
    await this.plugs.beforeLaunch?.();
    if (c.binary === null) return this.failAndThrow('no Chromium binary found (/usr/lib/chromium/chromium, or chromium, chromium-browser, google-chrome on PATH): install chromium or set BROWSERD_CHROMIUM');
    const policy = blockingPolicy(c.policyDir);
    if (policy !== null) return this.failAndThrow(policy);
    if (this.launchedOnce) {
      this.restarts++;
      metrics.chromiumRestarts.inc({ reason: metric });
    }
    this.launchedOnce = true;
    this.setState(fresh ? 'starting' : 'restarting', this.reason);
    const deadline = Deadline.in(c.readyTimeoutMs, `${c.readyTimeoutMs} ms`, this.shutdown.signal);
    let run: ChromiumRun | null = null;
    try {
      run = await ChromiumRun.launch(
        {
          config,
          log,
          profileDir,
          tmpDir: this.deps.tmpDir,
          identity: this.identity,
          onBrowserClose: (ch) => this.onBrowserClose(ch),
          malformed: this.malformed,
          onLine: this.deps.onChromiumLine,
          proxyPort: () => this.plugs.proxyPort(),
          cdpPolicy: this.plugs.cdpPolicy(),
        },
        this.plugs.launchExtras(),
        { oldRunSwept: old !== null },
      );
      old?.start(run.startTicks);
      // A shutdown that gave up waiting for the lock may have begun meanwhile.
      if (this.closed) throw new BrowserUnavailableError('browserd is stopping', { retryable: false });
      const started = run;
      this.run = started;
      void started.proc.exited.then((exit) => {
        log.info({ event: 'chromium_exited', chromium_pid: started.pid, code: exit.code, signal: exit.signal, expected: started.intentional }, 'Chromium exited');
        this.onExit(started);
      });
      // Readiness is the probe, then the ready hooks and learning the run's executables, all in one
      // race against the leader's exit (run.waitReady): an exit in any of them fails this launch.
      let answered = 0;
      let hooked = 0;
      const version = await started.waitReady(deadline, async () => {
        answered = Date.now();
        for (const hook of this.readyHooks) await deadline.race(hook(started));
        hooked = Date.now();
        await this.identity.learnFrom(started.pid);
      });
      // The last check before `ready`, with no await after it: still the current run, still alive
      // (an exit between the race and here is this launch's failure too; onExit ignores the run
      // until it is announced).
      const exit = started.proc.exitInfo;
      if (exit !== null) throw new LaunchError(`exited ${describeExit(exit)} before it was ready`, 'exit', started.proc.output.lines(), { exit });
      if (this.run !== started) throw new BrowserUnavailableError('the launch was superseded', { retryable: true });
      const readyMs = Date.now() - started.proc.spawnedAt.getTime();
      const phases = { probe_ms: answered - started.proc.spawnedAt.getTime(), hooks_ms: hooked - answered, learn_ms: Date.now() - hooked };
      log.info({ event: 'chromium_ready', chromium_pid: started.pid, ms: readyMs, ...phases, version: version.product }, 'Chromium is ready');
      started.announced = true;
      metrics.chromiumReady.set(1);
      this.setState('ready', null);
      return { pid: started.pid, readyMs };
    } catch (err) {
      if (run !== null && this.run === run) this.run = null;
      // Even when the leader has exited, the rest of its tree (zygotes, renderers) may still run;
      // a run stopped on purpose meanwhile (a forced shutdown) is its stopper's to end.
      if (run !== null && !run.intentional) await run.stop(c.stopGraceMs, { code: 'browser_gone', message: 'Chromium did not become ready' }).catch(() => undefined);
      const diag =
        err instanceof LaunchError
          ? explainLaunchFailure(err, { binary: c.binary, profileDir, policyDir: c.policyDir, readyTimeoutMs: c.readyTimeoutMs })
          : { message: (err as Error).message, permanent: false };
      const exit = run?.proc.exitInfo;
      if (exit) this.lastExit = { code: exit.code, signal: exit.signal, at: exit.at.toISOString(), reason: this.closed ? 'stopped' : 'launch failed' };
      log.warn({ event: 'chromium_launch_failed', chromium_pid: run?.pid, reason: diag.message }, 'Chromium did not become ready');
      this.onCrash(diag.message, diag.permanent);
      throw new BrowserUnavailableError(`Chromium did not become ready: ${diag.message}`, { retryable: !diag.permanent && !this.closed });
    } finally {
      deadline.dispose();
    }
  }

  /**
   * The leader exited. A Chromium announced ready that we did not stop has crashed; an exit before
   * the announcement is the launch's own failure (launchLocked counts it, once).
   */
  private onExit(run: ChromiumRun): void {
    if (run !== this.run || run.intentional || !run.announced) return; // stopped on purpose, or a launch that fails
    const exit = run.proc.exitInfo;
    this.run = null;
    this.deps.metrics.chromiumReady.set(0);
    if (exit) this.lastExit = { code: exit.code, signal: exit.signal, at: exit.at.toISOString(), reason: 'crash' };
    const gist = stderrGist(run.proc.output.lines());
    const message = `Chromium exited unexpectedly ${exit ? describeExit(exit) : ''}${gist === '' ? '' : `; last stderr: ${gist}`}`;
    // The rest of the tree (zygotes, renderers) may still run: stop it before any new launch.
    this.dying = run.stop(this.deps.config.chromium.stopGraceMs, { code: 'browser_gone', message: 'Chromium exited' }).catch((err: unknown) => {
      this.deps.log.error({ event: 'chromium_stop_failed', chromium_pid: run.pid, err }, 'the crashed Chromium tree did not stop');
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
    throw new BrowserUnavailableError(`Chromium cannot start: ${message}`, { retryable: false });
  }

  /** Stops the current run on purpose and records its exit with `why`; `graceMs` 0 kills it at once. */
  private async stopRun(why: string, end: ChannelEnd, graceMs = this.deps.config.chromium.stopGraceMs, handOff = false): Promise<OldRunSweep | null> {
    const run = this.run;
    let old: OldRunSweep | null = null;
    if (run !== null) {
      run.intentional = true;
      this.run = null;
      this.deps.metrics.chromiumReady.set(0);
      if (handOff) old = await run.stopAndHandOff(graceMs, end);
      else await run.stop(graceMs, end);
      const e = run.proc.exitInfo;
      if (e) this.lastExit = { code: e.code, signal: e.signal, at: e.at.toISOString(), reason: why };
    }
    if (this.dying) {
      await this.dying;
      this.dying = null;
    }
    // A restart's leftovers are swept in the background (OldRunSweep); any other stop waits for them.
    if (old !== null) this.sweeping = Promise.all([this.sweeping, old.done]).then(() => undefined);
    else if (!handOff) await this.sweeping;
    return old;
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
