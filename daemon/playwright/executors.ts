// The Playwright executors: `default`, the shared runners of the pool (pool.ts: the first open
// page, several executions at once), and up to BROWSERD_PLAYWRIGHT_EXECUTORS named ones, each one
// long-lived runner with a tab of its own and its globals kept between executions, running one
// execution at a time (later ones queue, in order); different executors run at once. A named
// executor's runner that dies (its timeout, a crash, its heap limit) is replaced at its next
// execution, which takes over the executor's tab while it is open; nothing else is touched.
import { ConflictError, NotFoundError } from '../core/errors.js';
import { SerialQueue } from '../core/serial-queue.js';
import type { RunnerPool, PoolExecution } from './pool.js';
import type { TabInfo } from './protocol.js';
import type { RunnerProcess } from './runner-process.js';

/** The executor of executions that name none. */
export const DEFAULT_EXECUTOR = 'default';

export interface ExecutorInfo {
  name: string;
  busy: boolean;
  created_at: string;
  last_used_at: string | null;
  target_id: string | null;
  url: string | null;
}

interface ExecutorState {
  readonly name: string;
  readonly createdAt: string;
  lastUsedAt: string | null;
  tab: TabInfo | null;
}

interface Named extends ExecutorState {
  runner: RunnerProcess | null;
  readonly queue: SerialQueue;
  busy: boolean;
  removed: boolean;
}

export interface ExecutorExecution extends PoolExecution {
  tab: { target_id: string; created: boolean } | null;
}

interface ExecutorsDeps {
  pool: RunnerPool;
  /** Named executors at most, beyond `default`. */
  max: number;
  /** Closes a tab (Target.closeTarget); resolves when it is gone or was already. */
  closeTab(targetId: string): Promise<void>;
}

export class Executors {
  private readonly named = new Map<string, Named>();
  private readonly shared: ExecutorState = { name: DEFAULT_EXECUTOR, createdAt: new Date().toISOString(), lastUsedAt: null, tab: null };

  constructor(private readonly deps: ExecutorsDeps) {}

  async run(name: string, code: string, timeoutMs: number, abandon: AbortSignal): Promise<ExecutorExecution> {
    if (name === DEFAULT_EXECUTOR) {
      this.shared.lastUsedAt = new Date().toISOString();
      const execution = await this.deps.pool.run(code, timeoutMs, abandon);
      return this.finish(this.shared, execution);
    }
    const ex = this.named.get(name) ?? this.create(name);
    return ex.queue.run(async () => {
      if (ex.removed) throw new NotFoundError(`the Playwright executor ${name} was deleted before this execution ran`);
      if (abandon.aborted) return { outcome: { kind: 'abandoned' }, stdout: '', stderr: '', stdoutTruncated: 0, stderrTruncated: 0, runnerPid: 0, startedRunner: false, tab: null };
      ex.busy = true;
      ex.lastUsedAt = new Date().toISOString();
      try {
        const startedRunner = ex.runner === null || !ex.runner.alive;
        if (startedRunner) ex.runner = await this.deps.pool.startNamed();
        const runner = ex.runner;
        if (runner === null) throw new Error('unreachable: the runner was just started');
        const execution = await runner.execute(code, timeoutMs, abandon, ex.tab?.target_id);
        return this.finish(ex, { ...execution, runnerPid: runner.pid, startedRunner });
      } finally {
        ex.busy = false;
      }
    });
  }

  /** `default` first, then the named ones in the order they were made. */
  list(): ExecutorInfo[] {
    const info = (e: ExecutorState, busy: boolean): ExecutorInfo => ({
      name: e.name,
      busy,
      created_at: e.createdAt,
      last_used_at: e.lastUsedAt,
      target_id: e.tab?.target_id ?? null,
      url: e.tab?.url ?? null,
    });
    return [info(this.shared, this.deps.pool.running > 0), ...[...this.named.values()].map((e) => info(e, e.busy))];
  }

  /**
   * Removes a named executor: its runner is killed (an execution under way ends `abandoned`, those
   * queued answer 404) and, with `closeTab`, its tab closed. `default` is restarted instead (its
   * runners killed; it owns no tab: the first open page is everyone's).
   */
  async remove(name: string, closeTab: boolean): Promise<{ closed_tab: boolean }> {
    if (name === DEFAULT_EXECUTOR) {
      this.deps.pool.restart();
      return { closed_tab: false };
    }
    const ex = this.named.get(name);
    if (ex === undefined) throw new NotFoundError(`no Playwright executor named ${name} (GET …/playwright/executors lists them)`);
    this.named.delete(name);
    ex.removed = true;
    ex.runner?.kill();
    ex.runner = null;
    const targetId = ex.tab?.target_id;
    if (!closeTab || targetId === undefined) return { closed_tab: false };
    await this.deps.closeTab(targetId);
    return { closed_tab: true };
  }

  private create(name: string): Named {
    const { max } = this.deps;
    if (this.named.size >= max) {
      const names = [DEFAULT_EXECUTOR, ...this.named.keys()];
      throw new ConflictError(
        'executor_limit',
        `${max} named Playwright executor${max === 1 ? '' : 's'} exist already (BROWSERD_PLAYWRIGHT_EXECUTORS=${max}, beyond default): ${names.join(', ')}; delete one first (DELETE …/playwright/executors/{name})`,
        { details: names.map((n) => ({ code: 'executor', message: n })) },
      );
    }
    const ex: Named = { name, createdAt: new Date().toISOString(), lastUsedAt: null, tab: null, runner: null, queue: new SerialQueue(), busy: false, removed: false };
    this.named.set(name, ex);
    return ex;
  }

  private finish(ex: ExecutorState, execution: PoolExecution): ExecutorExecution {
    const { outcome } = execution;
    const tab = outcome.kind === 'answer' ? outcome.message.tab : undefined;
    if (tab !== undefined) ex.tab = tab;
    return { ...execution, tab: tab === undefined ? null : { target_id: tab.target_id, created: tab.created } };
  }
}
