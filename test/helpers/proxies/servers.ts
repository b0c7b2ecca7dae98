// Loopback fixtures of the proxy tests: an origin that echoes the caller's address, Debian's
// tinyproxy with a generated config, a small CONNECT proxy of our own (records what it was asked,
// sends every tunnel to a local server the test chooses), a small DNS server (answers A and AAAA
// from a table, can stay silent, records every query), and throwaway certificates.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import dgram from 'node:dgram';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import path from 'node:path';
import tls from 'node:tls';
import ipaddr from 'ipaddr.js';
import { tempDir } from '../../kit/cleanup.js';
import { until } from '../../kit/wait.js';

export interface Closer {
  close(): Promise<void>;
}

export async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address() as net.AddressInfo;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

function listen(server: net.Server, port = 0): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port));
  });
}

function closeServer(server: net.Server, sockets: Set<net.Socket>): Promise<void> {
  for (const s of sockets) s.destroy();
  return new Promise((resolve) => server.close(() => resolve()));
}

function trackSockets(server: net.Server): Set<net.Socket> {
  const sockets = new Set<net.Socket>();
  server.on('connection', (s: net.Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.on('secureConnection', (s: net.Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  return sockets;
}

export interface SeenRequest {
  url: string;
  host: string | undefined;
  /** TLS server name (SNI) for the https origin. */
  servername?: string | false | null;
}

export interface Origin extends Closer {
  port: number;
  seen: SeenRequest[];
}

/**
 * `/json` → {"ip": caller}, `/text` → caller as plain text, `/noip` → "hello", `/via` → {"via": the
 * Via header or null, "host"}, `/status/<code>` → that status, else 404.
 */
function originHandler(seen: SeenRequest[]): http.RequestListener {
  return (req, res) => {
    const servername = (req.socket as tls.TLSSocket).servername;
    seen.push({ url: req.url ?? '', host: req.headers.host, ...(servername !== undefined ? { servername } : {}) });
    const caller = req.socket.remoteAddress ?? '';
    const status = /^\/status\/(\d{3})$/.exec(req.url ?? '');
    if (status) res.writeHead(Number(status[1])).end();
    else if (req.url === '/via') res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ via: req.headers.via ?? null, host: req.headers.host }));
    else if (req.url === '/json') res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ip: caller }));
    else if (req.url === '/text') res.writeHead(200, { 'content-type': 'text/plain' }).end(`${caller}\n`);
    else if (req.url === '/noip') res.writeHead(200, { 'content-type': 'text/plain' }).end('hello');
    else res.writeHead(404).end('not found');
  };
}

export async function startOrigin(): Promise<Origin> {
  const seen: SeenRequest[] = [];
  const server = http.createServer(originHandler(seen));
  const sockets = trackSockets(server);
  const port = await listen(server);
  return { port, seen, close: () => closeServer(server, sockets) };
}

export async function startHttpsOrigin(cert: Cert): Promise<Origin> {
  const seen: SeenRequest[] = [];
  const server = https.createServer({ key: cert.key, cert: cert.cert }, originHandler(seen));
  const sockets = trackSockets(server);
  const port = await listen(server);
  return { port, seen, close: () => closeServer(server, sockets) };
}

export interface Cert {
  key: string;
  cert: string;
  /** The PEM file of `cert` (for NODE_EXTRA_CA_CERTS). */
  certFile: string;
}

/** A self-signed certificate for the given subjectAltName entries (e.g. `DNS:test.example`, `IP:127.0.0.1`). */
export function selfSigned(dir: string, name: string, san: string[]): Cert {
  const keyFile = path.join(dir, `${name}.key`);
  const certFile = path.join(dir, `${name}.pem`);
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
    '-keyout', keyFile, '-out', certFile, '-subj', `/CN=${name}`, '-addext', `subjectAltName=${san.join(',')}`,
  ], { stdio: 'ignore' });
  return { key: readFileSync(keyFile, 'utf8'), cert: readFileSync(certFile, 'utf8'), certFile };
}

export interface Tinyproxy extends Closer {
  port: number;
  proc: ChildProcess;
}

export interface TinyproxyOptions {
  /** Basic auth (tinyproxy answers a wrong password with 401, none with 407). */
  user?: string;
  pass?: string;
  /** CONNECT only to these ports. */
  connectPorts: number[];
  /** `ViaProxyName`: the Via header tinyproxy adds (`1.1 <via> (tinyproxy/…)`); without it no Via header. */
  via?: string;
  /** Send everything to this proxy on 127.0.0.1 (tinyproxy then resolves no target name itself). */
  upstreamPort?: number;
}

