// The log streams module: rings of recent lines of the daemon's own log (fed by the logger's tap)
// and of Chromium's output (fed by the browser's onChromiumLine), file tails, and the SSE route.
// The rings (createLogRings) exist before the logger, which writes into them; the module
// (createLogs) serves them once the files module, whose read rules a `path` stream follows, is made.
import type { Config } from '../core/config.js';
import { redactTokens } from '../core/log.js';
import type { Route } from '../http/router.js';
import type { Module, ModuleContext } from '../module.js';
import { LogRing } from './ring.js';
import { logRoutes } from './routes.js';

/** The real path of a file a `path` stream may read, or throws (400, 403 path_forbidden, 404, 409): the filesystem API's rules. */
export type ResolveReadable = (file: string) => Promise<string>;

export interface LogRings {
  readonly browserd: LogRing;
  readonly chromium: LogRing;
  /** The logger's tap: every line the daemon logs (createLogger's `tap`). */
  daemonLine(line: string): void;
  /** Every line Chromium writes (createBrowser's `onChromiumLine`). */
  chromiumLine(line: string): void;
}

export function createLogRings(config: Config): LogRings {
  const browserd = new LogRing(config.logs.daemonLines);
  const chromium = new LogRing(config.logs.chromiumLines);
  return {
    browserd,
    chromium,
    daemonLine: (line) => browserd.add(line),
    chromiumLine: (line) => chromium.add(redactTokens(line)),
  };
}

export interface Logs extends Module {
  readonly routes: Route[];
}

export function createLogs(ctx: ModuleContext, deps: { rings: LogRings; files: { resolveReadable: ResolveReadable } }): Logs {
  const { config } = ctx;
  return {
    name: 'logs',
    routes: logRoutes({
      rings: { browserd: deps.rings.browserd, chromium: deps.rings.chromium },
      resolveReadable: (file) => deps.files.resolveReadable(file),
      metrics: ctx.metrics,
      maxStreams: config.logs.maxStreams,
      fileBacklogBytes: config.logs.fileBacklogBytes,
      daemonLines: config.logs.daemonLines,
      chromiumLines: config.logs.chromiumLines,
      stallMs: config.http.sseStallMs,
    }),
  };
}
