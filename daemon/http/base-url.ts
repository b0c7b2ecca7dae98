// The one base URL of links the daemon hands out (cdp_ws_url's direct form, browser_live_view_url,
// replay_view_url): BROWSERD_BASE_URL when set (the address clients reach the VM at through a
// proxy), else http:// and the request's Host header when it is a plain host[:port], else the
// address the daemon listens on.
import type { IncomingMessage } from 'node:http';
import type { ApiAddress } from '../module.js';

const PLAIN_HOST = /^[A-Za-z0-9.[\]:-]{1,300}$/;

/** A Host header that is a plain host[:port], else null (never a URL's other parts). */
export function plainHost(host: unknown): string | null {
  return typeof host === 'string' && PLAIN_HOST.test(host) ? host : null;
}

/** host:port of the listen address (IPv6 in brackets). */
export function listenHostPort(api: ApiAddress): string {
  return `${api.host.includes(':') ? `[${api.host}]` : api.host}:${api.port ?? 0}`;
}

export function baseUrlOf(baseUrl: string | null, req: IncomingMessage, api: ApiAddress): string {
  return baseUrl ?? `http://${plainHost(req.headers.host) ?? listenHostPort(api)}`;
}
