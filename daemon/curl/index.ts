// Requests through the browser (/curl, /curl/raw): made by Chromium's own network stack.
import type { Browser } from '../chromium/index.js';
import type { Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import type { Route } from '../http/router.js';
import { BrowserFetcher } from './fetcher.js';
import { curlRoutes } from './routes.js';

export function createCurl(deps: { config: Config; log: Logger; browser: Browser; ownPorts(): number[] }): { routes: Route[] } {
  const fetcher = new BrowserFetcher({ config: deps.config, log: deps.log.child({ module: 'curl' }), browser: deps.browser });
  return { routes: curlRoutes({ config: deps.config, fetcher, ownPorts: deps.ownPorts }) };
}
