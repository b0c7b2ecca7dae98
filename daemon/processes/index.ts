// The processes module: exec, spawn (on pipes or a terminal), output streams, stdin, kill, resize
// and attach over HTTP. Its public face is createProcesses(); start() (before the daemon listens)
// loads the terminal module and ends the process groups an earlier run left (groups/sweep.ts);
// beginShutdown() closes attached terminals; close() ends every process group it started (SIGTERM,
// SIGKILL after a grace); destroy() sends SIGKILL to every group that still has a member, even
// while close() runs.
import type { Module, ModuleContext } from '../module.js';
import type { TelemetrySink } from '../telemetry/index.js';
import { loadPty, PTY_PACKAGE } from '../core/process/pty.js';
import type { Route } from '../http/router.js';
import { GroupSet, PROCESS_STOP_GRACE_MS } from './groups/groups.js';
import { GroupJournal } from './groups/journal.js';
import { endLeftoverGroups } from './groups/sweep.js';
import { ProcessTable } from './process-table.js';
import { AttachHub } from './pty/attach.js';
import { ExecOutputPool } from './exec-output-pool.js';
import { StdinBudget } from './stdin/stdin-budget.js';
import { processRoutes } from './routes.js';

/** The minimal environment, user and working directory of a child: also the Playwright runner's. */
export { childEnv, resolveCwd, resolveUser } from './launch/user-env.js';
export { PtyUnavailableError } from '../core/process/pty.js';

interface ProcessesDeps {
  /** A spawned process exited (process_exited). */
  telemetry?: TelemetrySink;
  /** Variables every process the API starts gets (the caller's env overrides them): the egress policy's proxy variables. */
  extraEnv?(): Record<string, string>;
}

export interface Processes extends Module {
  readonly routes: Route[];
  /**
   * Before the daemon listens: loads the terminal module (PtyUnavailableError when it cannot: the
   * daemon must not start), ends the groups an earlier run left, and starts the journal afresh.
   */
  start(): Promise<void>;
  /** Closes attached terminals (1001) so that the HTTP server need not wait for them. Idempotent. */
  beginShutdown(): void;
  /** Graceful: SIGTERM to every group started, SIGKILL to what is left after the grace. Idempotent. */
  close(): Promise<void>;
  /** Now: SIGKILL to every group. Idempotent. */
  destroy(): void;
}

export function createProcesses(ctx: ModuleContext, deps: ProcessesDeps = {}): Processes {
  const { config, log, metrics } = ctx;
  const telemetry = deps.telemetry;
  const onExit = telemetry === undefined ? undefined : (p: Record<string, unknown>): void => telemetry.emit('process_exited', 'system', { kind: 'local_process', event: 'exit' }, p);
  const table = new ProcessTable({ maxLive: config.processes.maxLive, retentionMs: config.processes.retentionMs, retainedBytes: config.processes.outputRetainedBytes, metrics, onExit });
  const groups = new GroupSet();
  const journal = new GroupJournal(config.stateDir);
  const attach = new AttachHub({ maxFrameBytes: config.processes.stdinLimitBytes, log });
  let closing: Promise<void> | null = null;
  const stdinBudget = new StdinBudget(config.processes.stdinQueueTotalBytes);
  metrics.memoryPool('process_output', () => table.outputMemoryBytes);
  const execOutputPool = new ExecOutputPool(config.processes.execOutputTotalBytes);
  metrics.memoryPool('stdin_queue', () => stdinBudget.usedBytes);
  metrics.memoryPool('exec_output', () => execOutputPool.usedBytes);

  return {
    name: 'processes',
    routes: processRoutes({ config, log, metrics, table, groups, journal, attach, stdinBudget, execOutputPool, extraEnv: deps.extraEnv }),
    async start() {
      loadPty(config.testHooks.ptyPackage ?? PTY_PACKAGE);
      const { entries, malformed } = journal.readLeft();
      if (malformed > 0) log.warn({ event: 'process_journal_malformed', file: journal.file, lines: malformed }, 'unreadable lines in the process group journal were skipped');
      const { survivors } = await endLeftoverGroups(entries, log, PROCESS_STOP_GRACE_MS);
      journal.open(survivors);
    },
    beginShutdown() {
      attach.close();
    },
    close() {
      closing ??= (async () => {
        attach.close();
        table.close();
        await groups.refresh();
        const groupCount = groups.size;
        if (groupCount > 0) {
          log.info({ event: 'processes_stopping', groups: groupCount, grace_ms: PROCESS_STOP_GRACE_MS }, 'ending every spawned process group');
          const { terminated, killed } = await groups.endAll(PROCESS_STOP_GRACE_MS);
          log.info({ event: 'processes_stopped', terminated, killed }, 'every spawned process group has ended');
        }
        groups.close();
        journal.close();
      })();
      return closing;
    },
    destroy() {
      attach.destroy();
      table.close();
      groups.killAll(); // also the groups a close() in progress is still ending
      groups.close();
    },
  };
}
