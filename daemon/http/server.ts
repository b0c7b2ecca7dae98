// The HTTP server: request ids, routing, auth, the session check, one error shape, access logs,
// metrics, WebSocket upgrades; its connections and their graceful close are drain.ts's.
import { randomUUID } from 'node:crypto';
import { STATUS_CODES, ServerResponse, createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import type { Metrics } from '../core/metrics.js';
import { requireScope, type Identity, type KeyRing } from './auth.js';
import { lingerOnRefusedBody, readJson, readJsonBase64 } from './body.js';
import { isStateChanging, runKeyed, runRoute } from './dispatch.js';
import { BodyTap, IdempotencyStore } from './idempotency.js';
import { parseParams, parseQuery } from './query.js';
import { watchRequestIdle } from './request-idle.js';
import { Drain, KEEP_ALIVE_MS } from './drain.js';
import { LazyAbort } from './lazy-abort.js';
import { BadRequestError, InvalidRequestError, NotFoundError, TimeoutError, UnauthorizedError } from '../core/errors.js';
import { MethodNotAllowedError, toHttpError, type HttpError } from './errors.js';
import { withRootPaths } from './route.js';
import { Router, type RequestContext, type Route } from './router.js';

const REQ_ID_RE = /^[A-Za-z0-9._:-]{1,128}$/;

export interface ServerDeps {
  config: Config;
  log: Logger;
  metrics: Metrics;
  keyring: KeyRing;
  routes: Route[];
  /** Every request, once its response has closed (the telemetry's api_call): no bodies, no query. */
  onRequestDone?(r: { method: string; route: string; status: number; ms: number; reqId: string; keyId: string | undefined }): void;
}

export class HttpServer {
  readonly router: Router;
  private readonly server: Server;
  private readonly drain: Drain;
  private readonly idempotency: IdempotencyStore;
  /**
   * The access line's logger: pino's field redaction (token, authorization, … by name) off, as the
   * line's fields are fixed and none is one of those (~5 µs a line). The stream's filter of session
   * tokens (core/log.ts, redactTokens) still sees the line.
   */
  private readonly accessLog: Logger;

  constructor(private readonly deps: ServerDeps) {
    this.router = new Router(withRootPaths(deps.routes));
    this.accessLog = deps.log.child({}, { redact: { paths: [], censor: '[redacted]' } });
    this.idempotency = new IdempotencyStore({ maxKeys: deps.config.http.idempotencyMaxKeys, maxBytes: deps.config.http.idempotencyMaxBytes, metrics: deps.metrics });
    const idleMs = deps.config.http.requestIdleTimeoutMs;
    this.server = createServer(
      {
        keepAliveTimeout: KEEP_ALIVE_MS,
        // No whole-request limit (Node's default cuts at 300 s an upload of up to 4 GiB that is still
        // sending): a body that stops arriving is ended by the idle timeout instead (request-idle.ts).
        requestTimeout: 0,
        // Every header of a request within the idle timeout (slow-header clients), looked at this often.
        headersTimeout: idleMs,
        connectionsCheckingInterval: Math.min(30_000, Math.max(25, Math.floor(idleMs / 4))),
      },
      (req, res) => void this.onRequest(req, res),
    );
    this.drain = new Drain(this.server, deps.log);
    this.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => this.onUpgrade(req, socket, head));
    this.server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
      if (!socket.writable) return socket.destroy();
      const [status, body] =
        err.code === 'HPE_HEADER_OVERFLOW'
          ? [431, { code: 'invalid_request', message: 'the request headers are too large' }]
          : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
            ? [408, { code: 'timeout', message: 'the request was not received in time' }]
            : [400, { code: 'invalid_request', message: `malformed HTTP request: ${err.message}` }];
      writeRaw(socket, status, body, { 'x-request-id': randomUUID(), 'x-should-retry': String(status === 408) });
    });
  }

  async listen(): Promise<AddressInfo> {
    const { host, port } = this.deps.config.listen;
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    return this.server.address() as AddressInfo;
  }

  /** Graceful: stop accepting, end streams, let requests in flight finish within `deadlineMs`. Idempotent. */
  close(deadlineMs: number): Promise<void> {
    return this.drain.close(deadlineMs);
  }

  /** Now: every connection is cut. Idempotent. */
  destroy(): void {
    this.drain.destroy();
  }

  private async onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = process.hrtime.bigint();
    const reqId = requestId(req);
    // The request's logger (its lines carry req_id), made when first used: most requests log only
    // their access line, which names req_id itself.
    let child: Logger | null = null;
    const logOf = (): Logger => (child ??= this.deps.log.child({ req_id: reqId }));
    let routeName = 'unmatched';
    let keyId: string | undefined;
    let htmlErrors = false;
    res.setHeader('x-request-id', reqId);
    // A request with an Idempotency-Key owns its work beyond its connection: the client going away
    // does not abort it (its retry picks the answer up); shutdown does.
    const keyed = isStateChanging(req.method) && req.headers['idempotency-key'] !== undefined;
    const ended = new LazyAbort(); // the request's signal: shutdown, or its response closed
    const gone = new LazyAbort();
    const closed = this.drain.request(req, res, ended);
    if (!req.complete && hasBody(req)) watchRequestIdle(req, this.deps.config.http.requestIdleTimeoutMs, () => this.onRequestIdle(req, res, logOf()));
    res.on('close', () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      const status = res.headersSent ? res.statusCode : 499;
      this.deps.metrics.httpDuration.observe({ method: req.method ?? '', route: routeName, status: String(status) }, ms / 1000);
      this.accessLog.info({ req_id: reqId, event: 'request', method: req.method, route: routeName, status, ms: Math.round(ms * 10) / 10, key_id: keyId }, 'request');
      this.deps.onRequestDone?.({ method: req.method ?? '', route: routeName, status, ms, reqId, keyId });
      closed();
      if (keyed) return;
      gone.abort();
      ended.abort();
    });

    try {
      const url = parseTarget(req);
      const match = this.match(req.method ?? 'GET', url.pathname);
      if (match.kind === 'none') throw new NotFoundError(`no route for ${url.pathname}`);
      if (match.kind === 'method') throw new MethodNotAllowedError(req.method ?? '', match.allowed);
      const { route, params } = match;
      routeName = route.path;
      htmlErrors = route.htmlErrors === true && acceptsHtml(req);
      // A key answers at once; a session token is verified first (a promise). The body of a keyed
      // request is tapped before that wait: its bytes may come in meanwhile.
      const tap = keyed ? new BodyTap(req) : undefined;
      const auth = this.authorize(route, req, params, url);
      const identity = auth instanceof Promise ? await auth : auth;
      keyId = identity?.keyId;
      if (route.upgrade) throw new InvalidRequestError('this route takes a WebSocket upgrade (Connection: Upgrade, Upgrade: websocket)');
      const typed = parseParams(route.doc.params, params);
      const query = parseQuery(route.doc.query, url);
      const problems = [...(typed.ok ? [] : typed.problems), ...(query.ok ? [] : query.problems)];
      if (!typed.ok || !query.ok) throw new BadRequestError(problems);
      const ctx: RequestContext = {
        req,
        res,
        url,
        params: typed.value as Record<string, string>,
        query: query.value,
        body: undefined,
        identity,
        reqId,
        get log() {
          return logOf();
        },
        get signal() {
          return ended.signal;
        },
        get clientGone() {
          return gone.signal;
        },
        json: (schema, opts) =>
          readJson(req, schema, { limitBytes: opts?.limitBytes ?? this.deps.config.http.bodyLimitBytes, optional: opts?.optional }),
        jsonBase64: (schema, field, opts) => readJsonBase64(req, schema, field, { limitBytes: opts?.limitBytes ?? this.deps.config.http.bodyLimitBytes }),
      };
      const key = keyed && identity !== null ? IdempotencyStore.keyOf(req) : null;
      const check = this.deps.config.testHooks.checkAnswers;
      if (key !== null && identity !== null) await runKeyed(ctx, route, this.idempotency, identity.keyId, key, tap, check);
      else await runRoute(ctx, route, check);
    } catch (err) {
      const httpErr = toHttpError(err);
      if (httpErr.unexpected) logOf().error({ event: 'internal_error', route: routeName, err }, 'unhandled error in a handler');
      if (res.headersSent) {
        res.destroy();
        return;
      }
      for (const [k, v] of Object.entries(httpErr.headers)) res.setHeader(k, v);
      if (!req.complete) res.on('finish', () => lingerOnRefusedBody(req));
      if (htmlErrors) writeHtmlError(res, httpErr);
      else writeJson(res, httpErr.status, httpErr.body);
    }
  }

  /**
   * The request's body stopped arriving (request-idle.ts): 408 when no answer has begun, then the
   * request is ended, which fails its handler's read of the body (the handler's own error answer
   * then finds the response sent). A retry is safe: the body never arrived whole, so nothing used it.
   */
  private onRequestIdle(req: IncomingMessage, res: ServerResponse, log: Logger): void {
    const ms = this.deps.config.http.requestIdleTimeoutMs;
    const message = `no byte of the request arrived for ${ms} ms (BROWSERD_REQUEST_IDLE_TIMEOUT_MS)`;
    log.warn({ event: 'request_idle', idle_ms: ms, bytes_read: req.socket.bytesRead }, 'the request stopped arriving: ended');
    const end = (): void => void req.destroy(new TimeoutError(message));
    if (res.headersSent) return end();
    res.setHeader('connection', 'close');
    res.setHeader('x-should-retry', 'true');
    res.once('finish', end);
    writeJson(res, 408, { code: 'timeout', message });
  }

  /**
   * 401 / 403 / the session and project checks. Returns null on public routes. The `?jwt=` of the
   * URL (a session token) is taken out of `url`: no handler, query schema or log line sees it.
   */
  private authorize(route: Route, req: IncomingMessage, params: Record<string, string>, url: URL): Identity | null | Promise<Identity> {
    const urlJwt = takeUrlJwt(url);
    if (route.scope === null) return null;
    const identity = this.deps.keyring.authenticateRequest(req.headers.authorization ?? (route.queryToken === true ? queryBearer(url) : undefined), urlJwt);
    if (identity instanceof Promise) return identity.then((id) => this.check(route, id, params, url));
    return this.check(route, identity, params, url);
  }

  /**
   * The scope; the session of a /browsers/{id} path (a root path is bound to this daemon's session:
   * a session token names it, jwt/session-tokens.ts checks that, and a key is for this daemon); and
   * the project: a route is the project's unless it says `crossProject`, and a caller of another
   * project learns nothing there, not even that the route or the session exists (404).
   */
  private check(route: Route, identity: Identity, params: Record<string, string>, url: URL): Identity {
    if (route.scope !== 'any' && route.scope !== null) requireScope(identity, route.scope);
    const { sessionId, projectId } = this.deps.config;
    const browserPath = params.id !== undefined && route.path.startsWith('/browsers/{id}');
    if (browserPath && params.id !== sessionId) throw new NotFoundError(`no browser session ${params.id}`);
    const otherProject = identity.project !== null && projectId !== null && identity.project !== projectId;
    if (otherProject && route.crossProject !== true) throw new NotFoundError(browserPath ? `no browser session ${params.id}` : `no route for ${url.pathname}`);
    return identity;
  }

  /** The route of a request; on a root path of a browser route (withRootPaths), `{id}` is this daemon's session. */
  private match(method: string, pathname: string): ReturnType<Router['match']> {
    const match = this.router.match(method, pathname);
    if (match.kind === 'found' && match.route.rootOf !== undefined) match.params.id = this.deps.config.sessionId;
    return match;
  }

  private onUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => socket.destroy());
    const url = URL.canParse(req.url ?? '/', BASE) ? new URL(req.url ?? '/', BASE) : null;
    const match = url === null ? null : this.match(req.method ?? 'GET', url.pathname);
    const isWebSocket = (req.headers.upgrade ?? '').toLowerCase() === 'websocket';
    if (url === null || match?.kind !== 'found' || !match.route.upgrade || !isWebSocket) {
      // Not a WebSocket route (or an h2c or other upgrade): answer as plain HTTP/1.1 on this socket,
      // ignoring the Upgrade header, then close it (the HTTP parser has let go of it).
      const res = new ServerResponse(req);
      res.assignSocket(socket as Socket);
      res.shouldKeepAlive = false;
      res.on('finish', () => socket.end());
      void this.onRequest(req, res);
      return;
    }
    void this.upgrade(req, socket, head, url, match.route, match.params);
  }

  private async upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, url: URL, route: Route & { upgrade: NonNullable<Route['upgrade']> }, params: Record<string, string>): Promise<void> {
    const reqId = requestId(req);
    const log = this.deps.log.child({ req_id: reqId });
    let routeName = 'unmatched';
    try {
      routeName = route.path;
      const identity = await this.authorize(route, req, params, url);
      if (identity === null) throw new NotFoundError('WebSocket routes need a token');
      const typed = parseParams(route.doc.params, params);
      const query = parseQuery(route.doc.query, url);
      if (!typed.ok || !query.ok) throw new BadRequestError([...(typed.ok ? [] : typed.problems), ...(query.ok ? [] : query.problems)]);
      if (socket.destroyed) return; // gone while its token was verified
      log.info({ event: 'upgrade', route: routeName, key_id: identity.keyId }, 'websocket upgrade');
      this.drain.upgraded(socket);
      const refuse = (err: unknown): void => {
        const httpErr = toHttpError(err);
        if (httpErr.unexpected) log.error({ event: 'internal_error', route: routeName, err }, 'unhandled error in an upgrade');
        if (!socket.destroyed) writeRawError(socket, httpErr, reqId);
        log.info({ event: 'request', method: 'GET', route: routeName, status: httpErr.status, upgrade: true }, 'request');
      };
      route.upgrade({ req, socket, head, url, params: typed.value as Record<string, string>, query: query.value, identity, reqId, log, refuse });
    } catch (err) {
      const httpErr = toHttpError(err);
      if (httpErr.unexpected) log.error({ event: 'internal_error', route: routeName, err }, 'unhandled error in an upgrade');
      writeRawError(socket, httpErr, reqId);
      log.info({ event: 'request', method: 'GET', route: routeName, status: httpErr.status, upgrade: true }, 'request');
    }
  }
}

