// The proxies concern: a store that loses nothing, health checks through the proxy with an SSRF
// guard, and the browser's way out: the forwarding proxy (forwarder/) that Chromium sends all its
// traffic to, routed through the active proxy (PATCH /browsers/{id}) or directly.
// Public face: createProxies() → a module { routes, start(), forwarderPort(), active(), close(), destroy() }; it adds proxy_id to the browser.
import { ConfigError, type Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import type { Browser } from '../chromium/types.js';
import type { Module, ModuleContext } from '../module.js';
import type { TelemetrySink } from '../telemetry/index.js';
import type { Route } from '../http/router.js';
import { ActiveControl } from './active.js';
import { ProxyChecker } from './check/check.js';
import { Forwarder } from './forwarder/forwarder.js';
import { createLookup, type EgressGate } from './forwarder/route.js';
import type { ForwarderStatus } from './forwarder/stats.js';
import { browserUpdatePart, proxyRoutes } from './routes.js';
import { createResolver, type Resolver } from './check/resolve.js';
import { ProxyStore } from './store/store.js';

export type { ForwarderStatus, LastError } from './forwarder/stats.js';

interface ProxiesDeps {
  /** The browser: its --proxy-server port, PATCH proxy_id, GET's `proxy`. */
  browser: Browser;
  /** The browser's proxy changed (proxy_switched). */
  telemetry?: TelemetrySink;
  /** How check URLs' hosts are resolved; default: DNS under the check's deadline (in the test build, its hooks first: core/test-hooks.ts). */
  resolver?: Resolver;
  /** The egress policy the forwarding proxy asks for every target (daemon/egress). */
  egress?: EgressGate;
}

export interface Proxies extends Module {
  readonly routes: Route[];
  /** Starts the forwarding proxy on 127.0.0.1 (an ephemeral port): before Chromium launches. */
  start(): Promise<void>;
  /** The forwarding proxy's port on 127.0.0.1, for Chromium's `--proxy-server=http://127.0.0.1:<port>`; null before start(). */
  forwarderPort(): number | null;
  /** The browser's active proxy and the last failure of a connection to it (for GET /browsers/{id} `proxy`); null when direct. */
  active(): ForwarderStatus | null;
  /** Closes every connection of the browser to the forwarding proxy (the rules changed: the egress policy); Chromium reconnects. */
  resetConnections(why: string): void;
  /** Cancels running checks, closes the forwarding proxy, waits for them and for every pending store write. Idempotent. */
  close(): Promise<void>;
  /** Cancels running checks and closes the forwarding proxy's connections now. Idempotent. */
  destroy(): void;
}

/**
 * Opens `<stateDir>/proxies.json` synchronously (a broken file is set aside and logged) and routes
 * the forwarding proxy through the stored active proxy; a state dir that cannot be read or written
 * is a ConfigError naming BROWSERD_STATE_DIR.
 */
/** The agent user's uid; the test hook `forwarder-uid=<uid>` names another (the suite's own clients run as root). */
function servedUid(config: Config, log: Logger): number {
  const uid = config.testHooks.forwarderUid;
  if (uid === undefined) return config.agent.user.uid;
  log.warn({ event: 'test_hook', uid }, `a test hook is set: the forwarding proxy serves uid ${uid}, not the agent user's`);
  return uid;
}

export function createProxies(ctx: ModuleContext, deps: ProxiesDeps): Proxies {
  const { config, metrics, api } = ctx;
  const log = ctx.log.child({ module: 'proxies' });
  let store: ProxyStore;
  try {
    store = ProxyStore.open(config.stateDir, log);
  } catch (err) {
    throw new ConfigError('BROWSERD_STATE_DIR', `cannot open the proxy store: ${(err as Error).message}`);
  }
  const resolver = deps.resolver ?? createResolver(config.testHooks);
  if (config.testHooks.names.length > 0) {
    log.warn({ event: 'test_hook', hooks: config.testHooks.names }, 'BROWSERD_TEST_HOOKS is set (the test build): check URL hosts and direct connections may resolve or connect to test addresses');
  }
  const checker = new ProxyChecker({ config, log, metrics, resolver });
  const forwarder = new Forwarder({
    log: log.child({ component: 'forwarder' }),
    metrics,
    dialTimeoutMs: config.proxies.dialTimeoutMs,
    lookup: createLookup(config.testHooks.resolveTable),
    // The daemon's own API port (once it listens): the forwarding proxy never connects there.
    apiPort: () => api.port,
    // Chromium runs as the agent user: only that uid's connections are served (not the daemon's own).
    uid: servedUid(config, log),
    egress: deps.egress,
  });
  const telemetry = deps.telemetry;
  const onSwitch = telemetry === undefined ? undefined : (sw: { proxy_id: string | null; previous: string | null }): void => telemetry.emit('proxy_switched', 'system', { kind: 'kernel_api', event: 'proxy_switch' }, sw);
  const active = new ActiveControl(store, forwarder, config.proxies.providers, log, onSwitch);
  active.restore();
  let closing: Promise<void> | null = null;
  deps.browser.use({
    name: 'proxies',
    proxyPort: () => forwarder.port,
    update: browserUpdatePart({ active }), // PATCH /browsers/{id} proxy_id
    snapshot: () => {
      const status = active.status();
      return status === null ? { proxy: null } : { proxy_id: status.id, proxy: status };
    },
  });
  return {
    name: 'proxies',
    routes: proxyRoutes({ store, checker, active }),
    async start() {
      await forwarder.listen();
    },
    forwarderPort: () => forwarder.port,
    active: () => active.status(),
    resetConnections: (why) => forwarder.reset(why),
    close() {
      closing ??= (async () => {
        await forwarder.close();
        await checker.close();
        await active.idle();
        await store.idle();
      })();
      return closing;
    },
    destroy() {
      checker.destroy();
      forwarder.destroy();
    },
  };
}
