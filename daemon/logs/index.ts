// The log streams module: rings of recent lines of the daemon's own log (fed by the logger's tap)
// and of Chromium's output (fed by the browser's onChromiumLine), file tails, and the SSE route.
// It is created before the logger, which writes into it.
import type { Config } from '../core/config.js';
import { redactTokens } from '../core/log.js';
import type { Metrics } from '../core/metrics.js';
import type { Route } from '../http/router.js';
import { LogRing } from './ring.js';
import { logRoutes } from './routes.js';

/** The real path of a file a `path` stream may read, or throws (400, 403 path_forbidden, 404, 409): the filesystem API's rules. */
export type ResolveReadable = (file: string) => Promise<string>;

interface LogsDeps {
  config: Config;
  metrics: Metrics;
  /** The path rules of `source=path` (the filesystem API's guard). */
  resolveReadable: ResolveReadable;
}

export interface Logs {
  readonly routes: Route[];
  /** The logger's tap: every line the daemon logs (createLogger's `tap`). */
  daemonLine(line: string): void;
  /** Every line Chromium writes (createBrowser's `onChromiumLine`). */
  chromiumLine(line: string): void;
}

export function createLogs(deps: LogsDeps): Logs {
  const { config } = deps;
  const rings = { browserd: new LogRing(config.logs.daemonLines), chromium: new LogRing(config.logs.chromiumLines) };
  return {
    routes: logRoutes({
      rings,
      resolveReadable: deps.resolveReadable,
      metrics: deps.metrics,
      maxStreams: config.logs.maxStreams,
      fileBacklogBytes: config.logs.fileBacklogBytes,
      daemonLines: config.logs.daemonLines,
      chromiumLines: config.logs.chromiumLines,
    }),
    daemonLine: (line) => rings.browserd.push(line),
    chromiumLine: (line) => rings.chromium.push(redactTokens(line)),
  };
}
