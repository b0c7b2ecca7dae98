// Fixtures of the forwarding-proxy tests: an origin that reports the Via header it saw (and can hold
// a request), clients that talk to the forwarder as a browser does (absolute-form requests,
// CONNECT tunnels, one raw keep-alive connection), and the chain tinyproxy → a proxy of the test →
// the origin, so that any host name reaches the loopback origin and no name is ever resolved.
import http from 'node:http';
import net from 'node:net';
import type { Daemon } from '../../kit/daemon.js';
import { startConnectProxy, startTinyproxy, type Closer, type ConnectProxy, type Tinyproxy } from './servers.js';

export interface ViaOrigin extends Closer {
  port: number;
  /** Every request: its path, Via header and Host. */
  seen: { url: string; via: string | null; host: string | undefined }[];
  /** Resolves when a request for `path` arrived. */
  arrived(path: string): Promise<void>;
  /** Answers every held request (`/hold`). */
  release(): void;
}

/** `/via` → {"via", "host"}; `/hold` → waits for release(); `/bytes/<n>` → n bytes; else 404. */
export async function startViaOrigin(): Promise<ViaOrigin> {
  const seen: ViaOrigin['seen'] = [];
  const waiters: { path: string; resolve: () => void }[] = [];
  const held: http.ServerResponse[] = [];
  const server = http.createServer((req, res) => {
    const url = req.url ?? '';
    seen.push({ url, via: req.headers.via ?? null, host: req.headers.host });
    for (const w of waiters.filter((x) => x.path === url)) w.resolve();
    const bytes = /^\/bytes\/(\d+)$/.exec(url);
    if (url === '/via') res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ via: req.headers.via ?? null, host: req.headers.host }));
    else if (url === '/hold') held.push(res);
    else if (bytes) sendBytes(res, Number(bytes[1]));
    else res.writeHead(404).end('not found');
  });
  const sockets = new Set<net.Socket>();
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    seen,
    arrived: (path) => (seen.some((r) => r.url === path) ? Promise.resolve() : new Promise((resolve) => waiters.push({ path, resolve }))),
    release: () => {
      for (const r of held.splice(0)) if (!r.destroyed) r.end('released');
    },
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** `n` bytes of 'a' as the answer, written in chunks of `chunkBytes`, pausing for drain (also the forwarder benchmarks' origin). */
export function sendBytes(res: http.ServerResponse, n: number, headers: http.OutgoingHttpHeaders = {}, chunkBytes = 64 * 1024): void {
  res.writeHead(200, { ...headers, 'content-type': 'application/octet-stream', 'content-length': n });
  const chunk = Buffer.alloc(chunkBytes, 0x61);
  let left = n;
  const pump = (): void => {
    while (left > 0) {
      const part = left >= chunk.length ? chunk : chunk.subarray(0, left);
      left -= part.length;
      if (!res.write(part)) return void res.once('drain', pump);
    }
    res.end();
  };
  pump();
}

export interface Hop extends Closer {
  tiny: Tinyproxy;
  /** The proxy behind tinyproxy: what reached it, with tinyproxy's Via header. */
  sink: ConnectProxy;
}

/** tinyproxy (its Via header `1.1 <name> (tinyproxy/…)`) in front of a proxy of the test that sends everything to `originPort`. */
export async function startHop(name: string, originPort: number, auth?: { user: string; pass: string }): Promise<Hop> {
  const sink = await startConnectProxy({ route: () => originPort });
  const tiny = await startTinyproxy({ ...auth, connectPorts: [originPort], via: name, upstreamPort: sink.port });
  return {
    tiny,
    sink,
    close: async () => {
      await tiny.close();
      await sink.close();
    },
  };
}

/** The forwarding proxy's port, from the daemon's `forwarder_listening` log line (the last one). */
export async function forwarderPort(d: Daemon): Promise<number> {
  await d.waitLog((l) => l.event === 'forwarder_listening');
  return Number([...d.logs].reverse().find((l) => l.event === 'forwarder_listening')?.port);
}

export interface Answer {
  status: number;
  body: string;
}

/** One absolute-form request through the forwarder on a new connection. */
export function viaProxy(port: number, url: string, agent: http.Agent | false = false): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: url, agent, headers: { host: new URL(url).host } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/** `CONNECT authority` through the forwarder; on 200, `GET path` inside the tunnel (plain HTTP). */
export function viaTunnel(port: number, authority: string, path: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'CONNECT', path: authority, agent: false });
    req.on('error', reject);
    req.on('connect', (res, socket: net.Socket, head: Buffer) => {
      if (res.statusCode !== 200) {
        let body = head.toString();
        socket.on('data', (c: Buffer) => (body += c.toString()));
        socket.on('error', () => undefined);
        socket.on('close', () => resolve({ status: res.statusCode ?? 0, body }));
        return;
      }
      const inner = http.request({ createConnection: () => socket, path, headers: { host: authority, connection: 'close' } }, (r) => {
        let body = '';
        r.setEncoding('utf8');
        r.on('data', (c: string) => (body += c));
        r.on('end', () => resolve({ status: r.statusCode ?? 0, body }));
      });
      inner.on('error', reject);
      inner.end();
    });
    req.end();
  });
}

/** A raw connection to the forwarder: write requests by hand, read what comes back. */
export interface RawConnection {
  socket: net.Socket;
  /** Everything received so far. */
  received(): string;
  /** Resolves once the received text includes `text`. */
  waitFor(text: string): Promise<void>;
  /** Resolves when the connection is closed (by either end). */
  closed: Promise<void>;
}

export async function rawConnection(port: number): Promise<RawConnection> {
  const socket = net.connect(port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  let text = '';
  const waiters: { text: string; resolve: () => void }[] = [];
  socket.on('error', () => undefined);
  socket.on('data', (c: Buffer) => {
    text += c.toString('latin1');
    for (const w of waiters.filter((x) => text.includes(x.text))) w.resolve();
  });
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  return {
    socket,
    received: () => text,
    waitFor: (t) => (text.includes(t) ? Promise.resolve() : new Promise((resolve) => waiters.push({ text: t, resolve }))),
    closed,
  };
}

/** PATCH /browsers/{id} with `body`; returns the status and the parsed answer. */
export async function patchBrowser(d: Daemon, body: unknown, token?: string): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await d.fetch('/browsers/local', { method: 'PATCH', json: body, ...(token !== undefined ? { headers: { authorization: `Bearer ${token}` } } : {}) });
  const text = await res.text();
  return { status: res.status, json: JSON.parse(text) as Record<string, unknown> };
}
