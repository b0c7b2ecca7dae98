// The one way to an upstream proxy. The checks and the forwarding proxy (forwarder/) both connect
// through a Dial, so a check tests exactly the connection the browser's traffic takes. Phases, all
// under one deadline (each waits at most what is left; past it: `timeout`, naming the phase):
//   connect    TCP to the proxy                                        → proxy_unreachable
//   proxy TLS  when the proxy's protocol is https: verified against its ca_bundle (else the system
//              CAs), SNI = the proxy's host name                       → tls_failed
//   CONNECT    `CONNECT host:port` with Basic proxy auth when the upstream has a username; the
//              answer is read by node:http's parser                    → 401/407 proxy_auth_failed,
//              other non-2xx target_unreachable, no or broken answer proxy_unreachable
// or, instead of CONNECT, a plain-HTTP request in absolute-form on the proxy connection (request()).
//
// A proxy that does not speak TLS, asked for TLS (protocol https, the default, at a plain HTTP
// proxy): it answers the ClientHello with HTTP or other bytes that are no TLS record (OpenSSL's
// "wrong version number" & co.), or waits for a line end that never comes, or closes. The first
// is told at once; for the others the TLS phase ends PROBE_RESERVE_MS before the deadline and a
// second connection asks the same port in plain HTTP: an HTTP answer there names the mistake.
import { request as httpRequest, type ClientRequest, type OutgoingHttpHeaders } from 'node:http';
import net from 'node:net';
import tls from 'node:tls';
import type { Duplex } from 'node:stream';
import { HeadReader, type ResponseHead } from './head.js';
import type { UpstreamReads } from './reads.js';
import type { Upstream } from './upstream.js';

export type CheckCause = 'proxy_unreachable' | 'proxy_auth_failed' | 'target_unreachable' | 'tls_failed' | 'timeout';

export class CheckFailure extends Error {
  constructor(
    readonly code: CheckCause,
    message: string,
    /** A failure of the proxy itself (or the deadline): another target through it cannot help. */
    readonly atProxy: boolean,
  ) {
    super(message);
    this.name = 'CheckFailure';
  }
}

/** The message of a https proxy that turns out to speak plain HTTP (protocol defaults to https). */
export const NOT_TLS_HINT = 'no TLS handshake with the proxy — is it a plain HTTP proxy? set protocol: http';
/** At most this much of the deadline is kept for the plain-HTTP probe after a TLS handshake that got nowhere. */
export const PROBE_RESERVE_MS = 1000;
/** OpenSSL's answers to bytes that are no TLS record. */
const NOT_TLS_CODES = new Set([
  'ERR_SSL_WRONG_VERSION_NUMBER',
  'ERR_SSL_PACKET_LENGTH_TOO_LONG',
  'ERR_SSL_UNKNOWN_PROTOCOL',
  'ERR_SSL_RECORD_LAYER_FAILURE',
  'ERR_SSL_HTTP_REQUEST',
  'ERR_SSL_HTTPS_PROXY_REQUEST',
  'ERR_SSL_BAD_RECORD_TYPE',
]);
/** TLS failures after which the probe may tell a plain HTTP proxy (a close before any TLS answer). */
const PROBE_CODES = new Set(['ECONNRESET', 'EPIPE']);

interface DialOptions {
  /** Absolute time (ms since epoch) by which every phase must be done. */
  deadline: number;
  /** What the deadline is, for timeout messages ("the check's deadline"). */
  deadlineName: string;
  /** Aborted when the work is no longer wanted (daemon stopping, client gone, proxy switched). */
  signal: AbortSignal;
}

export type ProxySocket = net.Socket | tls.TLSSocket;

interface Settle<T> {
  ok(value: T): void;
  fail(err: Error): void;
}

/** `host:port`, IPv6 in brackets. */
export function authorityOf(host: string, port: number): string {
  return net.isIPv6(host) ? `[${host}]:${port}` : `${host}:${port}`;
}

/** One connection attempt through an upstream (or, with none, straight to a target); destroy() ends every socket it opened. */
export class Dial {
  private readonly sockets: Duplex[] = [];
  private phaseTimedOut = false;

  constructor(
    /** null: no proxy (only direct() may be used). */
    private readonly upstream: Upstream | null,
    private readonly opts: DialOptions,
  ) {}

  get up(): Upstream {
    if (this.upstream === null) throw new Error('this dial has no upstream');
    return this.upstream;
  }

  /** The Proxy-Authorization value (Basic), or undefined when the upstream has no username. */
  get authorization(): string | undefined {
    const username = this.upstream?.username;
    return username === undefined ? undefined : `Basic ${Buffer.from(`${username}:${this.upstream?.password ?? ''}`, 'utf8').toString('base64')}`;
  }

