// The computer-controls module: screenshots, mouse, keyboard and clipboard of the browser for agents
// that act like a person (computer-use models), in headless mode (the default) and headful alike,
// by driving Chromium itself over CDP (no X server, no xdotool); neutral input and tab operations and
// the one screencast of the shown page for the other modules (the live view, replays). Its public face is createComputer().
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
import { tabsState, withInput, type PageInput, type TabsState } from './input.js';
import { Screencast } from './screencast.js';

export type { KeyEvent, PageInput, TabsState } from './input.js';
export { Screencast, type Frame } from './screencast.js';

export interface ComputerModule extends Module {
  readonly routes: Route[];
  /** The page a person sees (the one the controls act on), with its session and viewport (CSS px). */
  shownPage(deadline: Deadline): Promise<ShownPage>;
  /** One screencast of the shown page for every consumer (recordings, live viewers): it runs while someone subscribes. */
  readonly screencast: Screencast;
  /** Runs `fn` with neutral input and tab operations on the current page, on the controls' one input queue (an agent's actions and these never interleave); `action` names it in the metrics. */
  input<T>(action: string, signal: AbortSignal, fn: (input: PageInput) => Promise<T>): Promise<T>;
  /** The tabs and the current page's URL and history (reads only: not on the input queue). */
  tabs(action: string, signal: AbortSignal): Promise<TabsState>;
  close(): Promise<void>;
}

export function createComputer(ctx: ModuleContext, deps: { browser: Browser }): ComputerModule {
  const log = ctx.log.child({ module: 'computer' });
  const limits = ctx.config.computer;
  const computer = new Computer({ browser: deps.browser, log, metrics: ctx.metrics, limits });
  const shownPage = async (deadline: Deadline): Promise<ShownPage> => {
    const { cdp, page } = await computer.shownPage(deadline);
    return { cdp, sessionId: page.sessionId, width: Math.round(page.viewport.width), height: Math.round(page.viewport.height) };
  };
  return {
    name: 'computer',
    routes: computerRoutes({ computer, limits, log }),
    shownPage,
    screencast: new Screencast({ log, currentPage: shownPage }),
    input: (action, signal, fn) => withInput(computer, action, signal, fn),
    tabs: (action, signal) => tabsState(computer, action, signal),
    // Nothing of its own to stop: its sessions end with Chromium's run.
    close: async () => undefined,
  };
}
