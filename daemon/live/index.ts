// The live view: a page a person opens to watch the browser and take it over (GET
// /browsers/{id}/live), its WebSocket and its message protocol (input.ts). Its frames are the
// computer controls' screencast (one source for recordings and viewers), its input the controls'
// neutral input operations (one input queue for the agent and the person). Its public face is createLive().
import type { ComputerModule } from '../computer/index.js';
import type { Module, ModuleContext } from '../module.js';
import type { Route } from '../http/router.js';
import { liveRoutes } from './routes.js';
import { LiveHub } from './viewers.js';

export interface LiveDeps {
  /** The screencast, the input operations and the tabs. */
  computer: ComputerModule;
}

export interface LiveModule extends Module {
  readonly routes: Route[];
  close(): Promise<void>;
}

export function createLive(ctx: ModuleContext, deps: LiveDeps): LiveModule {
  const log = ctx.log.child({ module: 'live' });
  const hub = new LiveHub({ screencast: deps.computer.screencast, computer: deps.computer, log });
  // The link to hand a person, browser_live_view_url with a token of the live scopes, is made by the
  // browser module's GET /browsers/{id} (its session tokens).
  return {
    name: 'live',
    routes: liveRoutes(hub),
    close: async () => hub.close(),
  };
}
