// The policy's decisions, in two steps, as the forwarder meets a target:
//   byName(host)          before any lookup: the lists by name (and a literal address in full)
//   byAddresses(host, as) once the name is resolved: every address it resolves to is judged, and
//                         the forwarder connects to one of those, never to one resolved later
// Order: refused always (link-local: 169.254.0.0/16 with the metadata address 169.254.169.254,
// fe80::/10; the unspecified addresses; AWS's IPv6 metadata fd00:ec2::254) > blocked_hosts >
// allowed_hosts > private addresses unless in allow_private. "Private" is every address that is no
// public unicast address (ipaddr.js's ranges: loopback, private, CGNAT, unique-local, reserved, ...).
import ipaddr from 'ipaddr.js';
import { canonicalIp, canonicalName } from '../proxies/store/bypass.js';
import type { EgressPolicy } from './policy.js';

export type DenyReason = 'always_refused' | 'blocked_host' | 'not_allowed' | 'private_address';

export interface Denial {
  reason: DenyReason;
  /** One line: what was refused and why. */
  message: string;
}

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number];

interface Matcher {
  star: boolean;
  names: Set<string>;
  suffixes: string[];
  ranges: Range[];
}

const ALWAYS_REFUSED: readonly { name: string; range: Range }[] = [
  { name: 'link-local (the metadata address 169.254.169.254 among them)', range: ipaddr.parseCIDR('169.254.0.0/16') },
  { name: 'link-local', range: ipaddr.parseCIDR('fe80::/10') },
  { name: 'the cloud metadata address', range: ipaddr.parseCIDR('fd00:ec2::254/128') },
  { name: 'unspecified (it reaches this machine)', range: ipaddr.parseCIDR('0.0.0.0/8') },
  { name: 'unspecified (it reaches this machine)', range: ipaddr.parseCIDR('::/128') },
];

const GLOBAL_UNICAST_V6: Range = ipaddr.IPv6.parseCIDR('2000::/3');

function compile(entries: readonly string[]): Matcher {
  const m: Matcher = { star: false, names: new Set(), suffixes: [], ranges: [] };
  for (const e of entries) {
    if (e === '*') m.star = true;
    else if (e.includes('/')) m.ranges.push(ipaddr.parseCIDR(e));
    else if (canonicalIp(e) !== null) m.ranges.push([ipaddr.parse(e), ipaddr.parse(e).kind() === 'ipv4' ? 32 : 128]);
    else if (e.startsWith('*.')) m.suffixes.push(e.slice(1));
    else m.names.add(e);
  }
  return m;
}

function inRanges(address: string, ranges: readonly Range[]): boolean {
  const a = ipaddr.parse(address);
  return ranges.some(([net, bits]) => net.kind() === a.kind() && a.match(net, bits));
}

function nameMatches(name: string, m: Matcher): boolean {
  return m.names.has(name) || m.suffixes.some((s) => name.endsWith(s) && name.length > s.length);
}

/** Why an address is never reached, or null. */
export function alwaysRefused(address: string): string | null {
  const c = canonicalIp(address);
  if (c === null) return null;
  const hit = ALWAYS_REFUSED.find((r) => inRanges(c, [r.range]));
  return hit === undefined ? null : hit.name;
}

/** The range name of a non-public address (`loopback`, `private`, ...), or null when it is public. */
export function privateRange(address: string): string | null {
  const c = canonicalIp(address);
  if (c === null) return 'not an IP address';
  const a = ipaddr.parse(c);
  const range = a.range();
  if (range !== 'unicast') return range;
  if (a.kind() === 'ipv6') {
    const v6 = a as ipaddr.IPv6;
    if (v6.match(ipaddr.IPv6.parseCIDR('::/96'))) return 'ipv4Compatible';
    if (!v6.match(GLOBAL_UNICAST_V6)) return 'outside the global unicast block';
  }
  return null;
}

/** A target host as the lists hold it: an address canonical, a name lower case in punycode. */
export function canonicalHost(host: string): { name: string | null; address: string | null } {
  const ip = canonicalIp(host);
  if (ip !== null) return { name: null, address: ip };
  return { name: canonicalName(host) ?? host.toLowerCase().replace(/\.$/, ''), address: null };
}

export class Checker {
  private readonly allowed: Matcher;
  private readonly allowPrivate: Matcher;
  private readonly blocked: Matcher;

  constructor(readonly policy: EgressPolicy) {
    this.allowed = compile(policy.allowed_hosts);
    this.allowPrivate = compile(policy.allow_private);
    this.blocked = compile(policy.blocked_hosts);
  }

  get filtered(): boolean {
    return this.policy.filtered;
  }

  /**
   * The decision that needs no lookup: null when the target may go on to be resolved (a name) or is
   * allowed (an address). Unfiltered, only the addresses refused always.
   */
  byName(host: string): Denial | null {
    const { name, address } = canonicalHost(host);
    if (address !== null) return this.byAddresses(host, [address]);
    if (!this.filtered) return null;
    const n = name as string;
    if (this.blocked.star || nameMatches(n, this.blocked)) return { reason: 'blocked_host', message: `${n} is in blocked_hosts` };
    // A name not listed may still be allowed by the ranges its addresses fall in: judged after the lookup.
    if (!this.allowed.star && !nameMatches(n, this.allowed) && this.allowed.ranges.length === 0) {
      return { reason: 'not_allowed', message: `${n} is not in allowed_hosts` };
    }
    return null;
  }

  /** The decision on every address `host` resolved to (an address target: itself). */
  byAddresses(host: string, addresses: readonly string[]): Denial | null {
    const { name } = canonicalHost(host);
    const label = name === null ? (addresses[0] as string) : `${name} (${addresses.join(', ')})`;
    if (addresses.length === 0) return { reason: 'not_allowed', message: `${label} resolves to no address` };
    const canon = addresses.map((a) => canonicalIp(a) ?? a);
    for (const a of canon) {
      const why = alwaysRefused(a);
      if (why !== null) return { reason: 'always_refused', message: `${label}: ${a} is ${why}, never reached whatever the policy says` };
    }
    if (!this.filtered) return null;
    const byName = name !== null;
    if (this.blocked.star || (byName && nameMatches(name, this.blocked))) return { reason: 'blocked_host', message: `${label} is in blocked_hosts` };
    const blockedAt = canon.find((a) => inRanges(a, this.blocked.ranges));
    if (blockedAt !== undefined) return { reason: 'blocked_host', message: `${label}: ${blockedAt} is in blocked_hosts` };
    const allowed = this.allowed.star || (byName && nameMatches(name, this.allowed)) || canon.every((a) => inRanges(a, this.allowed.ranges));
    if (!allowed) return { reason: 'not_allowed', message: `${label} is not in allowed_hosts` };
    const privateOk = byName && nameMatches(name, this.allowPrivate);
    for (const a of canon) {
      const range = privateRange(a);
      if (range === null || privateOk || inRanges(a, this.allowPrivate.ranges)) continue;
      return { reason: 'private_address', message: `${label}: ${a} is a private address (${range}) and not in allow_private` };
    }
    return null;
  }
}
