// Which URLs a request through the browser may name: http and https only, without credentials,
// and never one of the daemon's own ports on a loopback or local address (the rule of the browser's
// forwarding proxy, proxies/forwarder/route.ts, which also refuses a name that resolves there).
import { BadRequestError } from '../core/errors.js';
import { isLocalAddress, isLoopbackHost } from '../proxies/forwarder/route.js';

/** The target as a URL, or BadRequestError naming `field`. */
export function checkTarget(raw: string, field: string, ownPorts: readonly number[]): URL {
  if (!URL.canParse(raw)) throw BadRequestError.field(field, 'is not an absolute URL');
  const url = new URL(raw);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw BadRequestError.field(field, `must be http or https, not ${url.protocol.slice(0, -1)}`);
  if (url.username !== '' || url.password !== '') throw BadRequestError.field(field, 'must carry no credentials (user:password@): send an Authorization header instead');
  const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (ownPorts.includes(port) && (isLoopbackHost(host) || isLocalAddress(host))) {
    throw BadRequestError.field(field, `${url.host} is a port of browserd itself; the browser never connects there`);
  }
  return url;
}
