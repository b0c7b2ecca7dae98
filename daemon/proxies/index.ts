// The proxies concern: a store that loses nothing, health checks through the proxy with an SSRF
// guard, and the browser's way out: the forwarding proxy (forwarder/) that Chromium sends all its
// traffic to, routed through the active proxy (PATCH /browsers/{id}) or directly.
// Public face: createProxies() → { routes, updatePart, start(), forwarderPort(), active(), setApiPort(), close(), destroy() }.
import { ConfigError, type Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import type { Metrics } from '../core/metrics.js';
import type { Route } from '../http/router.js';
import { ActiveControl } from './active.js';
import { ProxyChecker } from './check/check.js';
import { Forwarder } from './forwarder/forwarder.js';
import { createLookup, type EgressGate } from './forwarder/route.js';
import type { ForwarderStatus } from './forwarder/stats.js';
import { browserUpdatePart, proxyRoutes } from './routes.js';
import type { BrowserUpdatePart } from '../chromium/types.js';
import { createResolver, type Resolver } from './check/resolve.js';
import { ProxyStore } from './store/store.js';

export type { ForwarderStatus, LastError } from './forwarder/stats.js';

interface ProxiesDeps {
  config: Config;
  log: Logger;
  metrics: Metrics;
  /** How check URLs' hosts are resolved; default: DNS under the check's deadline (in the test build, its hooks first: core/test-hooks.ts). */
  resolver?: Resolver;
  /** The egress policy the forwarding proxy asks for every target (daemon/egress). */
  egress?: EgressGate;
  /** The browser's proxy changed (ids only). */
  onSwitch?: (s: { proxy_id: string | null; previous: string | null }) => void;
}

interface Proxies {
  readonly routes: Route[];
  /** The proxy's fields of PATCH /browsers/{id} (proxy_id), for the browser module's addUpdateFields. */
  readonly updatePart: BrowserUpdatePart;
  /** Starts the forwarding proxy on 127.0.0.1 (an ephemeral port). Call once, before Chromium launches. */
  start(): Promise<void>;
  /** The forwarding proxy's port on 127.0.0.1, for Chromium's `--proxy-server=http://127.0.0.1:<port>`; null before start(). */
  forwarderPort(): number | null;
  /** The browser's active proxy and the last failure of a connection to it (for GET /browsers/{id} `proxy`); null when direct. */
  active(): ForwarderStatus | null;
  /** The daemon's own API port, once it listens: the forwarding proxy never connects there. */
  setApiPort(port: number): void;
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

export function createProxies(deps: ProxiesDeps): Proxies {
  const { config } = deps;
  const log = deps.log.child({ module: 'proxies' });
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
  const checker = new ProxyChecker({ config, log, metrics: deps.metrics, resolver });
  let apiPort: number | null = config.listen.port === 0 ? null : config.listen.port;
  const forwarder = new Forwarder({
    log: log.child({ component: 'forwarder' }),
    metrics: deps.metrics,
    dialTimeoutMs: config.proxies.dialTimeoutMs,
    lookup: createLookup(config.testHooks.resolveTable),
    apiPort: () => apiPort,
    // Chromium runs as the agent user: only that uid's connections are served (not the daemon's own).
    uid: servedUid(config, log),
    egress: deps.egress,
  });
  const active = new ActiveControl(store, forwarder, config.proxies.providers, log, deps.onSwitch);
  active.restore();
  let closing: Promise<void> | null = null;
  return {
    routes: proxyRoutes({ store, checker, active }),
    updatePart: browserUpdatePart({ active }),
    async start() {
      await forwarder.listen();
    },
    forwarderPort: () => forwarder.port,
    active: () => active.status(),
    setApiPort(port) {
      apiPort = port;
    },
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