const BASE = 'http://browserd.invalid';

/** The request target as a URL; a target that is not one is 400 invalid_request. */
function parseTarget(req: IncomingMessage): URL {
  const target = req.url ?? '/';
  if (target.startsWith('/')) {
    try {
      return new URL(target, BASE);
    } catch {
      // not a URL: refused below
    }
  }
  throw new InvalidRequestError('the request target is not a path');
}

/** The `jwt` query parameter, removed from `url`; given twice is 401 (which one would count?). */
function takeUrlJwt(url: URL): string | undefined {
  if (url.search === '' || !url.searchParams.has('jwt')) return undefined;
  const all = url.searchParams.getAll('jwt');
  url.searchParams.delete('jwt');
  if (all.length > 1) throw new UnauthorizedError('the jwt query parameter is given more than once');
  return all[0];
}

/** The request says a body follows (a declared length above 0, or chunked). */
function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

function requestId(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && REQ_ID_RE.test(given) ? given : randomUUID();
}

export function writeJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** `Bearer <token>` from the query's `jwt` or `token` (routes with queryToken), else undefined. */
function queryBearer(url: URL): string | undefined {
  const token = url.searchParams.get('jwt') ?? url.searchParams.get('token');
  return token === null || token === '' ? undefined : `Bearer ${token}`;
}

