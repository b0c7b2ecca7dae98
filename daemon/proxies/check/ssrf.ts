// The guard of a check's `url`: only http and https, no credentials, no port 0, no `localhost` name, and every
// address the host resolves to must be public. An address is public when ipaddr.js classes it as
// `unicast` (IPv4-mapped IPv6 is judged as the IPv4 it carries) and none of the few rules below
// refuses it. ipaddr.js refuses loopback, private, link-local (and 169.254.169.254, the metadata
// address), CGNAT, unique-local, site-local, 6to4, NAT64, Teredo, ORCHID, discard, documentation,
// benchmarking, multicast, unspecified, reserved, broadcast...; the rules add what it calls
// unicast but is no public target (IPv4-compatible IPv6 such as ::7f00:1, and IPv6 outside the
// global unicast block). Numeric host forms (http://2130706433/, http://0x7f.1/) are normalized to
// dotted IPv4 by the WHATWG URL parser and then refused by the same rules. The check connects to
// the address that was judged here, never to one resolved later.
//
// Two steps: `parseCheckUrl` needs nothing but the text (400 at once, before a check slot is
// taken; an IP literal is judged here), `resolveTarget` looks the name up under the check's
// deadline (resolve.ts) and judges every address.
import net from 'node:net';
import ipaddr from 'ipaddr.js';
import { BadRequestError } from '../../core/errors.js';
import type { ResolveOptions, Resolver } from './resolve.js';
import { CheckFailure } from '../upstream/dial.js';

export interface CheckUrl {
  url: URL;
  /** The host name as in the URL (without IPv6 brackets): for SNI and the Host header. */
  hostname: string;
  port: number;
  /** The address when the host is an IP literal (already judged public), else null. */
  literal: string | null;
}

export interface GuardedTarget extends CheckUrl {
  /** The public address that was checked: the tunnel goes there (CONNECT address:port). */
  address: string;
}

/**
 * IANA's global unicast block (RFC 4291 §2.4; IANA "IPv6 Address Space": everything else is
 * reserved by the IETF, unique-local, link-local or multicast). Catches what ipaddr.js 2.5 calls
 * unicast in the rest of ::/8 (e.g. ::1:0:0:0) and in fe00::/9, and unallocated space.
 */
const GLOBAL_UNICAST_V6 = ipaddr.IPv6.parseCIDR('2000::/3');

/**
 * Ranges that ipaddr.js 2.5 classes as `unicast` but that are no public target: only those it
 * misses. It already names 0.0.0.0/8 (unspecified); 192.0.0.0/24, 192.0.2.0/24, 198.18.0.0/15,
 * 198.51.100.0/24, 203.0.113.0/24, 240.0.0.0/4 (reserved); 64:ff9b::/96 and 64:ff9b:1::/48
 * (rfc6052); 100::/64 (discard); 2001::/23 (reserved, with Teredo 2001::/32, benchmarking, AMT,
 * AS112, ORCHID 2001:10::/28 and ORCHIDv2 named inside it); 2001:db8::/32 (reserved); fc00::/7
 * (uniqueLocal); fe80::/10 (linkLocal); fec0::/10 (deprecatedSiteLocal). The REFUSED table of
 * test/proxies/check.test.ts holds an address of each, so an ipaddr.js that changes this fails it.
 */
const NOT_PUBLIC: readonly { name: string; cidr: [ipaddr.IPv6, number] }[] = [
  // RFC 4291 §2.5.5.1: IPv4-compatible IPv6 (deprecated); embeds an IPv4 address (::7f00:1 is ::127.0.0.1).
  { name: 'ipv4Compatible', cidr: ipaddr.IPv6.parseCIDR('::/96') },
];

/**
 * An address in one canonical form: IPv6 through the WHATWG serializer first (ipaddr.js reads
 * `::1.2.3.4` as IPv4-mapped, though it is IPv4-compatible), IPv4-mapped IPv6 as its IPv4.
 */
function parseAddress(address: string): ipaddr.IPv4 | ipaddr.IPv6 | null {
  if (net.isIPv4(address)) return ipaddr.IPv4.parse(address);
  if (!net.isIPv6(address)) return null;
  let canonical: string;
  try {
    canonical = new URL(`http://[${address}]/`).hostname.slice(1, -1);
  } catch {
    return null; // a zone index (fe80::1%eth0) and the like
  }
  const v6 = ipaddr.IPv6.parse(canonical);
  return v6.isIPv4MappedAddress() ? v6.toIPv4Address() : v6;
}

/** Why `address` may not be a check target (`not a public address (loopback)`), or null when it is public. */
function addressProblem(address: string): string | null {
  const parsed = parseAddress(address);
  if (parsed === null) return 'not an IP address';
  const range = parsed.range();
  if (range !== 'unicast') return `not a public address (${range})`;
  if (parsed.kind() === 'ipv6') {
    const v6 = parsed as ipaddr.IPv6;
    const hit = NOT_PUBLIC.find((r) => v6.match(r.cidr));
    if (hit !== undefined) return `not a public address (${hit.name})`;
    if (!v6.match(GLOBAL_UNICAST_V6)) return 'not a public address (outside the global unicast block 2000::/3)';
  }
  return null;
}

function bad(why: string): BadRequestError {
  return BadRequestError.field('url', why);
}

/** `localhost` and `*.localhost` are loopback by definition (RFC 6761 §6.3): refused without a lookup. */
function isLocalhostName(hostname: string): boolean {
  const h = hostname.toLowerCase().replace(/\.$/, '');
  return h === 'localhost' || h.endsWith('.localhost');
}

/** The checks that need no lookup: 400 bad_request for a URL that can never be a check target. */
export function parseCheckUrl(raw: string): CheckUrl {
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
  // The URL parser accepts :0, which no server listens on (a CONNECT to port 0 is no target).
  if (port === 0) throw bad('has port 0, which is no valid target port (1 to 65535)');
  if (net.isIP(hostname) !== 0) {
    // A literal (the URL parser already turned numeric IPv4 forms into dotted IPv4).
    const why = addressProblem(hostname);
    if (why !== null) throw bad(`${hostname} is ${why}`);
    return { url, hostname, port, literal: (parseAddress(hostname) as ipaddr.IPv4 | ipaddr.IPv6).toString() };
  }
  if (isLocalhostName(hostname)) throw bad(`${hostname} is a loopback name (RFC 6761)`);
  return { url, hostname, port, literal: null };
}

/**
 * The address the check connects to: the literal, or the first address of the name (IPv4 first)
 * once every address it resolves to was judged public (else 400). A failed lookup is a
 * CheckFailure (`timeout` or `target_unreachable`) from the resolver.
 */
export async function resolveTarget(target: CheckUrl, resolve: Resolver, opts: ResolveOptions): Promise<GuardedTarget> {
  if (target.literal !== null) return { ...target, address: target.literal };
  const addresses = await resolve(target.hostname, opts);
  if (addresses.length === 0) throw new CheckFailure('target_unreachable', `cannot resolve ${target.hostname}: no address`, false);
  for (const a of addresses) {
    const why = addressProblem(a);
    if (why !== null) throw bad(`${target.hostname} resolves to ${a}, which is ${why}`);
  }
  return { ...target, address: (parseAddress(addresses[0] as string) as ipaddr.IPv4 | ipaddr.IPv6).toString() };
}
