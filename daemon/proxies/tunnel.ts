// One request through a proxy, phase by phase, each failure named:
//   connect    TCP to the proxy                          → proxy_unreachable
//   proxy TLS  when the proxy's protocol is https         → tls_failed
//   CONNECT    `CONNECT host:port` (+ Basic auth) answer  → 407/401 proxy_auth_failed, other non-2xx
//                                                           target_unreachable, no answer proxy_unreachable
//   target TLS for an https target, SNI = host name       → tls_failed
//   response   GET through the tunnel, Host = the URL's   → target_unreachable
// http targets go through a CONNECT tunnel too (one code path; the proxy never sees the request).
// Every phase waits at most until the check's deadline; past it → timeout, naming the phase.
import { request } from 'node:http';
import net from 'node:net';
import tls from 'node:tls';
import type { Duplex } from 'node:stream';
import type { Upstream } from './upstream.js';

export type CheckCause = 'proxy_unreachable' | 'proxy_auth_failed' | 'target_unreachable' | 'tls_failed' | 'timeout';

export class CheckFailure extends Error {
  constructor(
    readonly code: CheckCause,
    message: string,
    /** A failure of the proxy itself (or the deadline): trying another URL through it cannot help. */
    readonly atProxy: boolean,
  ) {
    super(message);
    this.name = 'CheckFailure';
  }
}

export interface TunnelRequest {
  url: URL;
  /** What CONNECT asks for: the pinned address of a url check, or the URL's host name. */
  connectHost: string;
  port: number;
  /** Absolute time (ms since epoch) by which everything must be done. */
  deadline: number;
  signal: AbortSignal;
  /** Read at most this many bytes of the body (0: only the status line and headers). */
  bodyLimitBytes: number;
}

export interface TunnelResponse {
  status: number;
  body: Buffer;
}

/** The largest CONNECT answer head read before the proxy is called broken. */
export const CONNECT_HEAD_LIMIT_BYTES = 16 * 1024;
const USER_AGENT = 'browserd-proxy-check';

export async function fetchThrough(up: Upstream, req: TunnelRequest): Promise<TunnelResponse> {
  const sockets: Duplex[] = [];
  const track = <T extends Duplex>(s: T): T => {
    sockets.push(s);
    return s;
  };
  const phase = <T>(name: string, onError: (err: Error) => CheckFailure, run: (settle: Settle<T>) => void): Promise<T> =>
    runPhase(name, req, sockets, onError, run);
  const atProxy = true;
  try {
    let proxySocket: net.Socket | tls.TLSSocket = await phase('connection to the proxy', (e) => failure('proxy_unreachable', 'cannot connect to the proxy', e, atProxy), (s) => {
      const sock = track(net.connect({ host: up.host, port: up.port }));
      sock.once('connect', () => s.ok(sock));
      sock.on('error', s.fail);
    });
    if (up.protocol === 'https') {
      const raw = proxySocket;
      proxySocket = await phase('TLS handshake with the proxy', (e) => failure('tls_failed', 'TLS with the proxy failed', e, atProxy), (s) => {
        const sock = track(tls.connect({ socket: raw, host: up.host, servername: net.isIP(up.host) ? undefined : up.host, ca: up.ca }));
        sock.once('secureConnect', () => s.ok(sock));
        sock.on('error', s.fail);
      });
    }
    const tunnel = proxySocket;
    await phase('answer to CONNECT', (e) => failure('proxy_unreachable', 'the proxy did not answer CONNECT', e, atProxy), (s) => connect(tunnel, up, req, s));

    let stream: Duplex = tunnel;
    if (req.url.protocol === 'https:') {
      const hostname = bareHost(req.url.hostname);
      stream = await phase('TLS handshake with the target', (e) => failure('tls_failed', `TLS with ${hostname} failed`, e, !atProxy), (s) => {
        const sock = track(tls.connect({ socket: tunnel, host: hostname, servername: net.isIP(hostname) ? undefined : hostname }));
        sock.once('secureConnect', () => s.ok(sock));
        sock.on('error', s.fail);
      });
    }
    const through = stream;
    return await phase('response of the target', (e) => failure('target_unreachable', 'the target gave no HTTP response', e, !atProxy), (s) => get(through, req, s));
  } finally {
    for (const s of sockets) s.destroy();
  }
}

interface Settle<T> {
  ok(value: T): void;
  fail(err: Error): void;
}

function runPhase<T>(
  name: string,
  req: TunnelRequest,
  sockets: Duplex[],
  onError: (err: Error) => CheckFailure,
  run: (settle: Settle<T>) => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let done = false;
    const finish = (): boolean => {
      if (done) return false;
      done = true;
      clearTimeout(timer);
      req.signal.removeEventListener('abort', onAbort);
      return true;
    };
    const onAbort = (): void => {
      if (finish()) reject(new CheckFailure('timeout', `the check was cancelled during the ${name}: the daemon is stopping`, true));
      for (const s of sockets) s.destroy();
    };
    const timer = setTimeout(() => {
      if (finish()) reject(new CheckFailure('timeout', `no ${name} before the check's deadline`, true));
      for (const s of sockets) s.destroy();
    }, Math.max(0, req.deadline - Date.now()));
    if (req.signal.aborted) return onAbort();
    req.signal.addEventListener('abort', onAbort, { once: true });
    try {
      run({
        ok: (v) => {
          if (finish()) resolve(v);
        },
        fail: (err) => {
          if (finish()) reject(err instanceof CheckFailure ? err : onError(err));
        },
      });
    } catch (err) {
      if (finish()) reject(onError(err as Error));
    }
  });
}

