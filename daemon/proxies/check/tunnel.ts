// A check's request through a proxy, on the connection the dialer (upstream/dial.ts) makes: the same path
// the browser's requests take through the forwarding proxy.
//   https target  CONNECT <address>:<port>, then TLS with SNI = the host name   → tls_failed
//                 then GET in origin-form, Host = the URL's host                 → target_unreachable
//   http target   GET http://<address>:<port>/path in absolute-form on the proxy connection, Host =
//                 the URL's host (as a browser sends plain HTTP through a proxy, and as most proxies
//                 allow it: many allow CONNECT only to port 443). The answer is the proxy's or the
//                 target's: 407, and 401 when credentials were sent (tinyproxy answers a wrong
//                 password with 401), are the proxy refusing them       → proxy_auth_failed
//   a host of the proxy's bypass_hosts (a url check): straight to the checked address, as the
//                 browser's request would go, then TLS and GET as above        → target_unreachable
// Every phase waits at most until the check's deadline; past it → timeout, naming the phase.
import { request, type ClientRequest } from 'node:http';
import net from 'node:net';
import tls from 'node:tls';
import type { Duplex } from 'node:stream';
import { authorityOf, CheckFailure, Dial, failure } from '../upstream/dial.js';
import type { Upstream } from '../upstream/upstream.js';

export { CheckFailure, type CheckCause } from '../upstream/dial.js';

interface TunnelRequest {
  url: URL;
  /** Where the request goes: the pinned address of a url check, or the URL's host name. */
  connectHost: string;
  port: number;
  /** Absolute time (ms since epoch) by which everything must be done. */
  deadline: number;
  signal: AbortSignal;
  /** Read at most this many bytes of the body (0: only the status line and headers). */
  bodyLimitBytes: number;
  /** The test build only (core/test-hooks.ts): a direct request goes to this loopback port instead. */
  directToPort?: number;
}

interface TunnelResponse {
  status: number;
  statusText: string;
  body: Buffer;
  /** true for an http target: the answer may be the proxy's own (absolute-form), not only the target's. */
  viaProxyAnswer: boolean;
}

const USER_AGENT = 'browserd-proxy-check';

/** The request through `up`, or straight to the target when `up` is null (a host of the proxy's bypass_hosts). */
export async function fetchThrough(up: Upstream | null, req: TunnelRequest): Promise<TunnelResponse> {
  const dial = new Dial(up, { deadline: req.deadline, deadlineName: "the check's deadline", signal: req.signal });
  const headers = { host: req.url.host, 'user-agent': USER_AGENT, accept: '*/*', connection: 'close' };
  try {
    if (up !== null && req.url.protocol === 'http:') {
      const hostPart = req.port === 80 ? authorityOf(req.connectHost, 80).replace(/:80$/, '') : authorityOf(req.connectHost, req.port);
      const absolute = `http://${hostPart}${req.url.pathname}${req.url.search}`;
      const r = await dial.request('GET', absolute, headers);
      const res = await dial.phase<TunnelResponse>('answer to GET through the proxy', (e) => failure('proxy_unreachable', 'the proxy gave no HTTP answer', e, true), (s) =>
        read(r, req, true, s),
      );
      if (res.status === 407 || (res.status === 401 && dial.authorization !== undefined)) {
        const text = `${res.status}${res.statusText ? ` ${res.statusText}` : ''}`;
        throw new CheckFailure('proxy_auth_failed', dial.authorization === undefined ? `the proxy needs credentials: ${text}` : `the proxy refused the credentials: ${text}`, true);
      }
      return res;
    }
    const direct = (): Promise<net.Socket> =>
      req.directToPort !== undefined ? dial.direct('127.0.0.1', req.directToPort) : dial.direct(req.connectHost, req.port);
    let stream: Duplex = up === null ? await direct() : await dial.tunnel(req.connectHost, req.port, { 'user-agent': USER_AGENT });
    if (req.url.protocol === 'https:') {
      const raw = stream;
      const hostname = bareHost(req.url.hostname);
      stream = await dial.phase<Duplex>('TLS handshake with the target', (e) => failure('tls_failed', `TLS with ${hostname} failed`, e, false), (s) => {
        const sock = dial.track(tls.connect({ socket: raw as net.Socket, host: hostname, servername: net.isIP(hostname) ? undefined : hostname }));
        sock.once('secureConnect', () => s.ok(sock));
        sock.on('error', s.fail);
      });
    }
    const through = stream;
    const r = request({ createConnection: () => through as net.Socket, method: 'GET', path: `${req.url.pathname}${req.url.search}`, setHost: false, headers });
    return await dial.phase<TunnelResponse>('response of the target', (e) => failure('target_unreachable', 'the target gave no HTTP response', e, false), (s) => read(r, req, false, s));
  } finally {
    dial.destroy();
  }
}

function bareHost(h: string): string {
  return h.startsWith('[') ? h.slice(1, -1) : h;
}

/** Sends `r` and reads the answer: the status and the body up to `bodyLimitBytes`. */
function read(r: ClientRequest, req: TunnelRequest, viaProxyAnswer: boolean, s: { ok(v: TunnelResponse): void; fail(e: Error): void }): void {
  r.once('error', s.fail);
  // A tunnel is left paused after the CONNECT answer; the client's listeners are on it now.
  r.once('socket', (sock) => sock.resume());
  r.once('response', (res) => {
    const status = res.statusCode ?? 0;
    const statusText = (res.statusMessage ?? '').slice(0, 100);
    res.on('error', s.fail);
    if (req.bodyLimitBytes === 0) {
      s.ok({ status, statusText, body: Buffer.alloc(0), viaProxyAnswer });
      res.destroy();
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (): void => s.ok({ status, statusText, body: Buffer.concat(chunks).subarray(0, req.bodyLimitBytes), viaProxyAnswer });
    res.on('data', (c: Buffer) => {
      chunks.push(c);
      size += c.length;
      if (size >= req.bodyLimitBytes) {
        done();
        res.destroy();
      }
    });
    res.once('end', done);
  });
  r.end();
}
