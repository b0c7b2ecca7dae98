// The forwarding proxy: an HTTP proxy on 127.0.0.1 (ephemeral port) that Chromium sends all its
// traffic to (--proxy-server). node:http parses every request; `CONNECT host:port` becomes a
// tunnel, an absolute-form request (`GET http://…`) is forwarded (exchange.ts). Per request it
// goes straight to the target or through the active proxy (route.ts), over the dialer the checks
// use (upstream/dial.ts).
//
// Not a relay for anyone else: a connection is served only when the peer's socket belongs to the
// agent user's uid (Chromium's; peer.ts), else closed unanswered; the daemon's own ports are never a target.
// The peer lookup (one sock_diag request, or, without the native module, a read of /proc/net/tcp
// that takes milliseconds) runs beside the start of the exchange: the request is parsed and the
// TCP (and TLS) connection to the configured proxy opened meanwhile, but nothing is answered, no
// request or CONNECT is sent upstream and no target is connected to before the peer was found to
// be the agent user's uid.
//
// use(proxy | null) switches the exit: from its return on, new requests use the new upstream,
// and every connection of the browser to the forwarder is closed — idle keep-alive connections and
// open tunnels at once, a request still waiting for its answer with 502 first — so nothing can leave
// through the old exit after the switch (Chromium reconnects).
import http from 'node:http';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import type { Duplex } from 'node:stream';
import type { Logger } from '../../core/log.js';
import type { Metrics } from '../../core/metrics.js';
import { CheckFailure, Dial, type ProxySocket } from '../upstream/dial.js';
import type { StoredProxy } from '../store/store.js';
import type { Upstream } from '../upstream/upstream.js';
import { forwardRequest, type ExchangeHooks } from './exchange.js';
import { PeerLookup } from './peer.js';
import { relayReads, UpstreamReads } from '../upstream/reads.js';
import { connectDirect, decide, RefusedTarget, type Decision, type EgressGate, type Lookup } from './route.js';
import type { Denial } from '../../egress/checker.js';
import { ForwarderStats, type ForwarderStatus } from './stats.js';

export interface ActiveProxy {
  proxy: StoredProxy;
  /** Where its traffic goes; null when it cannot be reached at all (`problem` says why): then nothing goes out. */
  upstream: Upstream | null;
  problem?: string;
}

interface ForwarderDeps {
  log: Logger;
  metrics: Metrics;
  /** Deadline of one upstream or direct connection (connect, TLS, CONNECT answer). */
  dialTimeoutMs: number;
  lookup: Lookup;
  /** The daemon's own API port, once known. */
  apiPort: () => number | null;
  /** The uid a peer's socket must have (the agent user's: Chromium's); default: the daemon's. */
  uid?: number;
  /** The egress policy (daemon/egress): asked for every target; none: every target goes. */
  egress?: EgressGate;
}

/** The fields of a 403 for a target the egress policy refuses (the header Kernel's egress proxy sends, and the daemon's own). */
export const POLICY_DENIED_HEADERS: Readonly<Record<string, string>> = { 'x-kernel-proxy-error': 'network_policy_denied', 'x-browserd-egress': 'denied' };

/** The text of a 403 for a target the egress policy refuses. */
export function policyDeniedText(d: Denial): string {
  return `browserd: network_policy_denied (${d.reason}): ${d.message}; the egress policy is GET /browsers/{id}/network/egress-policy\n`;
}

interface Client {
  socket: net.Socket;
  /** Resolves true once the peer's socket was found to be the daemon's uid (false: the socket is destroyed). */
  verified: Promise<boolean>;
  /** true once verified resolved true. */
  ok: boolean;
  /** Answers the exchange still waiting for its answer (an error status); null when none waits. */
  pending: ((status: number, text: string, fields?: Readonly<Record<string, string>>) => void) | null;
  /** The open tunnel or upstream connection, ended with the client. */
  upstream: Duplex | null;
  /** Aborted when the browser closes the connection or the proxy is switched: dials stop. */
  abort: AbortController;
  closed: boolean;
}

interface Active extends ActiveProxy {
  label: string;
}

const SWITCHED = "the browser's proxy was switched; retry";
const DIAL_DEADLINE = 'the dial deadline (BROWSERD_PROXY_DIAL_TIMEOUT_MS)';