  /** TCP straight to host:port (no proxy: a target the browser reaches directly). */
  direct(host: string, port: number): Promise<net.Socket> {
    return this.phase<net.Socket>('connection to the target', (e) => failure('target_unreachable', `cannot connect to ${authorityOf(host, port)}`, e, false), (s) => {
      const sock = this.track(net.connect({ host, port }));
      sock.once('connect', () => s.ok(sock));
      sock.on('error', s.fail);
    });
  }

  /**
   * TCP to the proxy, and TLS when its protocol is https. `onread` (a plain-HTTP proxy only; TLS
   * reads the socket itself): the socket reads into the caller's buffers and emits no 'data'.
   */
  async proxy(onread?: net.OnReadOpts): Promise<ProxySocket> {
    const { up } = this;
    const raw = await this.phase<net.Socket>('connection to the proxy', (e) => failure('proxy_unreachable', 'cannot connect to the proxy', e, true), (s) => {
      const sock = this.track(net.connect({ host: up.host, port: up.port, ...(onread !== undefined && up.protocol === 'http' ? { onread } : {}) }));
      sock.once('connect', () => s.ok(sock));
      sock.on('error', s.fail);
    });
    raw.setNoDelay(true);
    return up.protocol === 'https' ? this.proxyTls(raw) : raw;
  }

  /**
   * proxy() (or the connection `opened` by an earlier proxy() call), then `CONNECT host:port`;
   * resolves with the tunnel, positioned after the answer: paused, the bytes after the answer's
   * head put back. The answer's head is read by the forwarder's head reader (one small write out,
   * one head in: no HTTP client machinery per tunnel). `reads`: the connection was opened with
   * reads.onread (no 'data' events); the bytes after the head stay with it for the next sink.
   */
  async tunnel(host: string, port: number, headers: Record<string, string> = {}, opened?: Promise<ProxySocket>, reads?: UpstreamReads): Promise<ProxySocket> {
    const sock = await (opened ?? this.proxy(reads?.onread));
    const authority = authorityOf(host, port);
    const auth = this.authorization;
    return this.phase<ProxySocket>('answer to CONNECT', (e) => failure('proxy_unreachable', 'the proxy gave no HTTP answer to CONNECT', e, true), (s) => {
      const heads = new HeadReader();
      const onClose = (): void => s.fail(new Error('the connection closed'));
      const done = (): void => {
        sock.off('data', onData);
        sock.off('close', onClose);
        sock.off('error', s.fail);
        reads?.detach();
      };
      const onData = (d: Buffer): void => {
        let got: { head: ResponseHead; rest: Buffer } | null;
        try {
          got = heads.push(d);
        } catch (err) {
          done();
          return s.fail(err as Error);
        }
        if (got === null) return;
        done();
        sock.pause();
        if (got.rest.length > 0) {
          if (reads !== undefined) reads.keep(got.rest);
          else sock.unshift(got.rest);
        }
        const { status, reason } = got.head;
        const text = `${status}${reason ? ` ${reason.slice(0, 100)}` : ''}`;
        if (status >= 200 && status < 300) return s.ok(sock);
        if (status === 407 || status === 401) {
          return s.fail(new CheckFailure('proxy_auth_failed', auth === undefined ? `the proxy needs credentials: ${text}` : `the proxy refused the credentials: ${text}`, true));
        }
        s.fail(new CheckFailure('target_unreachable', `the proxy answered CONNECT ${authority} with ${text}`, false));
      };
      sock.on('data', onData);
      reads?.attach((d, release) => {
        onData(d); // what the head reader keeps it copies, and so does keep()
        release();
      });
      sock.once('close', onClose);
      sock.on('error', s.fail);
      let head = `CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n`;
      for (const [k, v] of Object.entries(headers)) head += `${k}: ${v}\r\n`;
      if (auth !== undefined) head += `Proxy-Authorization: ${auth}\r\n`;
      sock.write(`${head}\r\n`);
    });
  }

  /**
   * proxy() (or `opened`), then a plain-HTTP request in absolute-form (`GET http://host/path`) on that connection,
   * with Basic proxy auth when the upstream has a username. The caller sends the body and reads the answer.
   */
  async request(method: string, absoluteUrl: string, headers: OutgoingHttpHeaders | string[], opened?: Promise<ProxySocket>): Promise<ClientRequest> {
    const sock = await (opened ?? this.proxy());
    const auth = this.authorization;
    const all = auth === undefined ? headers : Array.isArray(headers) ? [...headers, 'proxy-authorization', auth] : { ...headers, 'proxy-authorization': auth };
    return httpRequest({ method, path: absoluteUrl, setHost: false, headers: all, createConnection: () => sock });
  }

