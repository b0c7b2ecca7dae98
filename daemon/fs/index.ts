// The files module: the SDK's `browsers.fs` routes (read, write, list, info, folders, moves,
// permissions, uploads, zips, watches) on every path but the daemon's own (paths/guard.ts), and the
// downloads folder Chromium saves to. close() stops every watch.
import { mkdirSync, realpathSync, rmSync } from 'node:fs';
import path from 'node:path';
import { ConfigError, type Config } from '../core/config.js';
import { ownedDir, writableRealDir } from '../core/state-dir.js';
import { groupsOf } from '../core/users.js';
import type { Module, ModuleContext } from '../module.js';
import type { Route } from '../http/router.js';
import { Guard } from './paths/guard.js';
import { fsRoutes } from './routes.js';
import { readablePath } from './read/send.js';
import { WatchSet } from './watch/watches.js';

export interface Files extends Module {
  readonly routes: Route[];
  /** The real path of BROWSERD_DOWNLOADS_DIR, where Chromium's downloads go (the downloads module). */
  readonly downloadsDir: string;
  /** The real path of a file the API may read, under the same rules as read_file (403, 404, 409 otherwise). */
  resolveReadable(input: string): Promise<string>;
  close(): Promise<void>;
  destroy(): void;
}

/**
 * BROWSERD_DOWNLOADS_DIR created (0700, owned by the agent user) when missing and used by its real path, which must not be
 * in the state dir either (a symlink made after the settings were read): ConfigError otherwise.
 */
function prepareDownloadsDir(config: Config): string {
  const dir = config.fs.downloadsDir;
  let real: string;
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    real = realpathSync(dir);
  } catch (err) {
    throw new ConfigError('BROWSERD_DOWNLOADS_DIR', `cannot use ${dir} as a folder: ${(err as Error).message}`);
  }
  // Checked before it is handed to the agent user: a symlink into the state dir must never make that the agent's.
  if (real === config.stateDir || real.startsWith(`${config.stateDir}/`)) {
    throw new ConfigError('BROWSERD_DOWNLOADS_DIR', `${dir} resolves to ${real}, inside the state dir ${config.stateDir}`);
  }
  if (!config.agent.separated) return writableRealDir(real, 'BROWSERD_DOWNLOADS_DIR');
  // Chromium saves there as the agent user: the folder is that user's (its own access, not the daemon's, is what counts).
  try {
    ownedDir(real, config.agent.user);
  } catch (err) {
    throw new ConfigError('BROWSERD_DOWNLOADS_DIR', `cannot make ${real} the agent user's (${config.agent.user.name}) folder: ${(err as Error).message}`);
  }
  return real;
}

/** Where upload parts wait that cannot go beside their destination yet; emptied at every start. */
function spoolDirOf(stateDir: string): string {
  return path.join(stateDir, 'fs-spool');
}

/** The files module; throws ConfigError when the downloads folder cannot be used (main exits 2). */
export function createFs(ctx: ModuleContext): Files {
  const { config, metrics } = ctx;
  const log = ctx.log.child({ module: 'fs' });
  const downloadsDir = prepareDownloadsDir(config);
  // The API acts with the agent user's rights (paths/guard.ts), unless that user is the daemon's own.
  const a = config.agent;
  const agent = a.separated ? { name: a.user.name, uid: a.user.uid, gid: a.user.gid, groups: groupsOf(a.user) } : null;
  const guard = new Guard({ stateDir: config.stateDir, keysFile: config.keysFile, providersFile: config.proxies.providersFile, agent });
  const spoolDir = spoolDirOf(config.stateDir);
  rmSync(spoolDir, { recursive: true, force: true });
  mkdirSync(spoolDir, { mode: 0o700 });
  const watches = new WatchSet(guard, { max: config.fs.maxWatches, queue: config.fs.watchQueue, maxDirs: config.fs.watchMaxDirs, idleMs: config.fs.watchIdleMs }, log, (n) =>
    metrics.fsWatches.set(n),
  );
  log.info({ event: 'fs_ready', downloads_dir: downloadsDir }, 'files API ready');
  return {
    name: 'fs',
    routes: fsRoutes({ config, metrics, guard, watches, spoolDir }),
    downloadsDir,
    resolveReadable: readablePath(guard),
    async close() {
      watches.closeAll();
    },
    destroy() {
      watches.closeAll();
    },
  };
}
