// The runners: at most BROWSERD_PLAYWRIGHT_RUNNERS, each running one execution at a time. An
// execution takes an idle runner, or starts one when fewer run (so a second runner exists only
// once two executions overlapped); past the limit it is 429. Each runner gets its own token with
// only the `cdp` scope, registered when it starts and revoked when it exits. A runner that exits
// (killed at a timeout, crashed) leaves the pool and is replaced by the next execution that needs one.
import type { SwitchTo } from '../core/users.js';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { endGroups } from '../core/process/group.js';
import { BrowserUnavailableError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { Metrics } from '../core/metrics.js';
import { Slots } from '../core/slots.js';
import type { HelloMessage } from './protocol.js';
import { RunnerProcess, type Execution } from './runner-process.js';

/** At shutdown, how long runners get after SIGTERM before SIGKILL. */
const RUNNER_STOP_GRACE_MS = 1000;

export interface PoolDeps {
  /** The runner program. */
  script: string;
  /** Whose runners these are (key ids `<kind>-runner-N`, the logs); only Playwright's count in browserd_playwright_runners. Default playwright. */
  kind?: 'playwright' | 'repl';
  max: number;
  maxHeapMb: number;
  outputLimitBytes: number;
  resultLimitBytes: number;
  /** ws://<daemon>/browsers/{id}/cdp (the listen address, loopback for a wildcard one). */
  cdpUrl(): string;
  /** The daemon's downloads folder (the runners' Playwright artifacts folder). */
  downloadsDir: string;
  /** Registers a token with only the `cdp` scope; returns its revoke function. */
  registerToken(id: string, token: string): () => void;
  /** The runner's environment and working directory (those of the processes API), and what removes its TMPDIR. */
  childSetup(): Promise<{ env: Record<string, string>; cwd: string; user?: SwitchTo; cleanup(): Promise<void> }>;
  log: Logger;
  metrics: Metrics;
}

export interface PoolExecution extends Execution {
  runnerPid: number;
  /** The execution started its runner (its time includes the runner's start). */
  startedRunner: boolean;
}

export class RunnerPool {
  private readonly idle: RunnerProcess[] = [];
  /** The shared runners (the `default` executor). */
  private readonly all = new Set<RunnerProcess>();
  /** The named executors' runners (executors.ts): ended with the pool's. */
  private readonly named = new Set<RunnerProcess>();
  /** Executions under way (a runner starting for one counts). */
  private readonly busy: Slots;
  private startedCount = 0;
  private closed = false;

  constructor(private readonly deps: PoolDeps) {
    const { max } = deps;
    this.busy = new Slots({
      what: 'Playwright executions',
      max,
      message: `${max} Playwright execution${max === 1 ? '' : 's'} run already (BROWSERD_PLAYWRIGHT_RUNNERS=${max}; one execution at a time per runner)`,
      retryAfterMs: 1000,
    });
  }

  get size(): number {
    return this.all.size;
  }

  /** Executions of the shared runners under way. */
  get running(): number {
    return this.busy.used;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Restarts the shared runners: SIGKILL to each (an execution under way ends `abandoned`); new ones start at the next execution. */
  restart(): void {
    this.idle.length = 0;
    for (const r of this.all) r.kill();
  }

  async run(code: string, timeoutMs: number, abandon: AbortSignal): Promise<PoolExecution> {
    if (this.closed) throw new BrowserUnavailableError('browserd is stopping', { retryable: false });
    const release = this.busy.take();
    let runner: RunnerProcess | undefined;
    try {
      runner = this.takeIdle();
      const startedRunner = runner === undefined;
      runner ??= await this.start();
      const execution = await runner.execute(code, timeoutMs, abandon);
      return { ...execution, runnerPid: runner.pid, startedRunner };
    } finally {
      release();
      if (runner !== undefined && runner.alive && !this.closed) this.idle.push(runner);
    }
  }

  /** SIGTERM to every runner, SIGKILL after a grace; resolves once they are gone. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    this.idle.length = 0;
    await Promise.all([...this.all, ...this.named].map((r) => r.stop(RUNNER_STOP_GRACE_MS)));
  }

  /** SIGKILL to every runner now. Idempotent. */
  destroy(): void {
    this.closed = true;
    this.idle.length = 0;
    for (const r of [...this.all, ...this.named]) r.kill();
  }

  private takeIdle(): RunnerProcess | undefined {
    for (;;) {
      const r = this.idle.pop();
      if (r === undefined || r.alive) return r;
    }
  }

  /** A runner of its own (a named executor's: a tab of its own; the REPL's), outside the shared ones, ended with the pool. */
  async startNamed(): Promise<RunnerProcess> {
    if (this.closed) throw new BrowserUnavailableError('browserd is stopping', { retryable: false });
    return this.start(true);
  }

  private async start(ownTab = false): Promise<RunnerProcess> {
    const { log, metrics } = this.deps;
    const set = ownTab ? this.named : this.all;
    const n = ++this.startedCount;
    const kind = this.deps.kind ?? 'playwright';
    const keyId = `${kind}-runner-${n}`;
    const count = (): void => {
      if (kind === 'playwright') metrics.playwrightRunners.set(this.all.size + this.named.size);
    };
    const token = randomBytes(32).toString('base64url');
    const revoke = this.deps.registerToken(keyId, token);
    const hello: HelloMessage = {
      type: 'hello',
      token,
      cdp_url: this.deps.cdpUrl(),
      downloads_dir: this.deps.downloadsDir,
      output_limit_bytes: this.deps.outputLimitBytes,
      result_limit_bytes: this.deps.resultLimitBytes,
      own_tab: ownTab,
    };
    const t0 = performance.now();
    let runner: RunnerProcess;
    try {
      runner = await RunnerProcess.start({ ...(await this.deps.childSetup()), script: this.deps.script, maxHeapMb: this.deps.maxHeapMb, hello, log });
    } catch (err) {
      revoke();
      throw err;
    }
    set.add(runner);
    count();
    log.info({ event: 'playwright_runner_started', kind, child_pid: runner.pid, key_id: keyId, ms: Math.round(performance.now() - t0) }, 'Playwright runner started');
    const started = runner;
    void started.ended.then(async (exit) => {
      revoke();
      set.delete(started);
      const i = this.idle.indexOf(started);
      if (i >= 0) this.idle.splice(i, 1);
      count();
      log.info({ event: 'playwright_runner_exited', kind, child_pid: started.pid, code: exit.code, signal: exit.signal }, 'Playwright runner exited');
      // Whatever the runner left in its group (the code's children) goes with it.
      await endGroups([started.pid], 0, 2000).catch(() => {});
    });
    return runner;
  }
}
