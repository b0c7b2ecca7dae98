// The proxies concern: a store that loses nothing, and health checks through the proxy with an
// SSRF guard. Public face: createProxies() → { routes, close(), destroy() }.
import { ConfigError, type Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import type { Metrics } from '../core/metrics.js';
import type { Route } from '../http/router.js';
import { ProxyChecker } from './check.js';
import { proxyRoutes } from './routes.js';
import { createResolver, type Resolver } from './resolve.js';
import { ProxyStore } from './store.js';

export interface ProxiesDeps {
  config: Config;
  log: Logger;
  metrics: Metrics;
  /** How check URLs' hosts are resolved; default: DNS under the check's deadline (or BROWSERD_TEST_HOOKS `resolve`, `dns`). */
  resolver?: Resolver;
}

export interface Proxies {
  readonly routes: Route[];
  /** Cancels running checks, waits for them and for every pending store write. Idempotent. */
  close(): Promise<void>;
  /** Cancels running checks now. Idempotent. */
  destroy(): void;
}

/**
 * Opens `<stateDir>/proxies.json` synchronously (a broken file is set aside and logged); a state
 * dir that cannot be read or written is a ConfigError naming BROWSERD_STATE_DIR.
 */
export function createProxies(deps: ProxiesDeps): Proxies {
  const log = deps.log.child({ module: 'proxies' });
  let store: ProxyStore;
  try {
    store = ProxyStore.open(deps.config.stateDir, log);
  } catch (err) {
    throw new ConfigError('BROWSERD_STATE_DIR', `cannot open the proxy store: ${(err as Error).message}`);
  }
  const resolver = deps.resolver ?? createResolver(deps.config.testHooks);
  for (const hook of ['resolve', 'dns'].filter((h) => deps.config.testHooks.has(h))) {
    log.warn({ event: 'test_hook', hook }, `BROWSERD_TEST_HOOKS ${hook} is set: check URL hosts may resolve to test addresses`);
  }
  const checker = new ProxyChecker({ config: deps.config, log, metrics: deps.metrics, resolver });
  let closing: Promise<void> | null = null;
  return {
    routes: proxyRoutes({ store, checker }),
    close() {
      closing ??= (async () => {
        await checker.close();
        await store.idle();
      })();
      return closing;
    },
    destroy() {
      checker.destroy();
    },
  };
}
