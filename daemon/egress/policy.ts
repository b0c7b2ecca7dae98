// The egress policy: where the browser (and, with nftables, the agent's processes) may connect.
//   filtered        false: no filtering (the forwarder carries everything as before); true: the lists below apply
//   allowed_hosts   the hosts that may be reached (default ["*"]: every host); [] allows none
//   allow_private   hosts or ranges reached although their addresses are private (loopback included)
//   blocked_hosts   hosts or ranges never reached, whatever allowed_hosts says
// One entry is one of:
//   `*`               every host (allowed_hosts and blocked_hosts only)
//   `example.com`     that host name only (not its subdomains)
//   `*.example.com`   every subdomain at any depth, not example.com itself
//   `192.0.2.10`, `2001:db8::1`, `[2001:db8::1]`   that address
//   `10.0.0.0/8`, `fd00::/8`                       every address of the range
// Names are stored lower case, without a trailing dot, internationalized names as punycode; IPv6
// compressed; CIDR ranges as network/prefix (host bits cleared). Each bad entry is its own detail
// (`allowed_hosts.2: …`). No ports, schemes or paths.
import net from 'node:net';
import ipaddr from 'ipaddr.js';
import { z } from 'zod';
import { lazy } from '../core/lazy.js';
import { canonicalIp, canonicalName } from '../proxies/store/bypass.js';

export const POLICY_LIMITS = {
  /** Entries of one list. */
  maxEntries: 1000,
  /** Characters of one entry as given. */
  maxChars: 255,
} as const;

export interface EgressPolicy {
  filtered: boolean;
  allowed_hosts: string[];
  allow_private: string[];
  blocked_hosts: string[];
}

export const DEFAULT_POLICY: EgressPolicy = { filtered: false, allowed_hosts: ['*'], allow_private: [], blocked_hosts: [] };

/** One stored entry, canonical. */
function parseEntry(raw: string, star: boolean): { entry: string } | { problem: string } {
  const v = raw.trim();
  if (v.length === 0) return { problem: 'must not be empty' };
  if (v.length > POLICY_LIMITS.maxChars) return { problem: `must be at most ${POLICY_LIMITS.maxChars} characters` };
  if (v === '*') return star ? { entry: '*' } : { problem: 'may not be * (allow_private names hosts or ranges; private addresses stay refused otherwise)' };
  if (v.includes('://')) return { problem: 'must be a host name, *.suffix, an IP address or a CIDR range, without scheme or path' };
  const slash = v.indexOf('/');
  if (slash >= 0) {
    const addr = v.slice(0, slash);
    const bits = v.slice(slash + 1);
    const ip = canonicalIp(addr);
    if (ip === null || !/^\d{1,3}$/.test(bits)) return { problem: 'is no CIDR range (address/prefix, e.g. 10.0.0.0/8 or fd00::/8), and a path is not accepted' };
    const max = net.isIPv4(ip) ? 32 : 128;
    if (Number(bits) > max) return { problem: `has a prefix longer than ${max} bits` };
    // An IPv4-mapped IPv6 address is judged as its IPv4 (canonicalIp): its range must be given in IPv4.
    return { entry: `${networkOf(ip, Number(bits))}/${bits}` };
  }
  const ip = canonicalIp(v);
  if (ip !== null) return { entry: ip };
  const wildcard = v.startsWith('*.');
  const rest = wildcard ? v.slice(2) : v;
  if (rest.includes('*')) return { problem: 'may hold * only alone or as the whole first label (*.example.com)' };
  if (/:\d+$/.test(rest)) return { problem: 'may not carry a port' };
  const name = canonicalName(rest);
  if (name === null) return { problem: 'must be a host name, *.suffix, an IP address or a CIDR range (no port, scheme or path)' };
  return { entry: wildcard ? `*.${name}` : name };
}

/** The first address of `ip`/`bits` (host bits cleared). */
function networkOf(ip: string, bits: number): string {
  const parsed = ipaddr.parse(ip);
  const bytes = parsed.toByteArray();
  for (let i = 0; i < bytes.length; i++) {
    const keep = Math.max(0, Math.min(8, bits - i * 8));
    bytes[i] = (bytes[i] as number) & ((0xff << (8 - keep)) & 0xff);
  }
  return ipaddr.fromByteArray(bytes).toString();
}

function listSchema(field: string, star: boolean, description: string) {
  return z
    .array(
      z.string({ error: 'must be a string' }).transform((v, ctx) => {
        const parsed = parseEntry(v, star);
        if ('problem' in parsed) {
          ctx.addIssue({ code: 'custom', message: parsed.problem });
          return z.NEVER;
        }
        return parsed.entry;
      }),
      { error: `${field} must be an array of strings` },
    )
    .max(POLICY_LIMITS.maxEntries, `must hold at most ${POLICY_LIMITS.maxEntries} entries`)
    .transform((entries) => [...new Set(entries)])
    .meta({ description });
}

const ENTRY_TEXT =
  'Each entry: a host name (`example.com`: that host only), `*.suffix` (every subdomain at any depth, not the name itself), an IPv4 or IPv6 address, ' +
  `or a CIDR range (\`10.0.0.0/8\`, \`fd00::/8\`). Case-insensitive; stored canonical (lower case, punycode, IPv6 compressed, host bits cleared); duplicates dropped. ` +
  `At most ${POLICY_LIMITS.maxEntries} entries of at most ${POLICY_LIMITS.maxChars} characters.`;

/** The body of PUT (every field but `filtered` optional: a PUT replaces the whole policy, absent lists take their defaults). */
export const policySchema = lazy(() =>
  z.strictObject({
    filtered: z.boolean({ error: 'must be a boolean' }).meta({ description: 'true: the lists apply to every connection of the browser (and of the agent\'s processes where nftables is enforced); false: no filtering' }),
    allowed_hosts: listSchema('allowed_hosts', true, `The hosts that may be reached. Default ["*"] (every host); [] allows none. \`*\` matches every host. A name matches by name; an address or range matches a target whose every address falls in it. ${ENTRY_TEXT}`).optional(),
    allow_private: listSchema('allow_private', false, `Hosts (by name) or addresses and ranges reached although private (loopback 127.0.0.0/8 and ::1, RFC 1918, CGNAT, unique-local, ...). Link-local addresses (169.254.0.0/16, fe80::/10, the metadata address 169.254.169.254 among them) and the daemon's own ports stay refused whatever this says. ${ENTRY_TEXT}`).optional(),
    blocked_hosts: listSchema('blocked_hosts', true, `Hosts never reached, whatever allowed_hosts says: by name, or a target any of whose addresses falls in a listed address or range. ${ENTRY_TEXT}`).optional(),
  }),
);

/** A validated PUT body with the defaults filled in. */
export function withDefaults(input: Partial<EgressPolicy> & { filtered: boolean }): EgressPolicy {
  return {
    filtered: input.filtered,
    allowed_hosts: input.allowed_hosts ?? DEFAULT_POLICY.allowed_hosts,
    allow_private: input.allow_private ?? [],
    blocked_hosts: input.blocked_hosts ?? [],
  };
}
