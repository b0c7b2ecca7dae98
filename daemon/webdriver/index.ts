// The WebDriver module (issue 41, docs/webdriver.md): ChromeDriver owned by the daemon and attached
// to its Chromium, WebDriver classic and BiDi through the API, and the browser record's
// webdriver_ws_url. ChromeDriver starts on the first WebDriver request, runs as the WebDriver user
// in a network namespace of its own (driver.ts, relay.ts), and attaches to a DevTools endpoint the
// daemon serves it alone (devtools.ts). A Chromium restart ends ChromeDriver and every session.
import { Deadline } from '../core/deadline.js';
import type { Module, ModuleContext } from '../module.js';
import type { Browser } from '../chromium/index.js';
import type { Identity, Scope } from '../http/auth.js';
import type { Route } from '../http/router.js';
import { BidiBridge } from './bidi.js';
import { forwardClassic } from './classic.js';
import { serveDevtools } from './devtools.js';
import { ChromeDriver } from './driver.js';
import { webdriverRoutes } from './routes.js';
import { Sessions } from './sessions.js';

/** How long closing a session's tabs may take. */
const CLOSE_TABS_MS = 5000;
/** A BiDi message, either way. */
const BIDI_MAX_MESSAGE_BYTES = 256 * 1024 * 1024;

export interface WebDriverDeps {
  browser: Browser;
  /** Signs the token of a session's webSocketUrl: the caller's scopes among `narrowTo`. */
  issueToken(identity: Identity, narrowTo: readonly Scope[]): Promise<{ token: string }>;
  /** dist/daemon/webdriver/relay.js. */
  relayScript: string;
}

export interface WebDriver extends Module {
  routes: Route[];
  close(): Promise<void>;
  destroy(): void;
}

export function createWebDriver(ctx: ModuleContext, deps: WebDriverDeps): WebDriver {
  const { config } = ctx;
  const { browser } = deps;
  const log = ctx.log.child({ module: 'webdriver' });
  const sessions = new Sessions();
  const driver = new ChromeDriver({
    log,
    chromedriver: config.webdriver.chromedriver,
    userName: config.webdriver.user,
    agentUid: config.agent.user.uid,
    maySwitch: config.agent.maySwitch,
    relayScript: deps.relayScript,
    serveDevtools: (socketPath) => serveDevtools(socketPath, browser.cdpAccess, log),
    onExit: () => sessions.endAll('ChromeDriver exited: the WebDriver session is over'),
  });
  // A session belongs to one run of Chromium: a restart ends ChromeDriver, and so every session at once.
  browser.use({
    name: 'webdriver',
    onState: (state) => {
      if (state === 'ready' || driver.pid === null) return;
      sessions.endAll('Chromium restarted: the WebDriver session is over');
      void driver.stop();
    },
    links: ({ wsBase, cdpToken }) => ({ webdriver_ws_url: `${wsBase}/webdriver/session?jwt=${cdpToken}` }),
  });
  const closeTabs = async (targetIds: string[]): Promise<void> => {
    if (targetIds.length === 0) return;
    const deadline = Deadline.in(CLOSE_TABS_MS, 'closing the session\'s tabs');
    try {
      await browser.withCdp(async (cdp) => {
        for (const targetId of targetIds) await cdp.send('Target.closeTarget', { targetId }).catch(() => undefined); // closed already
      }, deadline);
    } catch (err) {
      log.warn({ event: 'webdriver_tabs_left', tabs: targetIds.length, err: (err as Error).message }, 'the tabs of an ended WebDriver session could not be closed');
    } finally {
      deadline.dispose();
    }
  };
  const driverSocket = (deadline: Deadline): Promise<string> => driver.socket(deadline);
  const httpBase = (host: unknown): string =>
    config.baseUrl ?? `http://${typeof host === 'string' && /^[A-Za-z0-9.[\]:-]{1,300}$/.test(host) ? host : `${ctx.api.host}:${ctx.api.port ?? 0}`}`;
  const bidi = new BidiBridge({ driverSocket, sessions, closeTabs }, BIDI_MAX_MESSAGE_BYTES);
  const routes = webdriverRoutes({
    bidi,
    classic: (req, bidiUrl) => forwardClassic(req, { driverSocket, sessions, closeTabs, bidiUrl }),
    bidiUrl: async (ctx, sessionId) => {
      const token = ctx.identity === null ? '' : (await deps.issueToken(ctx.identity, ['cdp'])).token;
      return `${httpBase(ctx.req.headers.host).replace(/^http/, 'ws')}/browsers/${encodeURIComponent(config.sessionId)}/webdriver/session/${encodeURIComponent(sessionId)}?jwt=${token}`;
    },
  });
  return {
    name: 'webdriver',
    routes,
    close: async () => {
      bidi.close();
      sessions.endAll('browserd is stopping');
      await driver.close();
    },
    destroy: () => {
      bidi.destroy();
      driver.destroy();
    },
  };
}
