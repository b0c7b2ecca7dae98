// Requests through the browser (/curl, /curl/raw): made by Chromium's own network stack.
import type { Browser } from '../chromium/index.js';
import type { Route } from '../http/router.js';
import type { Module, ModuleContext } from '../module.js';
import { BrowserFetcher } from './fetcher.js';
import { curlRoutes } from './routes.js';

export function createCurl(ctx: ModuleContext, deps: { browser: Browser; proxies: { forwarderPort(): number | null } }): Module & { routes: Route[] } {
  const { config } = ctx;
  const fetcher = new BrowserFetcher({ config, log: ctx.log.child({ module: 'curl' }), browser: deps.browser, metrics: ctx.metrics });
  // Requests through the browser never target the daemon's own ports (its API, once it listens; the forwarding proxy).
  const ownPorts = (): number[] => [ctx.api.port, deps.proxies.forwarderPort()].filter((p): p is number => p !== null);
  return { name: 'curl', routes: curlRoutes({ config, fetcher, ownPorts }) };
}