export class Forwarder {
  readonly stats: ForwarderStats;
  private readonly acceptor: net.Server;
  private readonly server: http.Server;
  private readonly clients = new Map<net.Socket, Client>();
  private readonly uid: number;
  private readonly peers: PeerLookup;
  private active: Active | null = null;
  private generation = 0;
  private boundPort: number | null = null;
  private closed = false;

  constructor(private readonly deps: ForwarderDeps) {
    this.stats = new ForwarderStats(deps.metrics, deps.log);
    this.uid = deps.uid ?? process.getuid?.() ?? -1;
    this.peers = new PeerLookup({
      onFallback: (why) => deps.log.warn({ event: 'forwarder_peer_check', method: 'proc', reason: why }, `forwarding proxy: sock_diag failed (${why}); the peer check reads /proc/net/tcp from now on (milliseconds per new connection)`),
    });
    this.acceptor = net.createServer({ pauseOnConnect: true }, (s) => this.accept(s));
    this.acceptor.on('error', (err) => deps.log.error({ event: 'forwarder_error', err }, 'forwarding proxy: accept failed'));
    // Never listens itself: it gets every accepted socket; answers wait for the peer check. No deadline on a whole request (long uploads).
    this.server = http.createServer({ requestTimeout: 0 });
    this.server.on('request', (req, res) => void this.onRequest(req, res));
    this.server.on('connect', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => void this.onConnect(req, socket, head));
    // Answered only to a peer already known to be the browser's uid; anyone else learns nothing.
    const known = (socket: Duplex): boolean => this.clients.get(socket as net.Socket)?.ok === true;
    this.server.on('upgrade', (_req, socket: Duplex) => {
      if (known(socket)) socket.end(rawAnswer(501, 'browserd: WebSocket through the proxy goes by CONNECT\n'));
      else socket.destroy();
    });
    this.server.on('clientError', (_err, socket: Duplex) => {
      if (known(socket) && socket.writable) socket.end(rawAnswer(400, 'browserd: not an HTTP request\n'));
      else socket.destroy();
    });
  }

  /** Listens on 127.0.0.1, an ephemeral port; resolves with the port. */
  listen(): Promise<number> {
    return new Promise((resolve, reject) => {
      this.acceptor.once('error', reject);
      this.acceptor.listen(0, '127.0.0.1', () => {
        this.acceptor.off('error', reject);
        this.boundPort = (this.acceptor.address() as net.AddressInfo).port;
        this.deps.log.info({ event: 'forwarder_listening', port: this.boundPort, peer_check: this.peers.method }, 'forwarding proxy listening');
        if (this.peers.fallbackReason !== null) {
          this.deps.log.warn({ event: 'forwarder_peer_check', method: 'proc', reason: this.peers.fallbackReason }, `forwarding proxy: the peer check reads /proc/net/tcp (milliseconds per new connection): ${this.peers.fallbackReason}`);
        }
        resolve(this.boundPort);
      });
    });
  }

  /** The port on 127.0.0.1, null before listen(). */
  get port(): number | null {
    return this.boundPort;
  }

  /** Switches the exit (null: direct); closes every connection of the browser first. */
  use(active: ActiveProxy | null): void {
    this.generation++;
    this.active = active === null ? null : { ...active, label: this.stats.label(active.proxy.id) };
    this.stats.reset();
    if (active !== null && active.upstream === null) {
      this.stats.failed(this.active?.label ?? 'other', active.proxy.id, 'any', { code: 'proxy_unreachable', message: active.problem ?? 'the proxy cannot be used', atProxy: true });
    }
    for (const c of [...this.clients.values()]) this.cut(c, SWITCHED);
  }

  /**
   * Closes every connection of the browser (a request still waiting gets 502 `why`): nothing goes on
   * through a connection opened under rules that changed (the egress policy). Chromium reconnects.
   */
  reset(why: string): void {
    this.generation++;
    for (const c of [...this.clients.values()]) this.cut(c, why);
  }

  /** The active proxy and the last failure of a connection to it; null when direct. */
  status(): ForwarderStatus | null {
    return this.active === null ? null : { id: this.active.proxy.id, last_error: this.stats.lastErrorOfActive() };
  }

  /** Stops accepting and closes every connection. Idempotent. */
  close(): Promise<void> {
    this.destroy();
    return new Promise((resolve) => {
      if (!this.acceptor.listening) return resolve();
      this.acceptor.close(() => resolve());
    });
  }

