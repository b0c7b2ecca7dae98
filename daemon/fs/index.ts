// The files module: the SDK's `browsers.fs` routes (read, write, list, info, folders, moves,
// permissions, uploads, zips, watches) on every path but the daemon's own (guard.ts), and the
// downloads folder Chromium saves to. close() stops every watch.
import { mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import type { Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import type { Metrics } from '../core/metrics.js';
import type { Route } from '../http/router.js';
import { Guard } from './guard.js';
import { fsRoutes } from './routes.js';
import { WatchSet } from './watches.js';

export interface FsDeps {
  config: Config;
  log: Logger;
  metrics: Metrics;
}

export interface Files {
  readonly routes: Route[];
  /** The params of CDP's Browser.setDownloadBehavior for every Chromium launch. */
  downloadBehavior(): DownloadBehavior;
  close(): Promise<void>;
  destroy(): void;
}

export interface DownloadBehavior {
  behavior: 'allow';
  downloadPath: string;
  eventsEnabled: true;
}

/** Browser.setDownloadBehavior params: downloads saved in BROWSERD_DOWNLOADS_DIR, with download events. */
export function downloadBehavior(config: Config): DownloadBehavior {
  return { behavior: 'allow', downloadPath: config.fs.downloadsDir, eventsEnabled: true };
}

/** Where upload parts wait that cannot go beside their destination yet; emptied at every start. */
export function spoolDirOf(stateDir: string): string {
  return path.join(stateDir, 'fs-spool');
}

export function createFs(deps: FsDeps): Files {
  const { config, metrics } = deps;
  const log = deps.log.child({ module: 'fs' });
  const guard = new Guard({ stateDir: config.stateDir, keysFile: config.keysFile, providersFile: config.proxies.providersFile });
  const spoolDir = spoolDirOf(config.stateDir);
  rmSync(spoolDir, { recursive: true, force: true });
  mkdirSync(spoolDir, { mode: 0o700 });
  const watches = new WatchSet(guard, { max: config.fs.maxWatches, queue: config.fs.watchQueue, maxDirs: config.fs.watchMaxDirs, idleMs: config.fs.watchIdleMs }, log, (n) =>
    metrics.fsWatches.set(n),
  );
  log.info({ event: 'fs_ready', downloads_dir: config.fs.downloadsDir }, 'files API ready');
  return {
    routes: fsRoutes({ config, metrics, guard, watches, spoolDir }),
    downloadBehavior: () => downloadBehavior(config),
    async close() {
      watches.closeAll();
    },
    destroy() {
      watches.closeAll();
    },
  };
}
