// One plain-HTTP request of the browser in absolute-form (`GET http://host/path HTTP/1.1`), parsed
// by node:http's server: forwarded in absolute-form on a new connection to the upstream proxy (so
// the upstream sees and handles it as any proxy request, and adds its Via header), or sent in
// origin-form straight to the target. Hop-by-hop headers are dropped both ways (RFC 9110 §7.6.1:
// Connection and the headers it names, Keep-Alive, Proxy-Connection, Proxy-Authorization,
// Proxy-Authenticate, TE, Trailer, Transfer-Encoding, Upgrade).
//
// The upstream side is a relay of its own, not node:http's client: the request head is written
// by hand (`Connection: close`: one upstream connection per request), the answer's head is read
// by head.ts, and its body goes on to the browser as the views of the buffers it arrived in —
// counted off by its Content-Length, decoded from chunked (chunked.ts), or up to the close —
// with backpressure (the upstream is paused while the browser's side is full). node:http's client
// parser would copy every byte of the body into a new buffer once more (its on_body), which,
// with the buffer of each socket read, made the garbage collector the largest cost of a download.
// The answer to the browser is framed again by node:http's ServerResponse (Content-Length kept,
// else chunked), so the browser's connection keeps node:http's keep-alive handling.
//
// Failures before the answer's head give the browser 502 with a short text naming the cause (a
// 407 of the upstream included: a 407 to Chromium would ask for credentials of the forwarder
// itself); after it, the connection is closed.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Dial, ProxySocket } from '../upstream/dial.js';
import { authorityOf, CheckFailure } from '../upstream/dial.js';
import { ChunkedDecoder } from './chunked.js';
import { answerFraming, HeadReader, type BodyFraming, type ResponseHead } from '../upstream/head.js';
import type { UpstreamReads } from '../upstream/reads.js';
import { connectDirect, RefusedTarget, type DirectOptions } from './route.js';

const noop = (): void => undefined;

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'proxy-authenticate', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

/** rawHeaders without hop-by-hop headers (and those named by Connection). */
export function endToEnd(raw: readonly string[]): string[] {
  const named = new Set<string>();
  for (let i = 0; i < raw.length; i += 2) {
    if ((raw[i] as string).toLowerCase() === 'connection') {
      for (const t of (raw[i + 1] as string).split(',')) named.add(t.trim().toLowerCase());
    }
  }
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const k = (raw[i] as string).toLowerCase();
    if (HOP_BY_HOP.has(k) || named.has(k)) continue;
    out.push(raw[i] as string, raw[i + 1] as string);
  }
  return out;
}

/** How one exchange reports back to the forwarder. */
export interface ExchangeHooks {
  /** The upstream (or direct) connection is open. */
  connected(): void;
  /** It failed before the answer: counted, logged, and told to the browser. */
  failed(err: CheckFailure): void;
  /** Tells the browser `status` with `text` and extra header `fields` (once; later calls do nothing). */
  answer(status: number, text: string, fields?: Readonly<Record<string, string>>): void;
  /** A direct target the egress policy refused once its name was resolved: counted, logged and answered 403. */
  policyDenied(err: RefusedTarget): void;
  /** The answer's head is about to be written to the browser. */
  answering(): void;
  /** Counts `n` bytes of the request body (sent) or of the answer (received). */
  bytes(direction: 'sent' | 'received', n: number): void;
  /** Whether the result may still be used (false once the proxy was switched or the browser went away). */
  current(): boolean;
}

interface ForwardTarget {
  url: URL;
  /** null: straight to the target. */
  dial: Dial | null;
  /** The connection to the proxy, when it was opened already (while the peer was checked) with `reads`. */
  opened?: Promise<ProxySocket>;
  direct: DirectOptions;
  /** The reads of the upstream connection into reused buffers (reads.ts). */
  reads: UpstreamReads;
}

/** The request head sent upstream: request line, the browser's end-to-end fields, Host, framing, auth, Connection: close. */
function requestHead(req: IncomingMessage, path: string, authority: string, auth: string | undefined, chunked: boolean): string {
  const fields = endToEnd(req.rawHeaders);
  let head = `${req.method ?? 'GET'} ${path} HTTP/1.1\r\n`;
  let host = false;
  for (let i = 0; i < fields.length; i += 2) {
    if ((fields[i] as string).toLowerCase() === 'host') host = true;
    head += `${fields[i] as string}: ${fields[i + 1] as string}\r\n`;
  }
  if (!host) head += `Host: ${authority}\r\n`;
  if (chunked) head += 'Transfer-Encoding: chunked\r\n';
  if (auth !== undefined) head += `Proxy-Authorization: ${auth}\r\n`;
  return `${head}Connection: close\r\n\r\n`;
}