function failure(cause: CheckCause, what: string, err: Error, atProxy: boolean): CheckFailure {
  const code = (err as NodeJS.ErrnoException).code;
  return new CheckFailure(cause, `${what}: ${code !== undefined && !err.message.includes(code) ? `${code} (${err.message})` : err.message}`, atProxy);
}

function bareHost(h: string): string {
  return h.startsWith('[') ? h.slice(1, -1) : h;
}

/** Writes CONNECT, reads the answer head; settles ok on 2xx with the socket positioned after the head. */
function connect(sock: Duplex, up: Upstream, req: TunnelRequest, s: Settle<void>): void {
  const authority = net.isIPv6(req.connectHost) ? `[${req.connectHost}]:${req.port}` : `${req.connectHost}:${req.port}`;
  const lines = [`CONNECT ${authority} HTTP/1.1`, `Host: ${authority}`, `User-Agent: ${USER_AGENT}`];
  if (up.username !== undefined) {
    lines.push(`Proxy-Authorization: Basic ${Buffer.from(`${up.username}:${up.password ?? ''}`, 'utf8').toString('base64')}`);
  }
  let head = Buffer.alloc(0);
  const onData = (chunk: Buffer): void => {
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf('\r\n\r\n');
    if (end < 0) {
      if (head.length > CONNECT_HEAD_LIMIT_BYTES) {
        cleanup();
        s.fail(new CheckFailure('proxy_unreachable', `the proxy's answer to CONNECT is not HTTP (no end of head within ${CONNECT_HEAD_LIMIT_BYTES} bytes)`, true));
      }
      return;
    }
    cleanup();
    const rest = head.subarray(end + 4);
    if (rest.length > 0) sock.unshift(rest);
    const statusLine = head.subarray(0, head.indexOf('\r\n')).toString('latin1');
    const m = /^HTTP\/1\.[01] (\d{3})(?: (.*))?$/.exec(statusLine);
    if (!m) return s.fail(new CheckFailure('proxy_unreachable', `the proxy's answer to CONNECT is not HTTP: ${JSON.stringify(statusLine.slice(0, 80))}`, true));
    const status = Number(m[1]);
    const text = `${status}${m[2] ? ` ${m[2].slice(0, 100)}` : ''}`;
    if (status >= 200 && status < 300) return s.ok();
    if (status === 407 || status === 401) return s.fail(new CheckFailure('proxy_auth_failed', `the proxy refused the credentials: ${text}`, true));
    return s.fail(new CheckFailure('target_unreachable', `the proxy answered CONNECT ${authority} with ${text}`, false));
  };
  const onEnd = (): void => {
    cleanup();
    s.fail(new CheckFailure('proxy_unreachable', 'the proxy closed the connection without answering CONNECT', true));
  };
  const onError = (err: Error): void => {
    cleanup();
    s.fail(err);
  };
  const cleanup = (): void => {
    sock.off('data', onData);
    sock.off('end', onEnd);
    sock.off('close', onEnd);
    sock.off('error', onError);
    sock.pause();
  };
  sock.on('data', onData);
  sock.once('end', onEnd);
  sock.once('close', onEnd);
  sock.once('error', onError);
  sock.write(`${lines.join('\r\n')}\r\n\r\n`);
}

/** GET the URL over an open tunnel; the body up to `bodyLimitBytes`. */
function get(stream: Duplex, req: TunnelRequest, s: Settle<TunnelResponse>): void {
  const r = request({
    createConnection: () => stream as net.Socket,
    method: 'GET',
    path: `${req.url.pathname}${req.url.search}`,
    setHost: false,
    headers: { host: req.url.host, 'user-agent': USER_AGENT, accept: '*/*', connection: 'close' },
  });
  r.once('error', s.fail);
  // The tunnel was paused after the CONNECT answer; the client's listeners are on it now.
  r.once('socket', (sock) => sock.resume());
  r.once('response', (res) => {
    const status = res.statusCode ?? 0;
    if (req.bodyLimitBytes === 0) {
      s.ok({ status, body: Buffer.alloc(0) });
      res.destroy();
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (): void => s.ok({ status, body: Buffer.concat(chunks).subarray(0, req.bodyLimitBytes) });
    res.on('data', (c: Buffer) => {
      chunks.push(c);
      size += c.length;
      if (size >= req.bodyLimitBytes) {
        done();
        res.destroy();
      }
    });
    res.once('end', done);
    res.once('error', s.fail);
  });
  r.end();
}