function acceptsHtml(req: IncomingMessage): boolean {
  return /\btext\/html\b/i.test(req.headers.accept ?? '');
}

const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** The error as a small page a person can read: what happened and what to do (the JSON body's code and message). */
function writeHtmlError(res: ServerResponse, err: HttpError): void {
  const body = err.body as { code?: string; message?: string };
  const what =
    err.status === 401
      ? 'This link is not valid: its token is wrong or has expired. Ask for a new link.'
      : err.status === 403
        ? 'This link does not allow this page. Ask for a link with the right access.'
        : `This page cannot be shown (${err.status}).`;
  const text =
    '<!doctype html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>browserd: ' +
    escapeHtml(STATUS_CODES[err.status] ?? 'Error') +
    '</title><style>body{font:16px system-ui,sans-serif;margin:3em auto;max-width:40em;padding:0 1em;color:#222}code{background:#eee;padding:0 .3em}</style></head><body>' +
    `<h1 id="error">${escapeHtml(what)}</h1><p>${escapeHtml(body.message ?? '')}</p><p>Error code: <code>${escapeHtml(body.code ?? 'error')}</code></p></body></html>`;
  for (const [k, v] of Object.entries(err.headers)) res.setHeader(k, v);
  res.writeHead(err.status, { 'content-type': 'text/html; charset=utf-8', 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store' });
  res.end(text);
}

/** An error on a raw socket (a refused upgrade), in the same JSON shape and with the same headers. */
function writeRawError(socket: Duplex, err: HttpError, reqId: string): void {
  writeRaw(socket, err.status, err.body, { 'x-request-id': reqId, ...err.headers });
}

/** A JSON answer written straight to a socket (upgrades, client errors), then the socket ends. */
function writeRaw(socket: Duplex, status: number, body: unknown, headers: Record<string, string>): void {
  const text = JSON.stringify(body);
  const lines = [
    `HTTP/1.1 ${status} ${httpStatusText(status)}`,
    'content-type: application/json; charset=utf-8',
    `content-length: ${Buffer.byteLength(text)}`,
    'connection: close',
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
  ];
  socket.end(`${lines.join('\r\n')}\r\n\r\n${text}`);
}

function httpStatusText(status: number): string {
  return STATUS_CODES[status] ?? 'Error';
}