/** Forwards `req` to `target` and relays the answer to `res`. Never rejects. */
export async function forwardRequest(req: IncomingMessage, res: ServerResponse, target: ForwardTarget, hooks: ExchangeHooks): Promise<void> {
  const { url } = target;
  const port = url.port === '' ? 80 : Number(url.port);
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  const viaProxy = target.dial !== null;
  let sock: Duplex;
  try {
    sock = target.dial !== null ? await (target.opened ?? target.dial.proxy(target.reads.onread)) : await connectDirect(host, port, target.direct, target.reads.onread);
  } catch (err) {
    if (err instanceof RefusedTarget) return err.policy !== null ? hooks.policyDenied(err) : hooks.answer(403, `browserd: ${err.message}\n`);
    if (err instanceof CheckFailure) return hooks.failed(err);
    return hooks.failed(new CheckFailure('proxy_unreachable', (err as Error).message, true));
  }
  if (!hooks.current() || res.destroyed) {
    sock.destroy();
    return;
  }
  hooks.connected();
  const authority = authorityOf(host, port);
  // The request target as the browser sent it (already canonical) to a proxy; origin-form to the target.
  const path = viaProxy ? (req.url ?? url.href) : `${url.pathname}${url.search}`;
  const chunkedRequest = req.headers['transfer-encoding'] !== undefined;
  sock.write(requestHead(req, path, authority, target.dial?.authorization, chunkedRequest));
  new Relay(req, res, sock, hooks, { viaProxy, authority, authorization: target.dial?.authorization, chunkedRequest }).start(target.reads);
}

interface RelayInfo {
  viaProxy: boolean;
  authority: string;
  authorization: string | undefined;
  /** The request body goes upstream chunked (the browser sent it so; node:http decoded it). */
  chunkedRequest: boolean;
}

/** One request body upstream and one answer back, on one upstream connection. */
class Relay {
  private readonly heads = new HeadReader();
  private framing: BodyFraming | null = null;
  private left = 0;
  private chunks: ChunkedDecoder | null = null;
  private finished = false;
  private waitingDrain = false;
  /** The release of the read being relayed, until a write takes it over. */
  private release: (() => void) | null = null;
  /** Pieces of the current read's body, written together by flush(). */
  private pieces: Buffer[] = [];

  constructor(
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    private readonly sock: Duplex,
    private readonly hooks: ExchangeHooks,
    private readonly info: RelayInfo,
  ) {}

  start(reads: UpstreamReads): void {
    const { req, res, sock } = this;
    // One of the two delivers: the reads into reused buffers, or 'data' (a TLS connection to the proxy).
    reads.attach((d, release) => this.onRead(d, release));
    sock.on('data', (d: Buffer) => this.onRead(d, noop));
    sock.on('end', () => this.onEnd());
    sock.on('error', (e: Error) => this.broken(`no answer for ${this.info.authority}: ${e.message}`));
    sock.on('close', () => this.onEnd());
    res.once('close', () => {
      if (!res.writableFinished) sock.destroy();
    });
    req.on('error', () => sock.destroy());
    this.sendBody();
  }

  /** The request body upstream, with backpressure; chunked again when the browser sent it chunked. */
  private sendBody(): void {
    const { req, sock } = this;
    const onDrain = (): void => void req.resume();
    sock.on('drain', onDrain);
    req.on('data', (c: Buffer) => {
      if (sock.destroyed || c.length === 0) return;
      this.hooks.bytes('sent', c.length);
      const ok = this.info.chunkedRequest ? (sock.write(`${c.length.toString(16)}\r\n`), sock.write(c), sock.write('\r\n')) : sock.write(c);
      if (!ok) req.pause();
    });
    req.once('end', () => {
      sock.off('drain', onDrain);
      if (this.info.chunkedRequest && !sock.destroyed) sock.write('0\r\n\r\n');
    });
  }

  /** One read of the upstream: relayed; its buffer released once the last write of its bytes completed. */
  private onRead(d: Buffer, release: () => void): void {
    this.release = release;
    this.onData(d);
    this.flush();
  }

  private onData(d: Buffer): void {
    if (this.finished) return;
    if (this.framing === null) {
      let got: { head: ResponseHead; rest: Buffer } | null;
      try {
        got = this.heads.push(d);
      } catch (err) {
        return this.broken(`a broken answer from ${this.info.viaProxy ? 'the proxy' : this.info.authority}: ${(err as Error).message}`);
      }
      if (got === null) return;
      if (got.head.status >= 100 && got.head.status < 200) {
        // An interim answer (100 Continue, 103 Early Hints): dropped; the final head follows. 101 would switch protocols, which was never asked for.
        if (got.head.status === 101) return this.broken(`${this.info.authority} switched protocols (101) unasked`);
        return got.rest.length > 0 ? this.onData(got.rest) : undefined;
      }
      if (!this.answerHead(got.head)) return;
      if (got.rest.length === 0) return this.checkDone();
      d = got.rest;
    }
    this.body(d);
  }

