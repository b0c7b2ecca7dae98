// The guard of a check's `url`: only http and https, no credentials, and every address the host
// resolves to must be public unicast by ipaddr.js (IPv4-mapped IPv6 is judged as the IPv4 it
// carries). That refuses loopback, private, link-local (and 169.254.169.254, the metadata
// address), CGNAT, unique-local, 6to4, NAT64, Teredo, multicast, unspecified, reserved,
// broadcast... Numeric host forms (http://2130706433/, http://0x7f.1/) are normalized to dotted
// IPv4 by the WHATWG URL parser and then refused by the same range check. The check connects to
// the address that was judged here, never to one resolved later.
import { lookup } from 'node:dns/promises';
import ipaddr from 'ipaddr.js';
import { BadRequestError, OperationFailedError } from '../http/errors.js';

/** Every address `hostname` resolves to. */
export type Resolver = (hostname: string) => Promise<string[]>;

export interface GuardedTarget {
  url: URL;
  /** The host name as in the URL (without IPv6 brackets): for SNI and the Host header. */
  hostname: string;
  /** The public address that was checked: the tunnel goes there (CONNECT address:port). */
  address: string;
  port: number;
}

export const defaultResolver: Resolver = async (hostname) => (await lookup(hostname, { all: true })).map((a) => a.address);

/**
 * The daemon's resolver. For the test suite only: BROWSERD_TEST_HOOKS `resolve=<host>:<addr>[/<addr>...][;<host>:...]`
 * answers those host names with those addresses (so a test can make a name "public" while every
 * byte stays on loopback); other names go to the system resolver. Never set it in production.
 */
export function createResolver(testHooks: ReadonlyMap<string, string>): Resolver {
  const spec = testHooks.get('resolve');
  if (spec === undefined || spec === '') return defaultResolver;
  const table = new Map<string, string[]>();
  for (const entry of spec.split(';').filter(Boolean)) {
    const colon = entry.indexOf(':');
    if (colon <= 0) continue;
    table.set(entry.slice(0, colon).toLowerCase(), entry.slice(colon + 1).split('/').filter(Boolean));
  }
  return async (hostname) => table.get(hostname.toLowerCase()) ?? defaultResolver(hostname);
}

/** Why `address` may not be a check target (`not a public address (loopback)`), or null when it is public unicast. */
export function addressProblem(address: string): string | null {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = ipaddr.process(address);
  } catch {
    return 'not an IP address';
  }
  const range = parsed.range();
  return range === 'unicast' ? null : `not a public address (${range})`;
}

function bad(why: string): BadRequestError {
  return BadRequestError.field('url', why);
}

export async function guardUrl(raw: string, resolve: Resolver): Promise<GuardedTarget> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw bad('is not an absolute URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw bad(`must be http or https, not ${url.protocol.replace(/:$/, '')}`);
  if (url.username !== '' || url.password !== '') throw bad('may not carry credentials');
  const hostname = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  if (hostname === '') throw bad('has no host');
  const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);

  let addresses: string[];
  if (ipaddr.isValid(hostname)) {
    // A literal (the URL parser already turned numeric IPv4 forms into dotted IPv4).
    addresses = [hostname];
  } else {
    try {
      addresses = await resolve(hostname);
    } catch (err) {
      throw new OperationFailedError('proxy_check_failed', `the check URL's host ${hostname} does not resolve`, {
        code: 'target_unreachable',
        message: `cannot resolve ${hostname}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      });
    }
    if (addresses.length === 0) {
      throw new OperationFailedError('proxy_check_failed', `the check URL's host ${hostname} does not resolve`, {
        code: 'target_unreachable',
        message: `${hostname} has no address`,
      });
    }
  }
  for (const a of addresses) {
    const why = addressProblem(a);
    if (why !== null) throw bad(a === hostname ? `${a} is ${why}` : `${hostname} resolves to ${a}, which is ${why}`);
  }
  return { url, hostname, address: ipaddr.process(addresses[0] as string).toString(), port };
}
