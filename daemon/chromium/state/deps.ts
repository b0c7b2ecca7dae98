// What the supervisor (supervisor.ts) is given and what its status() tells: kept apart so that the
// supervisor itself holds only the state machine.
import type { Config } from '../../core/config.js';
import type { Logger } from '../../core/log.js';
import type { Metrics } from '../../core/metrics.js';
import type { BrowserState, LastExit } from '../types.js';

export interface SupervisorDeps {
  config: Config;
  log: Logger;
  metrics: Metrics;
  profileDir: string;
  tmpDir: string;
  /** Every line Chromium writes (for the log stream). */
  onChromiumLine?(line: string): void;
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