  /** Writes the answer's head to the browser; false when the exchange ended instead. */
  private answerHead(head: ResponseHead): boolean {
    const { res, sock, hooks } = this;
    if (this.info.viaProxy && head.status === 407) {
      this.finish();
      const auth = this.info.authorization;
      hooks.failed(new CheckFailure('proxy_auth_failed', auth === undefined ? 'the proxy needs credentials: 407' : 'the proxy refused the credentials: 407', true));
      return false;
    }
    let framing: BodyFraming;
    try {
      framing = answerFraming(this.req.method ?? 'GET', head);
    } catch (err) {
      this.broken(`a broken answer from ${this.info.viaProxy ? 'the proxy' : this.info.authority}: ${(err as Error).message}`);
      return false;
    }
    if (!hooks.current() || res.headersSent || res.destroyed) {
      this.finish();
      sock.destroy();
      return false;
    }
    this.framing = framing;
    const fields = endToEnd(head.raw);
    if (framing.kind === 'length') {
      this.left = framing.length;
      const kept = fields.filter((_, i) => (fields[i - (i % 2)] as string).toLowerCase() !== 'content-length');
      fields.length = 0;
      fields.push(...kept, 'Content-Length', String(framing.length));
    } else if (framing.kind === 'chunked') this.chunks = new ChunkedDecoder();
    hooks.answering();
    res.writeHead(head.status, head.reason, fields);
    res.on('drain', () => {
      this.waitingDrain = false;
      if (!this.finished) sock.resume();
    });
    return true;
  }

  private body(d: Buffer): void {
    const framing = this.framing as BodyFraming;
    switch (framing.kind) {
      case 'none':
        break;
      case 'length': {
        const take = Math.min(this.left, d.length);
        if (take > 0) this.write(take === d.length ? d : d.subarray(0, take));
        this.left -= take;
        break;
      }
      case 'chunked':
        try {
          (this.chunks as ChunkedDecoder).push(d, (piece) => this.write(piece));
        } catch (err) {
          return this.broken(`a broken chunked answer from ${this.info.authority}: ${(err as Error).message}`);
        }
        break;
      case 'close':
        this.write(d);
        break;
    }
    this.checkDone();
  }

  /** Queues a piece of the answer's body (a view of the current read's buffer) for flush(). */
  private write(piece: Buffer): void {
    this.hooks.bytes('received', piece.length);
    this.pieces.push(piece);
  }

  /**
   * Writes the pieces of the current read to the browser; the read's buffer goes back with the
   * completion of the last one (writes complete in order), at once when none was written.
   * Pauses the upstream while the browser's side is full.
   */
  private flush(): void {
    const release = this.release;
    this.release = null;
    const pieces = this.pieces;
    if (pieces.length === 0 || this.res.destroyed) {
      this.pieces = [];
      return release?.();
    }
    this.pieces = [];
    let ok = true;
    for (let i = 0; i < pieces.length; i++) {
      const last = i === pieces.length - 1 && release !== null;
      ok = this.res.write(pieces[i] as Buffer, last ? () => release() : undefined);
    }
    if (!ok && !this.waitingDrain) {
      this.waitingDrain = true;
      this.sock.pause();
    }
  }

  /** Ends the answer once its body is complete (close-delimited: at the upstream's end). */
  private checkDone(): void {
    const f = this.framing;
    if (f === null || this.finished) return;
    const complete = f.kind === 'none' || (f.kind === 'length' && this.left === 0) || (f.kind === 'chunked' && (this.chunks as ChunkedDecoder).done);
    if (!complete) return;
    this.finish();
    this.flush();
    this.res.end();
    this.sock.destroy();
  }

  private onEnd(): void {
    if (this.finished) return;
    if (this.framing?.kind === 'close') {
      this.finish();
      this.res.end();
      this.sock.destroy();
      return;
    }
    this.broken(this.framing === null ? `${this.info.viaProxy ? 'the proxy' : this.info.authority} closed the connection without an answer` : `${this.info.authority} closed the connection before the end of the answer`);
  }

  /** Before the answer's head: 502 naming the cause; after it: the browser's connection is closed. */
  private broken(message: string): void {
    if (this.finished) return;
    this.finish();
    this.sock.destroy();
    if (this.res.headersSent) this.res.destroy();
    else this.hooks.failed(new CheckFailure(this.info.viaProxy ? 'proxy_unreachable' : 'target_unreachable', message, this.info.viaProxy));
  }

  private finish(): void {
    this.finished = true;
    // A request body not sent on (the answer came first, or the exchange broke) is read and dropped, so the
    // browser's connection can carry its next request.
    if (!this.req.complete) this.req.resume();
  }
}
