// How a url check's host name becomes addresses: DNS queries for A and AAAA through c-ares
// (`dns.promises.Resolver`), under the check's deadline and cancellable.
//
// Not `dns.lookup`: getaddrinfo runs on libuv's thread pool (4 threads, shared with every file
// operation of the daemon) and cannot be cancelled, so slow names could stall the daemon past any
// deadline. c-ares works on the event loop with its own sockets, and `cancel()` ends its queries.
// There is no fallback to getaddrinfo, for that reason; so /etc/hosts, mDNS and other NSS sources
// are not consulted: the name is looked up in DNS (the servers of /etc/resolv.conf), as the rest
// of the world would see it, which is what a proxy elsewhere would connect to. `localhost` names
// are refused before any lookup by the guard (ssrf.ts).
//
// Every lookup gets its own c-ares channel, so cancelling one check never cancels another's.
// A and AAAA are asked at once; once one family has answered with addresses, the other gets at
// most RESOLVE_GRACE_MS more (a server that drops AAAA queries must not cost the whole deadline):
// the check connects to a checked address either way.
import { Resolver as DnsResolver } from 'node:dns/promises';
import type { TestHooks } from '../../core/test-hooks.js';
import { CheckFailure } from '../upstream/dial.js';

export interface ResolveOptions {
  /** Absolute time (ms since epoch) by which the lookup must be done. */
  deadline: number;
  /** Aborted when the daemon stops. */
  signal: AbortSignal;
}

/**
 * Every address `hostname` resolves to (IPv4 first). Fails with a CheckFailure: `timeout` (no
 * answer before the deadline) or `target_unreachable` (the name does not exist, has no address,
 * or the DNS server failed).
 */
export type Resolver = (hostname: string, opts: ResolveOptions) => Promise<string[]>;

/** How long the other address family may still take once one has answered with addresses. */
export const RESOLVE_GRACE_MS = 500;
/** c-ares tries per query and server; the first try gets a quarter of what is left, the second twice that (c-ares doubles it). */
const DNS_TRIES = 2;
/** The shortest per-try timeout handed to c-ares. */
const MIN_TRY_TIMEOUT_MS = 50;
/** Answers that say "this name has no address of this family", not "the lookup failed". */
const NO_ADDRESS = new Set(['ENODATA', 'ENOTFOUND']);

function timeout(hostname: string, why: string): CheckFailure {
  return new CheckFailure('timeout', `no answer to the name lookup (resolve phase) of ${hostname} ${why}`, false);
}

/** The DNS resolver; `servers` (host:port) instead of those of /etc/resolv.conf when given. */
function dnsResolver(servers?: readonly string[]): Resolver {
  return (hostname, { deadline, signal }) => {
    const left = deadline - Date.now();
    if (signal.aborted) return Promise.reject(timeout(hostname, 'before the daemon stopped'));
    if (left <= 0) return Promise.reject(timeout(hostname, "before the check's deadline"));
    const channel = new DnsResolver({ timeout: Math.max(MIN_TRY_TIMEOUT_MS, Math.floor(left / 4)), tries: DNS_TRIES });
    if (servers !== undefined) channel.setServers([...servers]);

    return new Promise<string[]>((resolve, reject) => {
      let done = false;
      let grace: NodeJS.Timeout | undefined;
      const results: { v4?: PromiseSettledResult<string[]>; v6?: PromiseSettledResult<string[]> } = {};
      const finish = (): boolean => {
        if (done) return false;
        done = true;
        clearTimeout(timer);
        clearTimeout(grace);
        signal.removeEventListener('abort', onAbort);
        channel.cancel();
        return true;
      };
      const onAbort = (): void => {
        if (finish()) reject(timeout(hostname, 'before the daemon stopped'));
      };
      const timer = setTimeout(() => {
        if (finish()) reject(timeout(hostname, "before the check's deadline"));
      }, left);
      signal.addEventListener('abort', onAbort, { once: true });

      const addresses = (): string[] => [results.v4, results.v6].flatMap((r) => (r?.status === 'fulfilled' ? r.value : []));
      const settle = (): void => {
        const found = addresses();
        if (results.v4 !== undefined && results.v6 !== undefined) {
          if (!finish()) return;
          if (found.length > 0) return resolve(found);
          return reject(lookupFailure(hostname, [results.v4, results.v6]));
        }
        // One family is in with addresses: the other may take a little longer, not the deadline.
        if (found.length > 0 && grace === undefined) {
          grace = setTimeout(() => {
            if (finish()) resolve(addresses());
          }, Math.min(RESOLVE_GRACE_MS, Math.max(0, deadline - Date.now())));
        }
      };
      const ask = (family: 'v4' | 'v6', query: Promise<string[]>): void => {
        query.then(
          (value) => {
            results[family] = { status: 'fulfilled', value };
            settle();
          },
          (reason: unknown) => {
            results[family] = { status: 'rejected', reason };
            settle();
          },
        );
      };
      ask('v4', channel.resolve4(hostname));
      ask('v6', channel.resolve6(hostname));
    });
  };
}

/** Why neither family gave an address. */
function lookupFailure(hostname: string, results: PromiseSettledResult<string[]>[]): CheckFailure {
  const codes = results.map((r) => (r.status === 'rejected' ? ((r.reason as NodeJS.ErrnoException).code ?? (r.reason as Error).message) : 'ENODATA'));
  if (codes.includes('ETIMEOUT')) return timeout(hostname, 'from the DNS server (ETIMEOUT)');
  if (codes.every((c) => NO_ADDRESS.has(c))) {
    return new CheckFailure('target_unreachable', `cannot resolve ${hostname}: ${codes.includes('ENOTFOUND') ? 'ENOTFOUND (no such name)' : 'ENODATA (no address)'}`, false);
  }
  return new CheckFailure('target_unreachable', `cannot resolve ${hostname}: ${codes.find((c) => !NO_ADDRESS.has(c))}`, false);
}

/**
 * The daemon's resolver: DNS, or in the test build (core/test-hooks.ts) the hooks' table of names
 * first and the hooks' DNS server instead of /etc/resolv.conf's.
 */
export function createResolver(hooks: TestHooks): Resolver {
  const server = hooks.dnsServer;
  const dns = dnsResolver(server !== undefined ? [server] : undefined);
  const table = hooks.resolveTable;
  if (table.size === 0) return dns;
  return async (hostname, opts) => table.get(hostname.toLowerCase()) ?? dns(hostname, opts);
}
