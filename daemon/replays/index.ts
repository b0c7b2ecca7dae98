// The replays module: recordings of what the browser shows (the SDK's `browsers.replays`: start,
// list, stop, download; plus delete and markers), kept on the daemon's side in <state>/replays,
// where agents' commands cannot write. Shaped like the other long-lived resources: the store
// (store.ts: the records on disk, read through their schema), one Recording per video
// (recording.ts: ffmpeg fed by the screencast) and the manager (manager.ts: start, stop, marks,
// pruning, and the recovery at start of what a killed daemon left: `stop_reason: recovered`).
// SIGTERM stops and finalizes every recording before the daemon exits.
import path from 'node:path';
import type { Browser } from '../chromium/types.js';
import type { Screencast } from '../computer/index.js';
import { NotFoundError } from '../core/errors.js';
import { baseUrlOf } from '../http/base-url.js';
import type { Route } from '../http/router.js';
import type { Module, ModuleContext } from '../module.js';
import { RecordManager } from './manager.js';
import { replayRoutes } from './routes.js';
import { ReplayStore } from './store.js';

export type { ReplayRecord } from './store.js';
export type { StartParams } from './manager.js';

export interface ReplaysDeps {
  /** The screencast of the page a person sees (the computer controls' current page). */
  computer: { readonly screencast: Screencast };
  /** The browser's state: recordings start only on a ready browser. */
  browser: Pick<Browser, 'ensureReady'>;
}

export interface Replays extends Module {
  readonly routes: Route[];
  /** Finalizes what a killed daemon left (in the background; close() waits for it). */
  start(): Promise<void>;
  /** Stops and finalizes every recording (SIGTERM). */
  close(): Promise<void>;
}

export function createReplays(ctx: ModuleContext, deps: ReplaysDeps): Replays {
  const { config } = ctx;
  const log = ctx.log.child({ module: 'replays' });
  const store = new ReplayStore(path.join(config.stateDir, 'replays'), log);
  const manager = new RecordManager({ limits: config.replays, store, screencast: deps.computer.screencast, ensureReady: () => deps.browser.ensureReady(), log });
  const found = (id: string): NonNullable<ReturnType<ReplayStore['get']>> => {
    const r = store.get(id);
    if (r === undefined) throw new NotFoundError(`no replay ${id}`);
    return r;
  };
  return {
    name: 'replays',
    routes: replayRoutes({
      limits: config.replays,
      start: (params, viewUrl) => manager.start(params, viewUrl),
      baseUrl: (req) => baseUrlOf(config.baseUrl, req, ctx.api),
      list: () => store.list().map((r) => ({ ...r })),
      get: (id) => ({ ...found(id) }),
      stop: (id) => manager.stop(id, 'requested'),
      remove: (id) => manager.remove(id),
      mark: (id, label) => manager.mark(id, label),
      videoFile: (id) => store.videoFile(id),
    }),
    start: async () => void manager.recover(),
    close: () => manager.close(),
  };
}
