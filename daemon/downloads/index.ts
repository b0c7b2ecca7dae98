// The downloads module: the daemon owns the browser's download behaviour (behavior.ts: clients'
// settings rewritten so that files land where the daemon can serve them, and undone when a client
// leaves) and lists every download with its file (tracker.ts), whichever client started it.
import { accessSync, constants, realpathSync, statSync } from 'node:fs';
import type { Browser } from '../chromium/types.js';
import type { CdpClient } from '../cdp/client.js';
import type { CommandPolicy } from '../cdp/mux.js';
import type { Module, ModuleContext } from '../module.js';
import type { TelemetrySink } from '../telemetry/index.js';
import type { Route } from '../http/router.js';
import { groupsOf, userMay } from '../core/users.js';
import { DownloadBehaviors } from './behavior.js';

/** Write and search (userMay's bits): a folder files can be made in. */
const MAY_WRITE_SEARCH = 3;
import { downloadRoutes } from './routes.js';
import { DownloadTracker, type Download } from './tracker.js';

export type { Download } from './tracker.js';

export interface DownloadsDeps {
  browser: Browser;
  /** The real path of BROWSERD_DOWNLOADS_DIR (the files module's). */
  downloadsDir: string;
  /** A download began or ended. */
  telemetry?: Pick<TelemetrySink, 'download'>;
}

export interface Downloads extends Module {
  readonly routes: Route[];
  list(): Download[];
}

/** The user Chromium runs as (the agent user, with its supplementary groups), when it is not the daemon's own; null: the daemon's. */
export interface BrowserUser {
  uid: number;
  gid: number;
  groups?: readonly number[];
}

/**
 * Whether a client's download path is a folder the browser may write into on this VM: it exists,
 * is a folder, is writable and searchable for the browser's user (Chromium runs as the agent user:
 * its rights by the folder's owner, group and mode; as the daemon's own user, access(2)), and is not
 * the daemon's state dir or in it. A realpath and a stat, synchronous: a client's commands keep
 * their order. The rights are core/users.ts userMay's (the files API's too).
 */
export function writableDirFor(stateDir: string, browserUser: BrowserUser | null = null): (dir: string) => boolean {
  return (dir) => {
    try {
      const real = realpathSync(dir);
      if (real === stateDir || real.startsWith(`${stateDir}/`)) return false;
      const st = statSync(real);
      if (!st.isDirectory()) return false;
      if (browserUser === null) {
        accessSync(real, constants.W_OK | constants.X_OK);
        return true;
      }
      return userMay(browserUser, st, MAY_WRITE_SEARCH);
    } catch {
      return false;
    }
  };
}

export function createDownloads(ctx: ModuleContext, deps: DownloadsDeps): Downloads {
  const { config } = ctx;
  const { browser, downloadsDir, telemetry } = deps;
  const log = ctx.log.child({ module: 'downloads' });
  const agent = config.agent.separated ? { uid: config.agent.user.uid, gid: config.agent.user.gid, groups: groupsOf(config.agent.user) } : null;
  const behaviors = new DownloadBehaviors({ downloadsDir, writableDir: writableDirFor(config.stateDir, agent) });
  const tracker = new DownloadTracker({ log, downloadsDir, maxCount: config.fs.downloadsMaxCount, maxBytes: config.fs.downloadsMaxBytes, onChange: telemetry === undefined ? undefined : (event, d) => telemetry.download(event, d) });
  let daemonCdp: CdpClient | null = null;

  const cdpPolicy: CommandPolicy = {
    rewrite: (channel, method, params) => behaviors.rewrite(channel, method, params),
    released: (channel) => {
      const cdp = daemonCdp;
      for (const params of behaviors.released(channel)) {
        if (cdp === null || cdp.isClosed) return;
        cdp.send('Browser.setDownloadBehavior', params).then(
          () => log.debug({ event: 'download_behavior_restored', behavior: params.behavior, download_path: params.downloadPath, browser_context_id: params.browserContextId }, "a client left: the download behaviour it set is undone"),
          (err: unknown) => log.warn({ event: 'download_behavior_restore_failed', err }, 'the download behaviour could not be set again after a client left'),
        );
      }
    },
  };
  browser.use({
    name: 'downloads',
    cdpPolicy,
    // At every launch, on the downloads' own session (the setting and the events last the run's life).
    onLaunch: async (cdp) => {
      tracker.interrupted();
      behaviors.reset();
      daemonCdp = cdp;
      cdp.on('Browser.downloadWillBegin', (p) => tracker.begin(p));
      cdp.on('Browser.downloadProgress', (p) => tracker.progress(p));
      await cdp.send('Browser.setDownloadBehavior', behaviors.daemonParams());
    },
    snapshot: () => ({ downloads_dir: downloadsDir }),
  });

  return {
    name: 'downloads',
    routes: downloadRoutes({ downloadsDir, maxCount: config.fs.downloadsMaxCount, maxBytes: config.fs.downloadsMaxBytes, list: () => tracker.list() }),
    list: () => tracker.list(),
  };
}