  destroy(): void {
    this.closed = true;
    for (const c of [...this.clients.values()]) this.cut(c, 'the daemon is stopping');
    if (this.acceptor.listening) this.acceptor.close();
  }

  private accept(socket: net.Socket): void {
    const acceptedAt = performance.now();
    socket.on('error', () => socket.destroy());
    if (this.closed) return void socket.destroy();
    const verified = this.peers.uidOf(socket, acceptedAt).then((uid) => {
      if (uid === this.uid) return (client.ok = true);
      this.stats.refused('peer_uid', { peer_uid: uid, peer_port: socket.remotePort }, `forwarding proxy: refused a connection of uid ${uid ?? 'unknown'} (only uid ${this.uid}, the browser's, is served)`);
      socket.destroy();
      return false;
    });
    const client: Client = { socket, verified, ok: false, pending: null, upstream: null, abort: new AbortController(), closed: false };
    this.clients.set(socket, client);
    this.stats.clients(1);
    socket.once('close', () => {
      this.clients.delete(socket);
      this.stats.clients(-1);
      client.closed = true;
      client.abort.abort('the browser closed the connection');
      client.upstream?.destroy();
    });
    socket.setNoDelay(true);
    this.server.emit('connection', socket);
    socket.resume();
  }

  /** Closes a client connection; an exchange still waiting gets 502 first. */
  private cut(c: Client, why: string): void {
    if (c.closed) return;
    c.closed = true;
    c.abort.abort(why);
    c.upstream?.destroy();
    const pending = c.pending;
    c.pending = null;
    if (pending !== null) pending(502, `browserd: ${why}\n`);
    else c.socket.destroy();
  }

  /** Opens the connection to the active proxy ahead (while the peer is checked); null when the route is not through it. */
  private early(decision: Decision, client: Client, reads?: UpstreamReads): { dial: Dial | null; opened?: Promise<ProxySocket> } {
    const dial = decision.kind === 'upstream' ? this.dialFor(client) : null;
    if (dial === null) return { dial };
    const opened = dial.proxy(reads?.onread);
    opened.catch(() => undefined); // its failure is reported when it is used
    return { dial, opened };
  }

  private route(host: string, port: number): Decision {
    const ownPorts = [this.deps.apiPort(), this.boundPort].filter((p): p is number => p !== null);
    return decide(host, port, { ownPorts, upstream: this.active !== null, bypass: this.active?.proxy.bypass_hosts });
  }

  /** The hooks of one exchange of `client`, answering through `answer`. */
  private hooks(client: Client, decision: Decision, target: string, answer: (status: number, text: string, fields?: Readonly<Record<string, string>>) => void): Omit<ExchangeHooks, 'answering'> & { label: string; count: (stream: NodeJS.ReadableStream, direction: 'sent' | 'received') => void } {
    const gen = this.generation;
    const active = this.active;
    const viaProxy = decision.kind === 'upstream' && active !== null;
    const label = viaProxy ? active.label : 'direct';
    const current = (): boolean => !client.closed && gen === this.generation;
    return {
      label,
      current,
      answer,
      connected: () => this.stats.connected(label),
      failed: (err: CheckFailure) => {
        if (!current()) return answer(502, `browserd: ${SWITCHED}\n`);
        this.stats.failed(label, viaProxy ? active.proxy.id : null, target, err);
        answer(502, `browserd: ${viaProxy ? `proxy ${active.proxy.id}: ` : ''}${err.code}: ${err.message}\n`);
      },
      policyDenied: (err: RefusedTarget) => {
        if (err.policy === null) return answer(403, `browserd: ${err.message}\n`);
        const [h, p] = splitTarget(target);
        this.refusedByPolicy(h, p, err.policy);
        answer(403, policyDeniedText(err.policy), POLICY_DENIED_HEADERS);
      },
      count: (stream, direction) => this.stats.countBytes(label, direction, stream),
      bytes: this.stats.byteCounter(label),
    };
  }

  private dialFor(client: Client): Dial | null {
    const up = this.active?.upstream ?? null;
    return up === null ? null : new Dial(up, { deadline: Date.now() + this.deps.dialTimeoutMs, deadlineName: DIAL_DEADLINE, signal: client.abort.signal });
  }

