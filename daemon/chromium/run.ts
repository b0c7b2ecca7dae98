// One Chromium run: the launch (flags, environment, its DevTools pipe and multiplexer), readiness
// (Browser.getVersion answered over the pipe), and a stop that leaves nothing behind: the process
// group, then the processes of the run outside it (the crashpad handlers end with the browser; any
// Chromium process still naming the profile after CRASHPAD_EXIT_WAIT_MS is ended), then the run's
// TMPDIR is emptied.
import { mkdir, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Protocol } from 'devtools-protocol';
import type { Config } from '../core/config.js';
import type { Deadline } from '../core/deadline.js';
import type { Logger } from '../core/log.js';
import type { Channel, ChannelEnd } from '../cdp/channel.js';
import { CdpClient } from '../cdp/client.js';
import { CdpMux, type CommandPolicy } from '../cdp/mux.js';
import type { MalformedReporter } from '../cdp/malformed.js';
import { chromiumEnv, chromiumFlags } from './flags.js';
import type { ChromiumIdentity } from './sweep/identity.js';
import { launch, type LaunchedProcess } from './launch/launcher.js';
import { LineRateLimiter } from './launch/output.js';
import { procInfo } from '../core/process/proc.js';
import { ownedDir } from '../core/state-dir.js';
import { OldRunSweep } from './sweep/old-run.js';
import { endLeftovers, ensureProfileDir, findProfileProcesses, removeStaleFiles } from './sweep/profile.js';
import type { LaunchExtras } from './types.js';

/** Chromium's own output forwarded to the log (debug level), at most this many lines a second. */
const STDERR_LINES_PER_SECOND = 50;
/** How long the crashpad handlers get to end on their own after the browser is gone. */
const CRASHPAD_EXIT_WAIT_MS = 3000;

export type BrowserVersion = Protocol.Browser.GetVersionResponse;

interface RunDeps {
  config: Config;
  log: Logger;
  profileDir: string;
  /** Chromium's TMPDIR, emptied after every stop. */
  tmpDir: string;
  identity: ChromiumIdentity;
  /** A CDP client sent Browser.close (already answered). */
  onBrowserClose(channel: Channel): void;
  /** Where malformed messages from Chromium are reported. */
  malformed: MalformedReporter;
  /** Every line Chromium writes to stdout or stderr. */
  onLine?(line: string): void;
  /** The forwarding proxy's port, or null (no --proxy-server). */
  proxyPort(): number | null;
  /** What the daemon keeps for itself of the shared browser (the multiplexer's CommandPolicy). */
  cdpPolicy?: CommandPolicy;
}

export class ChromiumRun {
  version: BrowserVersion | null = null;
  /** The browser module's own browser-level session for the run's life (the windows' viewport); set once ready. Every other part of the daemon gets a session of its own (Browser.onLaunch, withCdp). */
  cdp: CdpClient | null = null;
  /** Stopped on purpose: its exit is not a crash. */
  intentional = false;
  /** The supervisor declared it ready (alive at that moment): from then on its exit is a crash. */
  announced = false;

  private constructor(
    readonly proc: LaunchedProcess,
    readonly mux: CdpMux,
    private readonly deps: RunDeps,
    /** The leader's start time (clock ticks since boot, /proc): no process of this run started before it. */
    readonly startTicks: number,
  ) {}

  get pid(): number {
    return this.proc.pid;
  }

