// What the supervisor (supervisor.ts) is given and what its status() tells: kept apart so that the
// supervisor itself holds only the state machine.
import type { Config } from '../../core/config.js';
import type { Logger } from '../../core/log.js';
import type { Metrics } from '../../core/metrics.js';
import type { CommandPolicy } from '../../cdp/mux.js';
import type { BrowserState, LastExit, LaunchExtras, StopWork } from '../types.js';

/** What the other modules add to every launch and stop (the browser's plugs.ts); each read when it is needed. */
export interface SupervisorPlugs {
  launchExtras(): LaunchExtras;
  /** Work once the whole tree has stopped (and before the next launch): null for none. With work, the stop closes Chromium orderly first. */
  stopWork(): StopWork | null;
  proxyPort(): number | null;
  cdpPolicy(): CommandPolicy | undefined;
  /** Before every launch (the lock held): the daemon's policy file made to match its settings. Must not throw (errors are logged). */
  beforeLaunch?(): Promise<void>;
}

export interface SupervisorDeps {
  config: Config;
  log: Logger;
  metrics: Metrics;
  profileDir: string;
  tmpDir: string;
  /** Every line Chromium writes (for the log stream). */
  onChromiumLine?(line: string): void;
  /** None: no extras, no stop work, no proxy, no policy. */
  plugs?: SupervisorPlugs;
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