  private directOptions(client: Client) {
    const ownPorts = [this.deps.apiPort(), this.boundPort].filter((p): p is number => p !== null);
    return { deadline: Date.now() + this.deps.dialTimeoutMs, signal: client.abort.signal, lookup: this.deps.lookup, ownPorts, egress: this.deps.egress };
  }

  /** The refusals before anything is forwarded, answered 403: one of the daemon's own ports, or the egress policy by name. true when it answered. */
  private refused(host: string, port: number, decision: Decision, dial: Dial | null, answer: (status: number, text: string, fields?: Readonly<Record<string, string>>) => void): boolean {
    if (decision.kind === 'refuse') {
      this.stats.refused('own_port', { target: `${host}:${port}` }, `forwarding proxy: ${decision.why}`);
      answer(403, `browserd: ${decision.why}\n`);
      return true;
    }
    const denied = this.policyByName(host, port, decision);
    if (denied === null) return false;
    dial?.destroy();
    answer(403, policyDeniedText(denied), POLICY_DENIED_HEADERS);
    return true;
  }

  /**
   * The egress policy's decision that needs no lookup (names, literal addresses); a direct target is
   * judged again by every address its name resolves to (connectDirect). null: it may go on.
   */
  private policyByName(host: string, port: number, decision: Decision): Denial | null {
    const egress = this.deps.egress;
    if (egress === undefined) return null;
    const denial = egress.byName(host, port);
    // A direct target's decision is told once its addresses are judged (connectDirect); through a proxy the name is all there is.
    if (denial !== null || decision.kind === 'upstream') egress.decided({ host, port, via: decision.kind === 'upstream' ? 'upstream' : 'direct', addresses: null, denial });
    if (denial !== null) this.refusedByPolicy(host, port, denial);
    return denial;
  }

  private refusedByPolicy(host: string, port: number, denial: Denial): void {
    this.stats.refused('network_policy', { target: `${host}:${port}`, policy_reason: denial.reason }, `forwarding proxy: the egress policy refused ${host}:${port}: ${denial.message}`);
  }

