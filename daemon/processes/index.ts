// The processes module: exec, spawn, output streams, stdin and kill over HTTP. Its public face is
// createProcesses(); close() ends every process group it started (SIGTERM, SIGKILL after a grace),
// destroy() sends SIGKILL to every group that still has a member, even while close() runs.
import type { Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import type { Metrics } from '../core/metrics.js';
import type { Route } from '../http/router.js';
import { GroupSet, PROCESS_STOP_GRACE_MS } from './groups/groups.js';
import { ProcessTable } from './process-table.js';
import { processRoutes } from './routes.js';

export interface ProcessesDeps {
  config: Config;
  log: Logger;
  metrics: Metrics;
}

export interface Processes {
  readonly routes: Route[];
  /** Graceful: SIGTERM to every group started, SIGKILL to what is left after the grace. Idempotent. */
  close(): Promise<void>;
  /** Now: SIGKILL to every group. Idempotent. */
  destroy(): void;
}

export function createProcesses(deps: ProcessesDeps): Processes {
  const { config, log, metrics } = deps;
  const table = new ProcessTable({ maxLive: config.processes.maxLive, retentionMs: config.processes.retentionMs, metrics });
  const groups = new GroupSet();
  let closing: Promise<void> | null = null;

  return {
    routes: processRoutes({ config, log, metrics, table, groups }),
    close() {
      closing ??= (async () => {
        table.close();
        const groupCount = groups.size;
        if (groupCount === 0) return;
        log.info({ event: 'processes_stopping', groups: groupCount, grace_ms: PROCESS_STOP_GRACE_MS }, 'ending every spawned process group');
        const { terminated, killed } = await groups.endAll(PROCESS_STOP_GRACE_MS);
        groups.close();
        log.info({ event: 'processes_stopped', terminated, killed }, 'every spawned process group has ended');
      })();
      return closing;
    },
    destroy() {
      table.close();
      groups.killAll(); // also the groups a close() in progress is still ending
      groups.close();
    },
  };
}
