// The egress concern: where the browser, and the agent's processes, may connect (docs/egress.md).
// The policy (policy.ts) is kept in the state dir (store.ts) and judged by checker.ts; the
// forwarding proxy asks `gate` for every target; state.ts writes the managed policy that pins
// Chromium to the forwarding proxy and the nftables rules that hold the agent's uid to it.
// Public face: createEgress() → { routes, gate, processEnv(), addService(), start(), serve(), close() }.
import { ConfigError } from '../core/config.js';
import type { Route } from '../http/router.js';
import type { Browser } from '../chromium/types.js';
import type { TelemetrySink } from '../telemetry/index.js';
import type { Module, ModuleContext } from '../module.js';
import type { EgressGate } from '../proxies/forwarder/route.js';
import { canonicalIp } from '../proxies/store/bypass.js';
import { Nftables, type Service } from './nftables.js';
import { egressRoutes } from './routes.js';
import { EgressState } from './state.js';
import { PolicyStore } from './store.js';

export type { Denial } from './checker.js';

interface EgressDeps {
  /** CDP commands that would go around the forwarding proxy are refused there while filtered (its CDP policy). */
  browser: Browser;
  /** The forwarding proxy's port on 127.0.0.1 (null before it listens). */
  forwarderPort(): number | null;
  /** A decision while filtered (and every refusal): a telemetry event. */
  telemetry?: TelemetrySink;
  /** The policy changed: connections opened under the old one must end (the forwarding proxy's). */
  onChange?(): void;
}

export interface Egress extends Module {
  readonly routes: Route[];
  /** What the forwarding proxy asks for every target. */
  readonly gate: EgressGate;
  /** The proxy variables of a process the API starts (while filtered). */
  processEnv(): Record<string, string>;
  /** Applies the stored policy (Chromium's policy file, nftables): after the forwarding proxy listens, before Chromium starts. */
  start(): Promise<void>;
  /**
   * A loopback service of the daemon the browser reaches through the forwarding proxy (the extension
   * update server): allowed whatever the policy says (it is the daemon's, not the world).
   */
  addService(provider: () => Service | null): void;
  /** Once the API listens: the agent's processes (the Playwright runners) may reach it; the rules are installed again. */
  serve(): void;
  close(): Promise<void>;
}

/** A wildcard listen address is reached on loopback. */
function reachable(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  if (host === '::' || host === '::0') return '::1';
  return host;
}

export function createEgress(ctx: ModuleContext, deps: EgressDeps): Egress {
  const { config } = ctx;
  const log = ctx.log.child({ module: 'egress' });
  let api: Service | null = null;
  let store: PolicyStore;
  try {
    store = PolicyStore.open(config.stateDir, log);
  } catch (err) {
    throw new ConfigError('BROWSERD_STATE_DIR', `cannot open the egress policy: ${(err as Error).message}`);
  }
  const state = new EgressState({
    store,
    nft: new Nftables(config.egress.nftables ? 'auto' : 'off'),
    policyDir: config.chromium.policyDir,
    uid: config.agent.user.uid,
    log,
    forwarderPort: deps.forwarderPort,
    services: () => (api === null ? [] : [api]),
    onChange: () => deps.onChange?.(),
  });
  const services: (() => Service | null)[] = [];
  /** Whether every address is one of the daemon's own services on `port`. */
  const ownService = (port: number, addresses: readonly string[]): boolean =>
    addresses.length > 0 && services.some((p) => {
      const s = p();
      return s !== null && s.port === port && addresses.every((a) => canonicalIp(a) === s.address);
    });
  const gate: EgressGate = {
    byName: (host, port) => {
      const literal = canonicalIp(host);
      return literal !== null && ownService(port, [literal]) ? null : state.current.byName(host);
    },
    byAddresses: (host, port, addresses) => (ownService(port, addresses) ? null : state.current.byAddresses(host, addresses)),
    decided({ host, port, via, addresses, denial }) {
      if (!state.current.filtered && denial === null) return;
      deps.telemetry?.emit('network_policy_decision', 'system', { kind: 'kernel_api', event: 'egress_policy' }, { decision: denial === null ? 'allowed' : 'denied', host, port, via, ...(addresses !== null ? { addresses } : {}), ...(denial !== null ? { reason: denial.reason, message: denial.message } : {}) });
    },
  };
  deps.browser.use({
    name: 'egress',
    cdpPolicy: {
      refuse(_channel, method, params) {
        if (!state.current.filtered) return null;
        if (method === 'Target.createBrowserContext' && (params.proxyServer !== undefined || params.proxyBypassList !== undefined)) {
          return 'the egress policy is filtered: a browser context with its own proxyServer or proxyBypassList would go around the forwarding proxy that enforces it (docs/egress.md)';
        }
        return null;
      },
    },
  });
  return {
    name: 'egress',
    routes: egressRoutes(state),
    gate,
    processEnv: () => state.processEnv(),
    addService: (provider) => void services.push(provider),
    start: () => state.apply(),
    serve() {
      api = { address: reachable(ctx.api.host), port: ctx.api.port ?? 0 };
      if (state.current.filtered) {
        state.apply().catch((err: unknown) => log.error({ event: 'egress_apply_failed', err }, 'the egress rules could not be installed again with the API address'));
      }
    },
    close: () => state.close(),
  };
}
