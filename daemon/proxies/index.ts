// The proxies concern: a store that loses nothing, health checks through the proxy with an SSRF
// guard, and the browser's way out: the forwarding proxy (forwarder/) that Chromium sends all its
// traffic to, routed through the active proxy (PATCH /browsers/{id}) or directly.
// Public face: createProxies() → { routes, start(), forwarderPort(), active(), setApiPort(), close(), destroy() }.
import { ConfigError, type Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import type { Metrics } from '../core/metrics.js';
import type { RequestContext, Route } from '../http/router.js';
import { ActiveControl } from './active.js';
import { ProxyChecker } from './check/check.js';
import { Forwarder } from './forwarder/forwarder.js';
import { createLookup } from './forwarder/route.js';
import type { ForwarderStatus } from './forwarder/stats.js';
import { proxyRoutes } from './routes.js';
import { createResolver, hookTable, type Resolver } from './check/resolve.js';
import { ProxyStore } from './store/store.js';

export type { ForwarderStatus, LastError } from './forwarder/stats.js';

export interface ProxiesDeps {
  config: Config;
  log: Logger;
  metrics: Metrics;
  /** How check URLs' hosts are resolved; default: DNS under the check's deadline (or BROWSERD_TEST_HOOKS `resolve`, `dns`). */
  resolver?: Resolver;
  /** The body of GET /browsers/{id}, answered by PATCH /browsers/{id} too (with `proxy_id` and `proxy` set here); default {}. */
  browserBody?: () => Record<string, unknown>;
  /** The `profile` part of PATCH /browsers/{id} (the profiles module). */
  profileUpdate?: (value: unknown, ctx: RequestContext) => Promise<Record<string, unknown>>;
}

export interface Proxies {
  readonly routes: Route[];
  /** Starts the forwarding proxy on 127.0.0.1 (an ephemeral port). Call once, before Chromium launches. */
  start(): Promise<void>;
  /** The forwarding proxy's port on 127.0.0.1, for Chromium's `--proxy-server=http://127.0.0.1:<port>`; null before start(). */
  forwarderPort(): number | null;
  /** The browser's active proxy and the last failure of a connection to it (for GET /browsers/{id} `proxy`); null when direct. */
  active(): ForwarderStatus | null;
  /** The daemon's own API port, once it listens: the forwarding proxy never connects there. */
  setApiPort(port: number): void;
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
  for (const hook of ['resolve', 'dns', 'direct-to'].filter((h) => config.testHooks.has(h))) {
    log.warn({ event: 'test_hook', hook }, `BROWSERD_TEST_HOOKS ${hook} is set: check URL hosts (and the forwarding proxy's direct connections) may resolve or connect to test addresses`);
  }
  const checker = new ProxyChecker({ config, log, metrics: deps.metrics, resolver });
  let apiPort: number | null = config.listen.port === 0 ? null : config.listen.port;
  const forwarder = new Forwarder({
    log: log.child({ component: 'forwarder' }),
    metrics: deps.metrics,
    dialTimeoutMs: config.proxies.dialTimeoutMs,
    lookup: createLookup(hookTable(config.testHooks)),
    apiPort: () => apiPort,
  });
  const active = new ActiveControl(store, forwarder, config.proxies.providers, log);
  active.restore();
  let closing: Promise<void> | null = null;
  return {
    routes: proxyRoutes({ store, checker, active, browserBody: deps.browserBody ?? (() => ({})), profileUpdate: deps.profileUpdate }),
    async start() {
      await forwarder.listen();
    },
    forwarderPort: () => forwarder.port,
    active: () => active.status(),
    setApiPort(port) {
      apiPort = port;
    },
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
