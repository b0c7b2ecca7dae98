// `bypass_hosts` of a proxy: the hosts the browser reaches directly instead of through the proxy
// (the forwarding proxy decides per request, forwarder/route.ts). One entry is one of:
//   host name  `example.com`          that host only, not its subdomains
//   wildcard   `*.example.com`        every subdomain at any depth (a.example.com, a.b.example.com),
//                                     not example.com itself (list both for both)
//   IPv4       `192.0.2.10`           that address (dotted quad)
//   IPv6       `2001:db8::1`, `[2001:db8::1]`   that address
// Entries are case-insensitive and stored in one form: lower case, without a trailing dot,
// internationalized names as punycode (`bücher.example` → `xn--bcher-kva.example`), IPv6
// compressed without brackets; duplicates (after that) are dropped, the first kept. Not accepted:
// ports, schemes, paths, CIDR ranges, `*` alone or anywhere but as the whole first label.
// Limits: BYPASS_LIMITS. A target host is compared in the same form (an IPv4-mapped IPv6 address
// as its IPv4). Loopback targets never need an entry: the forwarding proxy connects to them directly.
import net from 'node:net';
import { domainToASCII } from 'node:url';
import ipaddr from 'ipaddr.js';
import { z } from 'zod';
import { lazy } from '../../core/lazy.js';

export const BYPASS_LIMITS = {
  /** Entries per proxy. */
  maxEntries: 100,
  /** Characters of one entry as given (`*.` included). */
  maxChars: 255,
} as const;

const LABEL = '[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?';
const HOSTNAME_RE = new RegExp(`^(?=.{1,253}$)${LABEL}(?:\\.${LABEL})*$`);

/** The canonical form of an IP literal (IPv4-mapped IPv6 as IPv4), or null when `v` is none. */
export function canonicalIp(v: string): string | null {
  const bare = v.startsWith('[') && v.endsWith(']') ? v.slice(1, -1) : v;
  if (net.isIPv4(bare)) return ipaddr.IPv4.parse(bare).toString();
  if (!net.isIPv6(bare) || bare.includes('%')) return null;
  const v6 = ipaddr.IPv6.parse(bare);
  return v6.isIPv4MappedAddress() ? v6.toIPv4Address().toString() : v6.toString();
}

/** A host name in the stored form (lower case, punycode, no trailing dot), or null when it is none. */
export function canonicalName(v: string): string | null {
  const ascii = domainToASCII(v.replace(/\.$/, ''));
  if (ascii === '' || !HOSTNAME_RE.test(ascii)) return null;
  // All-numeric dotted names are IP spellings (1.2.3, 0x7f.1), not host names.
  if (/^[\d.]+$/.test(ascii)) return null;
  return ascii;
}

/** The stored form of one entry, or why it is refused. */
function parseBypassEntry(raw: string): { entry: string } | { problem: string } {
  const v = raw.trim();
  if (v.length === 0) return { problem: 'must not be empty' };
  if (v.length > BYPASS_LIMITS.maxChars) return { problem: `must be at most ${BYPASS_LIMITS.maxChars} characters` };
  if (v.includes('://') || v.includes('/')) return { problem: 'must be a host name, *.suffix or an IP address, without scheme or path' };
  const ip = canonicalIp(v);
  if (ip !== null) return { entry: ip };
  if (v === '*') return { problem: 'may not be * alone (to send nothing through the proxy, use no proxy)' };
  const wildcard = v.startsWith('*.');
  const rest = wildcard ? v.slice(2) : v;
  if (rest.includes('*')) return { problem: 'may hold * only as the whole first label (*.example.com)' };
  if (/:\d+$/.test(rest) && !net.isIPv6(rest)) return { problem: 'may not carry a port' };
  const name = canonicalName(rest);
  if (name === null) return { problem: 'must be a host name, *.suffix or an IP address (no port, no CIDR range)' };
  return { entry: wildcard ? `*.${name}` : name };
}

/** The `bypass_hosts` field: one detail per bad entry (`bypass_hosts.2: ...`); normalized and deduplicated. */
export const bypassHostsSchema = lazy(() => z
  .array(
    z.string({ error: 'must be a string' }).transform((v, ctx) => {
      const parsed = parseBypassEntry(v);
      if ('problem' in parsed) {
        ctx.addIssue({ code: 'custom', message: parsed.problem });
        return z.NEVER;
      }
      return parsed.entry;
    }),
    { error: 'must be an array of host names' },
  )
  .max(BYPASS_LIMITS.maxEntries, `must hold at most ${BYPASS_LIMITS.maxEntries} entries`)
  .transform((entries) => [...new Set(entries)])
  .meta({
    description:
      `Hosts the browser reaches directly instead of through this proxy while it is the browser's proxy (PATCH /browsers/{id}). ` +
      'Each entry: a host name (`example.com`: that host only), `*.suffix` (`*.example.com`: every subdomain at any depth, not example.com itself), ' +
      'an IPv4 address or an IPv6 address (with or without brackets). Case-insensitive; stored lower case, without a trailing dot, ' +
      'internationalized names as punycode, IPv6 compressed; duplicates dropped. No ports, schemes, paths, CIDR ranges or `*` alone. ' +
      `At most ${BYPASS_LIMITS.maxEntries} entries of at most ${BYPASS_LIMITS.maxChars} characters. Loopback targets are always reached directly.`,
  }));

/** The host of a request target in the form entries are stored in. */
function canonicalTarget(host: string): string {
  const ip = canonicalIp(host);
  if (ip !== null) return ip;
  return domainToASCII(host.replace(/\.$/, '')) || host.toLowerCase();
}

/** Whether `host` (a request's target host) is one of `entries` (stored form). */
export function bypasses(host: string, entries: readonly string[] | undefined): boolean {
  if (entries === undefined || entries.length === 0) return false;
  const h = canonicalTarget(host);
  for (const e of entries) {
    if (e === h) return true;
    if (e.startsWith('*.') && h.endsWith(e.slice(1)) && h.length > e.length - 1) return true;
  }
  return false;
}