  /** Runs one phase: settles with `run`, or rejects at `until` (timeout) or on abort, ending every socket then. */
  phase<T>(name: string, onError: (err: Error) => CheckFailure, run: (settle: Settle<T>) => void, until = this.opts.deadline): Promise<T> {
    const { signal } = this.opts;
    return new Promise<T>((resolve, reject) => {
      let done = false;
      const finish = (): boolean => {
        if (done) return false;
        done = true;
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        return true;
      };
      const onAbort = (): void => {
        const why = typeof signal.reason === 'string' ? signal.reason : 'it was cancelled';
        if (finish()) reject(new CheckFailure('timeout', `no ${name}: ${why}`, true));
        this.destroy();
      };
      const timer = setTimeout(() => {
        this.phaseTimedOut = true;
        if (finish()) reject(new CheckFailure('timeout', `no ${name} before ${this.opts.deadlineName}`, true));
        this.destroy();
      }, Math.max(0, until - Date.now()));
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
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

  track<T extends Duplex>(s: T): T {
    this.sockets.push(s);
    return s;
  }

  /** Ends every socket of this dial. Idempotent. */
  destroy(): void {
    for (const s of this.sockets) s.destroy();
  }

  private async proxyTls(raw: net.Socket): Promise<tls.TLSSocket> {
    const { up, opts } = this;
    const reserve = Math.min(PROBE_RESERVE_MS, Math.max(0, (opts.deadline - Date.now()) / 4));
    const seen: { err: Error | null } = { err: null };
    try {
      return await this.phase<tls.TLSSocket>(
        'TLS handshake with the proxy',
        (e) => {
          seen.err = e;
          const code = (e as NodeJS.ErrnoException).code ?? '';
          if (NOT_TLS_CODES.has(code)) return new CheckFailure('tls_failed', `${NOT_TLS_HINT} (it answered the TLS ClientHello with bytes that are no TLS: ${code})`, true);
          return failure('tls_failed', 'TLS with the proxy failed', e, true);
        },
        (s) => {
          const sock = this.track(tls.connect({ socket: raw, host: up.host, servername: net.isIP(up.host) ? undefined : up.host, ca: up.ca }));
          sock.once('secureConnect', () => s.ok(sock));
          sock.on('error', s.fail);
        },
        opts.deadline - reserve,
      );
    } catch (err) {
      const closed = seen.err !== null && PROBE_CODES.has((seen.err as NodeJS.ErrnoException).code ?? '');
      if (opts.signal.aborted || !(closed || this.phaseTimedOut)) throw err;
      const answer = await this.plainProbe();
      if (answer !== null) throw new CheckFailure('tls_failed', `${NOT_TLS_HINT} (the same port answers plain HTTP: ${JSON.stringify(answer)})`, true);
      throw err;
    }
  }

  /** The status line when the proxy's port answers a plain HTTP request within the deadline, else null. Never throws. */
  private plainProbe(): Promise<string | null> {
    const { up, opts } = this;
    return new Promise((resolve) => {
      const left = opts.deadline - Date.now();
      if (left <= 0) return resolve(null);
      const sock = this.track(net.connect({ host: up.host, port: up.port }));
      let text = '';
      const done = (answer: string | null): void => {
        clearTimeout(timer);
        opts.signal.removeEventListener('abort', onAbort);
        sock.destroy();
        resolve(answer);
      };
      const onAbort = (): void => done(null);
      const timer = setTimeout(() => done(null), left);
      opts.signal.addEventListener('abort', onAbort, { once: true });
      sock.on('error', () => done(null));
      sock.on('close', () => done(/^HTTP\/\d/.test(text) ? (text.split('\r\n')[0] ?? '').slice(0, 100) : null));
      sock.once('connect', () => sock.write(`HEAD / HTTP/1.0\r\nHost: ${authorityOf(up.host, up.port)}\r\n\r\n`));
      sock.on('data', (d: Buffer) => {
        text += d.toString('latin1');
        if (text.includes('\r\n') || text.length >= 256) done(/^HTTP\/\d/.test(text) ? (text.split('\r\n')[0] ?? '').slice(0, 100) : null);
      });
    });
  }
}

/** A CheckFailure of `cause` that names the error's code. */
export function failure(cause: CheckCause, what: string, err: Error, atProxy: boolean): CheckFailure {
  const code = (err as NodeJS.ErrnoException).code;
  return new CheckFailure(cause, `${what}: ${code !== undefined && !err.message.includes(code) ? `${code} (${err.message})` : err.message}`, atProxy);
}