  private async onRequest(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const client = this.clients.get(req.socket as net.Socket);
    if (client === undefined || client.closed) return void req.socket.destroy();
    let answered = false;
    const answer = (status: number, text: string, fields: Readonly<Record<string, string>> = {}): void => {
      if (client.pending === answer) client.pending = null;
      if (answered || res.headersSent) return;
      answered = true;
      // After a switch the connection ends with this answer (Connection: close, then closed).
      // x-browserd-forwarder: the answer is the forwarder's own (a request through the browser, /curl, reports it as fetch_failed).
      res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(text), 'x-browserd-forwarder': 'error', ...fields, ...(client.closed ? { connection: 'close' } : {}) });
      res.end(text);
      if (client.closed) res.once('finish', () => client.socket.destroy());
    };
    const url = absoluteHttpUrl(req.url ?? '');
    const host = url === null ? '' : url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    const port = url === null || url.port === '' ? 80 : Number(url.port);
    const decision = url === null ? null : this.route(host, port);
    const reads = new UpstreamReads();
    const { dial, opened } = decision === null ? { dial: null } : this.early(decision, client, reads);
    res.once('close', () => dial?.destroy());
    if (!(await client.verified)) return dial?.destroy();
    if (url === null || decision === null) {
      this.stats.refused('bad_request', { target: (req.url ?? '').slice(0, 200) }, 'forwarding proxy: not an absolute-form http:// request');
      return answer(400, "browserd: this is the browser's forwarding proxy: it takes CONNECT and absolute-form http:// requests\n");
    }
    if (this.refused(host, port, decision, dial, answer)) return;
    const hooks = this.hooks(client, decision, `${host}:${port}`, answer);
    if (!hooks.current()) return answer(502, `browserd: ${SWITCHED}\n`);
    if (decision.kind === 'upstream' && this.active?.upstream === null) return hooks.failed(new CheckFailure('proxy_unreachable', this.active.problem ?? 'the proxy cannot be used', true));
    client.pending = answer;
    res.once('close', () => {
      if (client.pending === answer) client.pending = null;
    });
    const wrapped: ExchangeHooks = {
      ...hooks,
      // The answer's head is about to be written: from here a switch closes the connection instead.
      answering: () => {
        if (client.pending === answer) client.pending = null;
      },
    };
    await forwardRequest(req, res, { url, dial, opened, direct: this.directOptions(client), reads }, wrapped);
  }

  private async onConnect(req: http.IncomingMessage, socket: net.Socket, head: Buffer): Promise<void> {
    const client = this.clients.get(socket);
    if (client === undefined || client.closed) return void socket.destroy();
    let answered = false;
    const answer = (status: number, text: string, fields: Readonly<Record<string, string>> = {}): void => {
      if (client.pending === answer) client.pending = null;
      if (answered) return;
      answered = true;
      socket.end(rawAnswer(status, text, fields));
    };
    const target = parseAuthority(req.url ?? '');
    const decision = target === null ? null : this.route(target.host, target.port);
    const reads = new UpstreamReads();
    const { dial, opened } = decision === null ? { dial: null } : this.early(decision, client, reads);
    if (!(await client.verified)) return dial?.destroy();
    if (target === null || decision === null) {
      this.stats.refused('bad_request', { target: (req.url ?? '').slice(0, 200) }, 'forwarding proxy: CONNECT without host:port');
      return answer(400, 'browserd: CONNECT needs host:port\n');
    }
    const { host, port } = target;
    if (this.refused(host, port, decision, dial, answer)) return;
    const hooks = this.hooks(client, decision, `${host}:${port}`, answer);
    if (!hooks.current()) {
      dial?.destroy();
      return answer(502, `browserd: ${SWITCHED}\n`);
    }
    if (decision.kind === 'upstream' && this.active?.upstream === null) return hooks.failed(new CheckFailure('proxy_unreachable', this.active.problem ?? 'the proxy cannot be used', true));
    client.pending = answer;
    let up: net.Socket | Duplex;
    try {
      const ua = req.headers['user-agent'];
      up = dial !== null ? await dial.tunnel(host, port, ua !== undefined ? { 'user-agent': ua } : {}, opened, reads) : await connectDirect(host, port, this.directOptions(client), reads.onread);
    } catch (err) {
      if (err instanceof RefusedTarget) {
        if (err.policy === null) return answer(403, `browserd: ${err.message}\n`);
        this.refusedByPolicy(host, port, err.policy);
        return answer(403, policyDeniedText(err.policy), POLICY_DENIED_HEADERS);
      }
      return hooks.failed(err instanceof CheckFailure ? err : new CheckFailure('proxy_unreachable', (err as Error).message, true));
    }
    if (!hooks.current()) {
      up.destroy();
      return answer(502, `browserd: ${SWITCHED}\n`);
    }
    answered = true;
    client.pending = null;
    client.upstream = up;
    hooks.connected();
    up.on('error', () => socket.destroy());
    up.on('close', () => (up.readableEnded ? socket.end() : socket.destroy()));
    socket.on('close', () => up.destroy());
    socket.write('HTTP/1.1 200 Connection established\r\n\r\n');
    if (head.length > 0) up.write(head);
    socket.pipe(up);
    const received = this.stats.byteCounter(hooks.label);
    relayReads(reads, up, socket, (n) => received('received', n));
    hooks.count(socket, 'sent');
  }
}

/** A whole answer on a raw socket (CONNECT, or a socket node:http let go of). */
function rawAnswer(status: number, text: string, fields: Readonly<Record<string, string>> = {}): string {
  const extra = Object.entries(fields).map(([k, v]) => `${k}: ${v}\r\n`).join('');
  return `HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? ''}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(text)}\r\n${extra}connection: close\r\n\r\n${text}`;
}

/** host and port of a `host:port` target label (IPv6 unbracketed). */
function splitTarget(target: string): [string, number] {
  const i = target.lastIndexOf(':');
  return [target.slice(0, i), Number(target.slice(i + 1))];
}

function absoluteHttpUrl(target: string): URL | null {
  if (!/^http:\/\//i.test(target)) return null;
  try {
    const url = new URL(target);
    return url.hostname === '' || url.username !== '' || url.password !== '' ? null : url;
  } catch {
    return null;
  }
}

/** `host:port` of a CONNECT (IPv6 in brackets); null when malformed or the port is not 1–65535. */
function parseAuthority(authority: string): { host: string; port: number } | null {
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:[\]/@\s]+)):(\d{1,5})$/.exec(authority);
  if (!m) return null;
  const port = Number(m[3]);
  if (port < 1 || port > 65535) return null;
  return { host: (m[1] ?? m[2]) as string, port };
}
