// Where the forwarding proxy sends one request of the browser (a CONNECT or an absolute-form
// request), decided per request, in this order:
//   refuse    the daemon's own ports (its HTTP API and the forwarder itself) on a loopback or
//             local address: a page can never reach the API through the browser's proxy (403)
//   direct    loopback targets (127.0.0.0/8, ::1, `localhost`, `*.localhost`); every target while no
//             proxy is active; hosts matching the active proxy's bypass_hosts
//   upstream  everything else, through the active proxy (upstream/dial.ts)
// A direct connection resolves a name itself (in the test build, the hooks' table first,
// else the system resolver: getaddrinfo, /etc/hosts included, as Chromium without a proxy would)
// and judges the address again, so a name that resolves to a local address with one of the
// daemon's ports is refused too. Through an upstream the upstream resolves the name, far away.
// The egress policy (daemon/egress, asked through EgressGate) judges every target by name first
// (the forwarder), and a direct one again by every address its name resolved to (connectDirect),
// which then connects to one of those addresses, never to one resolved later.
import { lookup as dnsLookup } from 'node:dns/promises';
import net from 'node:net';
import os from 'node:os';
import ipaddr from 'ipaddr.js';
import { bypasses, canonicalIp } from '../store/bypass.js';
import { CheckFailure, failure } from '../upstream/dial.js';
import type { Denial } from '../../egress/checker.js';

export type Decision = { kind: 'refuse'; why: string } | { kind: 'direct' } | { kind: 'upstream' };

/** A request the forwarder refuses to carry (403 to the browser); `policy`: refused by the egress policy. */
export class RefusedTarget extends Error {
  constructor(
    why: string,
    readonly policy: Denial | null = null,
  ) {
    super(why);
    this.name = 'RefusedTarget';
  }
}

/** The egress policy as the forwarder asks it (daemon/egress): each target by name first, then by every address it resolved to. */
export interface EgressGate {
  byName(host: string, port: number): Denial | null;
  byAddresses(host: string, port: number, addresses: readonly string[]): Denial | null;
  /** One decision, for telemetry and the log. */
  decided(d: { host: string; port: number; via: 'direct' | 'upstream'; addresses: readonly string[] | null; denial: Denial | null }): void;
}

/** How long the list of local interface addresses is reused. */
const INTERFACES_TTL_MS = 5000;
let interfaces: { at: number; addresses: Set<string> } | null = null;

function interfaceAddresses(): Set<string> {
  if (interfaces === null || Date.now() - interfaces.at > INTERFACES_TTL_MS) {
    const addresses = new Set<string>();
    for (const list of Object.values(os.networkInterfaces())) {
      for (const a of list ?? []) {
        const c = canonicalIp(a.address);
        if (c !== null) addresses.add(c);
      }
    }
    interfaces = { at: Date.now(), addresses };
  }
  return interfaces.addresses;
}

/** 127.0.0.0/8, ::1 and `localhost` names (RFC 6761), in any spelling of the address. */
export function isLoopbackHost(host: string): boolean {
  const ip = canonicalIp(host);
  if (ip !== null) return ipaddr.parse(ip).range() === 'loopback';
  const h = host.toLowerCase().replace(/\.$/, '');
  return h === 'localhost' || h.endsWith('.localhost');
}

/** An address of this machine: loopback, unspecified (0.0.0.0, ::), or an address of a local interface. */
export function isLocalAddress(address: string): boolean {
  const ip = canonicalIp(address);
  if (ip === null) return false;
  const range = ipaddr.parse(ip).range();
  return range === 'loopback' || range === 'unspecified' || interfaceAddresses().has(ip);
}

interface RouteInput {
  /** The daemon's API port and the forwarder's own port. */
  ownPorts: readonly number[];
  /** Whether a proxy is active (else every target is direct). */
  upstream: boolean;
  bypass: readonly string[] | undefined;
}

export function decide(host: string, port: number, input: RouteInput): Decision {
  if (input.ownPorts.includes(port) && (isLoopbackHost(host) || isLocalAddress(host))) {
    return { kind: 'refuse', why: `${host}:${port} is a port of browserd itself; the browser's proxy never connects there` };
  }
  if (isLoopbackHost(host) || !input.upstream || bypasses(host, input.bypass)) return { kind: 'direct' };
  return { kind: 'upstream' };
}

/** Every address of a host name, IPv4 first (or the literal itself). */
export type Lookup = (host: string) => Promise<string[]>;

export function createLookup(table: ReadonlyMap<string, string[]>): Lookup {
  return async (host) => {
    const ip = canonicalIp(host);
    if (ip !== null) return [ip];
    const hooked = table.get(host.toLowerCase());
    if (hooked !== undefined && hooked.length > 0) return [...hooked];
    return (await dnsLookup(host, { all: true, order: 'ipv4first' })).map((a) => a.address);
  };
}

export interface DirectOptions {
  deadline: number;
  signal: AbortSignal;
  lookup: Lookup;
  ownPorts: readonly number[];
  /** The egress policy: every address the name resolved to is judged; the connection goes to one of them. */
  egress?: EgressGate;
}

/**
 * A TCP connection straight to host:port (name lookup and connect under the deadline); RefusedTarget
 * or CheckFailure. `onread`: the socket reads into the caller's buffers and emits no 'data'.
 */
export function connectDirect(host: string, port: number, opts: DirectOptions, onread?: net.OnReadOpts): Promise<net.Socket> {
  return new Promise<net.Socket>((resolve, reject) => {
    let sock: net.Socket | null = null;
    let done = false;
    const finish = (err: Error | null): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      opts.signal.removeEventListener('abort', onAbort);
      if (err === null && sock !== null) return resolve(sock);
      sock?.destroy();
      reject(err ?? new Error('no socket'));
    };
    const onAbort = (): void => finish(new CheckFailure('timeout', `no connection to ${host}:${port}: ${String(opts.signal.reason ?? 'cancelled')}`, false));
    const timer = setTimeout(() => finish(new CheckFailure('timeout', `no connection to ${host}:${port} before the dial deadline (BROWSERD_PROXY_DIAL_TIMEOUT_MS)`, false)), Math.max(0, opts.deadline - Date.now()));
    if (opts.signal.aborted) return onAbort();
    opts.signal.addEventListener('abort', onAbort, { once: true });
    opts.lookup(host).then(
      (addresses) => {
        if (done) return;
        const own = opts.ownPorts.includes(port) ? addresses.find((a) => isLocalAddress(a)) : undefined;
        if (own !== undefined) return finish(new RefusedTarget(`${host}:${port} resolves to ${own}, a port of browserd itself`));
        const denial = opts.egress?.byAddresses(host, port, addresses) ?? null;
        opts.egress?.decided({ host, port, via: 'direct', addresses, denial });
        if (denial !== null) return finish(new RefusedTarget(denial.message, denial));
        const address = addresses[0];
        if (address === undefined) return finish(new CheckFailure('target_unreachable', `cannot resolve ${host}: no address`, false));
        const s = net.connect({ host: address, port, ...(onread !== undefined ? { onread } : {}) });
        sock = s;
        s.on('error', (e) => finish(failure('target_unreachable', `cannot connect to ${host}:${port}`, e, false)));
        s.once('connect', () => {
          s.setNoDelay(true);
          finish(null);
        });
      },
      (e: Error) => finish(failure('target_unreachable', `cannot resolve ${host}`, e, false)),
    );
  });
}