/** tinyproxy in the foreground on a free loopback port, with CONNECT only to `connectPorts`. */
export async function startTinyproxy(opts: TinyproxyOptions): Promise<Tinyproxy> {
  const dir = tempDir('browserd-tinyproxy-');
  for (let attempt = 0; ; attempt++) {
    const port = await freePort();
    const conf = path.join(dir, 'tinyproxy.conf');
    writeFileSync(
      conf,
      [
        `Port ${port}`,
        'Listen 127.0.0.1',
        'Timeout 30',
        'MaxClients 20',
        'Allow 127.0.0.1',
        ...(opts.user !== undefined ? [`BasicAuth ${opts.user} ${opts.pass ?? ''}`] : []),
        ...opts.connectPorts.map((p) => `ConnectPort ${p}`),
        ...(opts.via !== undefined ? [`ViaProxyName "${opts.via}"`] : ['DisableViaHeader Yes']),
        ...(opts.upstreamPort !== undefined ? [`Upstream http 127.0.0.1:${opts.upstreamPort}`] : []),
        'LogLevel Info',
        '',
      ].join('\n'),
    );
    const proc = spawn('/usr/bin/tinyproxy', ['-d', '-c', conf], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    proc.stdout?.on('data', (d: Buffer) => (output += d.toString()));
    proc.stderr?.on('data', (d: Buffer) => (output += d.toString()));
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    const up = await Promise.race([waitForPort(port, 20_000).then(() => true, () => false), exited.then(() => false)]);
    if (up) {
      return {
        port,
        proc,
        close: async () => {
          if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
          await exited;
          rmSync(dir, { recursive: true, force: true });
        },
      };
    }
    if (attempt >= 3) {
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`tinyproxy did not start: ${output}`);
    }
  }
}

