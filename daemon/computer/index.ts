// The computer-controls module: screenshots, mouse, keyboard and clipboard of the browser for agents
// that act like a person (computer-use models), in headless mode (the default) and headful alike,
// by driving Chromium itself over CDP (no X server, no xdotool). Its public face is createComputer().
import type { Browser } from '../chromium/types.js';
import type { Module, ModuleContext } from '../module.js';
import type { Route } from '../http/router.js';
import type { CdpClient } from '../cdp/client.js';
import type { Deadline } from '../core/deadline.js';

/** The page a person sees: the daemon's client of the run, the page's session and its viewport in CSS pixels. */
export interface ShownPage {
  cdp: CdpClient;
  sessionId: string;
  width: number;
  height: number;
}
import { Computer } from './controller.js';
import { computerRoutes } from './routes.js';
import { dispatchLiveInput, liveState, type LiveInput, type LiveState } from './live-input.js';

export { liveInputSchema, type LiveInput, type LiveState } from './live-input.js';

export interface ComputerModule extends Module {
  readonly routes: Route[];
  /** The page a person sees (the one the controls act on), with its session and viewport (CSS px). */
  shownPage(deadline: Deadline): Promise<ShownPage>;
  /** A live viewer's input, on the controls' one input queue (the agent's and the person's never interleave); `copy` answers the selected text. */
  liveInput(msg: LiveInput, signal: AbortSignal): Promise<string | null>;
  /** The tabs and the current page's URL and history, for the live view. */
  liveState(signal: AbortSignal): Promise<LiveState>;
  close(): Promise<void>;
}

export function createComputer(ctx: ModuleContext, deps: { browser: Browser }): ComputerModule {
  const log = ctx.log.child({ module: 'computer' });
  const limits = ctx.config.computer;
  const computer = new Computer({ browser: deps.browser, log, metrics: ctx.metrics, limits });
  return {
    name: 'computer',
    routes: computerRoutes({ computer, limits, log }),
    shownPage: async (deadline) => {
      const { cdp, page } = await computer.shownPage(deadline);
      return { cdp, sessionId: page.sessionId, width: Math.round(page.viewport.width), height: Math.round(page.viewport.height) };
    },
    liveInput: (msg, signal) => dispatchLiveInput(computer, msg, signal),
    liveState: (signal) => liveState(computer, signal),
    // Nothing of its own to stop: its sessions end with Chromium's run.
    close: async () => undefined,
  };
}