  /**
   * Ends what an earlier run left on the profile, then launches Chromium with its DevTools pipe.
   * Returns at once (not ready yet); rejects with LaunchError('spawn') when it cannot start.
   */
  static async launch(deps: RunDeps, extras: LaunchExtras, opts: { oldRunSwept: boolean } = { oldRunSwept: false }): Promise<ChromiumRun> {
    const { config, log, profileDir, tmpDir } = deps;
    const c = config.chromium;
    const t0 = performance.now();
    const agent = config.agent;
    const owner = agent.separated ? { uid: agent.user.uid, gid: agent.user.gid } : null;
    ensureProfileDir(profileDir);
    // The profile and TMPDIR are the agent user's: Chromium runs as that user (setpriv, below).
    ownedDir(profileDir, owner, 0o700);
    // After stopAndHandOff the old run's leftovers are the OldRunSweep's, told apart by start time.
    if (!opts.oldRunSwept) await endLeftovers(profileDir, deps.identity, c.stopGraceMs, log);
    const t1 = performance.now();
    removeStaleFiles(profileDir);
    await emptyDir(tmpDir);
    ownedDir(tmpDir, owner, 0o700);
    const t2 = performance.now();
    const args = chromiumFlags({ profileDir, headless: c.headless, extraFlags: c.extraFlags, extras, noSandbox: !c.sandbox, proxyPort: deps.proxyPort() });
    if (!c.sandbox) log.warn({ event: 'chromium_sandbox_off', setting: 'BROWSERD_CHROMIUM_SANDBOX' }, "Chromium starts without its sandbox (BROWSERD_CHROMIUM_SANDBOX=false): a renderer exploit owns the agent user's side");
    const pidRef = { pid: 0, starttime: 0 };
    const limiter = new LineRateLimiter(
      STDERR_LINES_PER_SECOND,
      (line) => log.debug({ event: 'chromium_stderr', chromium_pid: pidRef.pid, line }, 'chromium'),
      (n) => log.debug({ event: 'chromium_stderr', chromium_pid: pidRef.pid, dropped: n }, `${n} lines of Chromium output dropped (over ${STDERR_LINES_PER_SECOND}/s)`),
    );
    const proc = await launch({
      command: c.binary as string,
      args,
      env: chromiumEnv(process.env, profileDir, tmpDir, { name: agent.user.name, home: agent.dir }),
      cwd: profileDir,
      ...(owner === null ? {} : { user: owner }),
      extraPipes: 2,
      onSpawn: (pid) => {
        // Read before anything awaits: every process of this run started at or after it.
        const info = procInfo(pid);
        if (info === null) throw new Error(`the new Chromium (pid ${pid}) is not in /proc`);
        pidRef.starttime = info.starttime;
      },
      onLine: (line) => {
        limiter.push(line);
        deps.onLine?.(line);
      },
    });
    pidRef.pid = proc.pid;
    const t3 = performance.now();
    log.info({ event: 'chromium_launch_phases', sweep_ms: t1 - t0, files_ms: t2 - t1, spawn_ms: t3 - t2 }, 'launch phases');
    void proc.exited.then(() => limiter.flush());
    const [toChromium, fromChromium] = proc.child.extra;
    if (toChromium === undefined || fromChromium === undefined) throw new Error('Chromium was started without its DevTools pipes');
    let run: ChromiumRun | null = null;
    const mux = new CdpMux(toChromium, fromChromium, {
      log: log.child({ chromium_pid: proc.pid }),
      maxMessageBytes: c.cdpMaxMessageBytes,
      onBrowserClose: (channel) => {
        if (run !== null) deps.onBrowserClose(channel);
      },
      policy: deps.cdpPolicy,
      malformed: deps.malformed,
    });
    run = new ChromiumRun(proc, mux, deps, pidRef.starttime);
    log.info({ event: 'chromium_launched', chromium_pid: proc.pid, binary: c.binary, flags: args }, 'Chromium launched');
    return run;
  }

  /**
   * Resolves with the version once Browser.getVersion is answered over the pipe and `prepare` (the
   * supervisor's ready hooks) is done; LaunchError otherwise (the group is stopped). `prepare` is
   * part of readiness: it runs inside the same race against the leader's exit and the deadline, so
   * a Chromium that exits while it runs fails the launch (once) instead of leaving a ready state
   * without a browser.
   */
  async waitReady(deadline: Deadline, prepare: () => Promise<void> = () => Promise.resolve()): Promise<BrowserVersion> {
    const version = await this.proc.waitReady(
      async (d) => {
        const v = await this.mux.call<BrowserVersion>('Browser.getVersion', {}, d.signal);
        this.cdp = await CdpClient.overChannel((sink) => this.mux.open({ kind: 'browser' }, sink, d));
        await prepare();
        return v;
      },
      deadline,
      this.deps.config.chromium.stopGraceMs,
    );
    this.version = version;
    return version;
  }