/** Resolves once something accepts connections on 127.0.0.1:port. */
export async function waitForPort(port: number, timeoutMs: number): Promise<void> {
  const accepts = (): Promise<boolean> =>
    new Promise((resolve) => {
      const s = net.connect(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
  await until(`something listening on 127.0.0.1:${port}`, accepts, timeoutMs);
}

export interface ConnectSeen {
  /** host:port asked for (of the CONNECT, or of the absolute-form URL). */
  authority: string;
  proxyAuthorization: string | undefined;
  /** The request's Via header (a proxy in front of this one adds it). */
  via: string | undefined;
  form: 'connect' | 'absolute';
  /** The request line's target as sent (an absolute URL, or host:port). */
  target: string;
}

export interface ConnectProxy extends Closer {
  port: number;
  seen: ConnectSeen[];
  connections: number;
  /** Resolves when `n` CONNECT requests were seen. */
  waitSeen(n: number): Promise<void>;
  /** Lets held CONNECTs through (mode `hold`). */
  release(): void;
}

export interface ConnectProxyOptions {
  /** TLS to the proxy with this certificate. */
  tls?: Cert;
  /** `tunnel` (default): answer 200 and pipe to `route(authority)`; `hang`: never answer; `hold`: tunnel after release(). */
  mode?: 'tunnel' | 'hang' | 'hold';
  /** Where a tunnel goes (always a loopback port), by the authority asked for. */
  route?: (authority: string) => number;
  /** Listen on this port (default: a free one). */
  port?: number;
}

/**
 * A proxy that never leaves loopback: every tunnel (CONNECT) and every absolute-form request goes
 * to a local port, whatever was asked; an absolute-form request is passed on in origin-form.
 */
export async function startConnectProxy(opts: ConnectProxyOptions): Promise<ConnectProxy> {
  const seen: ConnectSeen[] = [];
  const waiters: { n: number; resolve: () => void }[] = [];
  let released = false;
  const held: (() => void)[] = [];
  const mode = opts.mode ?? 'tunnel';
  const onClient = (client: net.Socket): void => {
    state.connections++;
    client.on('error', () => client.destroy());
    let head = '';
    const onData = (chunk: Buffer): void => {
      head += chunk.toString('latin1');
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      client.off('data', onData);
      const lines = head.slice(0, end).split('\r\n');
      const [method = '', target = ''] = (lines[0] ?? '').split(' ');
      const form = method === 'CONNECT' ? 'connect' : 'absolute';
      const absolute = form === 'absolute' && /^http:\/\//i.test(target) ? new URL(target) : null;
      const authority = absolute === null ? target : `${absolute.hostname}:${absolute.port || '80'}`;
      const header = (name: string): string | undefined => {
        const line = lines.find((l) => l.toLowerCase().startsWith(`${name}:`));
        return line?.slice(line.indexOf(':') + 1).trim();
      };
      seen.push({ authority, proxyAuthorization: header('proxy-authorization'), via: header('via'), form, target });
      for (const w of waiters.filter((x) => seen.length >= x.n)) w.resolve();
      if (mode === 'hang') return;
      const go = (): void => {
        const port = opts.route ? opts.route(authority) : 0;
        const upstream = net.connect(port, '127.0.0.1');
        upstream.on('error', () => client.destroy());
        upstream.once('connect', () => {
          if (form === 'connect') {
            client.write('HTTP/1.1 200 Connection established\r\n\r\n');
            const rest = head.slice(end + 4);
            if (rest.length > 0) upstream.write(Buffer.from(rest, 'latin1'));
          } else {
            // The request again, in origin-form (and what came after its head).
            const origin = absolute === null ? target : `${absolute.pathname}${absolute.search}`;
            upstream.write(Buffer.from(`${method} ${origin}${head.slice(head.indexOf(' ', method.length + 1))}`, 'latin1'));
          }
          client.pipe(upstream).pipe(client);
        });
      };
      if (mode === 'hold' && !released) held.push(go);
      else go();
    };
    client.on('data', onData);
  };
  const server = opts.tls ? tls.createServer({ key: opts.tls.key, cert: opts.tls.cert }, onClient) : net.createServer(onClient);
  server.on('tlsClientError', () => undefined);
  const sockets = trackSockets(server);
  const port = await listen(server, opts.port);
  const state: ConnectProxy = {
    port,
    seen,
    connections: 0,
    waitSeen: (n) => (seen.length >= n ? Promise.resolve() : new Promise<void>((resolve) => waiters.push({ n, resolve }))),
    release: () => {
      released = true;
      for (const go of held.splice(0)) go();
    },
    close: () => closeServer(server, sockets),
  };
  return state;
}

/** Creates a proxy through the API and returns its id. */
export async function createProxy(d: { fetch(p: string, init?: RequestInit & { json?: unknown }): Promise<Response> }, body: unknown): Promise<string> {
  const res = await d.fetch('/proxies', { method: 'POST', json: body });
  const text = await res.text();
  if (res.status !== 201) throw new Error(`create failed: ${res.status} ${text}`);
  return (JSON.parse(text) as { id: string }).id;
}

export interface DnsName {
  a?: string[];
  aaaa?: string[];
  /** Never answer queries of these types (the name still answers the others). */
  silent?: ('A' | 'AAAA')[];
}

export interface DnsQuery {
  name: string;
  type: 'A' | 'AAAA' | number;
}

export interface DnsServer extends Closer {
  /** `127.0.0.1:<port>`, for BROWSERD_TEST_HOOKS `dns=`. */
  address: string;
  queries: DnsQuery[];
  /** The queries seen for `name`. */
  asked(name: string): DnsQuery[];
}

const QTYPE = { A: 1, AAAA: 28 } as const;

/**
 * A DNS server on UDP loopback: names of `names` answer A/AAAA from their lists (NOERROR without
 * records when a list is missing), or never when the type is `silent`; other names are NXDOMAIN.
 */
export async function startDnsServer(names: Record<string, DnsName>): Promise<DnsServer> {
  const queries: DnsQuery[] = [];
  const socket = dgram.createSocket('udp4');
  socket.on('message', (msg, peer) => {
    if (msg.length < 12 || msg.readUInt16BE(4) !== 1) return;
    const labels: string[] = [];
    let off = 12;
    while (off < msg.length && msg[off] !== 0) {
      const len = msg[off] as number;
      labels.push(msg.subarray(off + 1, off + 1 + len).toString('latin1'));
      off += 1 + len;
    }
    const qtype = msg.readUInt16BE(off + 1);
    const question = msg.subarray(12, off + 5);
    const name = labels.join('.').toLowerCase();
    const type = qtype === QTYPE.A ? 'A' : qtype === QTYPE.AAAA ? 'AAAA' : qtype;
    queries.push({ name, type });
    const entry = names[name];
    if (entry !== undefined && typeof type === 'string' && entry.silent?.includes(type)) return;
    const addresses = entry === undefined ? [] : ((type === 'A' ? entry.a : type === 'AAAA' ? entry.aaaa : []) ?? []);
    const answers = addresses.map((a) => {
      const rdata = Buffer.from(ipaddr.parse(a).toByteArray());
      const rr = Buffer.alloc(12);
      rr.writeUInt16BE(0xc00c, 0); // the name of the question
      rr.writeUInt16BE(qtype, 2);
      rr.writeUInt16BE(1, 4); // IN
      rr.writeUInt32BE(60, 6);
      rr.writeUInt16BE(rdata.length, 10);
      return Buffer.concat([rr, rdata]);
    });
    const header = Buffer.alloc(12);
    header.writeUInt16BE(msg.readUInt16BE(0), 0);
    // QR, the query's RD, RA; NXDOMAIN for unknown names.
    header.writeUInt16BE(0x8000 | (msg.readUInt16BE(2) & 0x0100) | 0x0080 | (entry === undefined ? 3 : 0), 2);
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(answers.length, 6);
    socket.send(Buffer.concat([header, question, ...answers]), peer.port, peer.address);
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.bind(0, '127.0.0.1', () => resolve());
  });
  return {
    address: `127.0.0.1:${socket.address().port}`,
    queries,
    asked: (name) => queries.filter((q) => q.name === name.toLowerCase()),
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}