  /**
   * A restart's stop: the CDP clients hear `end`, the process group is stopped as by stop(), and
   * the rest (the crashpad handlers outside the group, the old TMPDIR entries) is handed to the
   * returned OldRunSweep, which the caller starts once the next run is launched (or failed to).
   */
  /**
   * Asks Chromium to close orderly (Browser.close on the pipe's root session: the daemon's own, never
   * a client's, which the mux answers itself), waiting up to `ms` for the leader to exit. Chromium
   * flushes its cookie store and LevelDB only then (a signal ends the network and storage
   * processes first). Returns whether it exited; the caller stops the rest as usual.
   */
  async closeOrderly(ms: number): Promise<boolean> {
    if (this.proc.exitInfo !== null) return true;
    const ac = new AbortController();
    void this.mux.call('Browser.close', {}, ac.signal).catch(() => undefined);
    try {
      return await Promise.race([this.proc.exited.then(() => true), sleep(ms, false, { signal: ac.signal }).catch(() => false)]);
    } finally {
      ac.abort();
    }
  }

  async stopAndHandOff(graceMs: number, end: ChannelEnd): Promise<OldRunSweep> {
    const { profileDir, identity, log, tmpDir } = this.deps;
    const t0 = performance.now();
    await this.endGroup(graceMs, end);
    const sweep = new OldRunSweep({ profileDir, tmpDir, identity, log, graceMs, exitWaitMs: graceMs > 0 ? CRASHPAD_EXIT_WAIT_MS : 0 });
    log.info({ event: 'chromium_stop_phases', group_ms: performance.now() - t0 }, 'stop phases');
    return sweep;
  }

  /**
   * Ends the run: its CDP clients hear `end` (1012 on a restart), the process group gets SIGTERM
   * (SIGKILL after `graceMs`; 0: at once), the crashpad handlers get CRASHPAD_EXIT_WAIT_MS to end
   * with it, whatever Chromium process still names the profile is ended, and TMPDIR is emptied.
   */
  async stop(graceMs: number, end: ChannelEnd): Promise<void> {
    const { profileDir, identity, log, tmpDir } = this.deps;
    const t0 = performance.now();
    await this.endGroup(graceMs, end);
    const t1 = performance.now();
    const until = Date.now() + (graceMs > 0 ? CRASHPAD_EXIT_WAIT_MS : 0);
    while ((await findProfileProcesses(profileDir, identity)).length > 0 && Date.now() < until) await sleep(25);
    const t2 = performance.now();
    await endLeftovers(profileDir, identity, graceMs, log);
    const t3 = performance.now();
    await emptyDir(tmpDir);
    const t4 = performance.now();
    log.info({ event: 'chromium_stop_phases', group_ms: t1 - t0, crashpad_ms: t2 - t1, leftovers_ms: t3 - t2, tmp_ms: t4 - t3 }, 'stop phases');
  }

  /** The CDP clients hear `end`; the process group gets SIGTERM, SIGKILL after `graceMs` (0: at once, also for a stop already under way). */
  private async endGroup(graceMs: number, end: ChannelEnd): Promise<void> {
    this.mux.closeAll(end);
    if (graceMs <= 0) this.proc.killNow();
    await this.proc.stop(graceMs);
  }
}

/**
 * Removes everything inside `dir` (created 0700 when missing); best effort. Asynchronous: a large
 * folder takes a while to remove, and the event loop keeps answering (and the watchdog keeps
 * being fed) meanwhile.
 */
export async function emptyDir(dir: string): Promise<void> {
  try {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    for (const name of await readdir(dir)) await rm(path.join(dir, name), { recursive: true, force: true });
  } catch {
    // a file Chromium still writes is gone with the next stop
  }
}
