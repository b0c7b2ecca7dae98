// The routes of requests through the browser (scope browser:fetch): POST /browsers/{id}/curl (also
// at POST /curl, as every browser route at its root path: the SDK's browsers.curl, a JSON answer),
// and /curl/raw (the SDK's browsers.fetch, which only the root path has: any method, the raw body
// both ways, the target's status and headers mirrored).
import { once } from 'node:events';
import type { IncomingHttpHeaders } from 'node:http';
import type { Config } from '../core/config.js';
import { BadRequestError, PayloadTooLargeError } from '../core/errors.js';
import { readBody } from '../http/body.js';
import type { RequestContext, Route } from '../http/router.js';
import { routesIn } from '../http/route.js';
import type { BrowserFetcher } from './fetcher.js';
import { z } from 'zod';
import { lazy } from '../core/lazy.js';
import { qInt, qRequired } from '../http/query.js';
import { RAW_METHODS, curlParamsSchema, curlResponseSchema } from './schemas.js';
import { checkTarget } from './target.js';

const route = routesIn('daemon/curl/routes.ts');

export interface CurlRouteDeps {
  config: Config;
  fetcher: BrowserFetcher;
  /** The daemon's own ports (its API, the forwarding proxy): never a target. */
  ownPorts(): number[];
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'trailers', 'transfer-encoding', 'upgrade']);
/**
 * The caller's headers /curl/raw does not pass on: hop-by-hop ones; those of the call to the daemon
 * (its Authorization, Host, request id, idempotency key, the SDK's x-stainless-*); and those
 * Chromium owns for the request it makes: User-Agent, Accept-Encoding, Content-Length, Cookie.
 */
const NOT_FORWARDED = new Set([...HOP_BY_HOP, 'host', 'authorization', 'x-request-id', 'idempotency-key', 'user-agent', 'accept-encoding', 'content-length', 'cookie']);
/** The answer's headers /curl/raw does not mirror: hop-by-hop, and those of the body as Chromium received it (it is sent decoded). */
const NOT_MIRRORED = new Set([...HOP_BY_HOP, 'content-length', 'content-encoding']);

const CURL_TEXT =
  "Made by Chromium's own network stack (a navigation of a hidden tab, rewritten through the Fetch domain: see docs/curl.md): the profile's cookies, " +
  "Chromium's User-Agent, TLS and HTTP/2, the active proxy and its bypass_hosts. Redirects are followed. Only http and https; the daemon's own ports " +
  '(its API, the forwarding proxy) are refused (400), also when a name resolves to them (the browser\'s proxy answers 403 there). ' +
  'A target that does not answer is 422 fetch_failed with Chromium\'s net error in inner_error; past timeout_ms 504 timeout; ' +
  'more than BROWSERD_CURL_MAX_CONCURRENT at once 429.';

/** The query of /curl/raw (the SDK's browsers.fetch sends url, jwt and timeout_ms; jwt is the server's). */
export function rawQuery(maxTimeoutMs: number) {
  return z.strictObject({
    url: qRequired('the target: http or https', 16_384),
    timeout_ms: qInt('the whole request\'s deadline, the streamed answer included (default BROWSERD_CURL_TIMEOUT_MS)', 1, maxTimeoutMs),
  });
}

function forwardedHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || NOT_FORWARDED.has(name) || name.startsWith('x-stainless-')) continue;
    out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

export function curlRoutes(deps: CurlRouteDeps): Route[] {
  const { config, fetcher } = deps;
  const c = config.curl;
  const params = lazy(() => curlParamsSchema(c.maxTimeoutMs));
  const query = lazy(() => rawQuery(c.maxTimeoutMs));

  const curl = async (ctx: RequestContext) => {
    const p = ctx.body as z.infer<ReturnType<typeof params>>;
    const url = checkTarget(p.url, 'url', deps.ownPorts());
    const body = p.body === undefined ? null : Buffer.from(p.body, 'utf8');
    if (body !== null && (p.method === 'GET' || p.method === 'HEAD')) throw BadRequestError.field('body', `a ${p.method} request carries no body`);
    if (body !== null && body.length > c.maxBodyBytes) throw new PayloadTooLargeError('the request body', c.maxBodyBytes, 'BROWSERD_CURL_MAX_BODY_BYTES');
    const started = performance.now();
    ctx.log.debug({ event: 'curl', method: p.method, url: url.href }, 'request through the browser');
    const answer = await fetcher.run(
      { url: url.href, method: p.method, headers: p.headers ?? {}, body },
      { timeoutMs: p.timeout_ms ?? c.timeoutMs, signal: ctx.signal, maxBytes: c.maxResponseBytes, limitName: 'BROWSERD_CURL_MAX_RESPONSE_BYTES' },
      async (a) => {
        const chunks: Buffer[] = [];
        for await (const chunk of a.body) chunks.push(chunk);
        return { status: a.status, headers: a.headers, bytes: Buffer.concat(chunks) };
      },
    );
    const headers: Record<string, string[]> = {};
    for (const h of answer.headers) (headers[h.name.toLowerCase()] ??= []).push(h.value);
    return {
      status: 200,
      body: {
        status: answer.status,
        headers,
        body: answer.bytes.toString(p.response_encoding === 'base64' ? 'base64' : 'utf8'),
        duration_ms: Math.round((performance.now() - started) * 10) / 10,
      },
    };
  };

  const raw = async (ctx: RequestContext) => {
    const url = checkTarget(String(ctx.query.url), 'url', deps.ownPorts());
    const method = ctx.req.method ?? 'GET';
    const declared = Number(ctx.req.headers['content-length'] ?? 0);
    if (declared > c.maxBodyBytes) throw new PayloadTooLargeError('the request body', c.maxBodyBytes, 'BROWSERD_CURL_MAX_BODY_BYTES');
    const bytes = method === 'GET' ? Buffer.alloc(0) : await readBody(ctx.req, c.maxBodyBytes).catch((err: unknown) => {
      throw err instanceof PayloadTooLargeError ? new PayloadTooLargeError('the request body', c.maxBodyBytes, 'BROWSERD_CURL_MAX_BODY_BYTES') : err;
    });
    ctx.log.debug({ event: 'curl', method, url: url.href, raw: true }, 'request through the browser');
    await fetcher.run(
      { url: url.href, method, headers: forwardedHeaders(ctx.req.headers), body: bytes.length > 0 ? bytes : null },
      { timeoutMs: typeof ctx.query.timeout_ms === 'number' ? ctx.query.timeout_ms : c.timeoutMs, signal: ctx.signal, maxBytes: c.maxRawResponseBytes, limitName: 'BROWSERD_CURL_RAW_MAX_RESPONSE_BYTES' },
      async (a) => {
        const length = a.headers.find((h) => h.name.toLowerCase() === 'content-length');
        const encoded = a.headers.some((h) => h.name.toLowerCase() === 'content-encoding');
        if (length !== undefined && !encoded && Number(length.value) > c.maxRawResponseBytes) {
          throw new PayloadTooLargeError(`the answer (${length.value} bytes)`, c.maxRawResponseBytes, 'BROWSERD_CURL_RAW_MAX_RESPONSE_BYTES');
        }
        const first = await a.body.next(); // an error before the first byte is still an answer in the contract's shape
        const res = ctx.res;
        const headers: [string, string][] = a.headers.filter((h) => !NOT_MIRRORED.has(h.name.toLowerCase())).map((h) => [h.name, h.value]);
        res.writeHead(a.status, a.statusText || undefined, headers.flat());
        if (!first.done) {
          if (!res.write(first.value)) await once(res, 'drain', { signal: ctx.signal });
          for await (const chunk of a.body) if (!res.write(chunk)) await once(res, 'drain', { signal: ctx.signal });
        }
        res.end();
      },
    ).catch((err: unknown) => {
      if (ctx.res.headersSent) ctx.res.destroy(); // mid-stream: the client sees the cut, not a short body
      throw err;
    });
    return null;
  };

  const curlDoc = lazy(() => ({
    summary: "An HTTP request made by the browser's network stack, answered as JSON (the SDK's browsers.curl)",
    description: `${CURL_TEXT} The request body is at most BROWSERD_CURL_MAX_BODY_BYTES (413), the answer's body BROWSERD_CURL_MAX_RESPONSE_BYTES (413).`,
    body: params(),
    responses: { 200: { description: 'the target answered (any status)', schema: curlResponseSchema() } },
    errors: [413, 422, 429, 503, 504],
  }));
  const routes: Route[] = [
    route({ method: 'POST', path: '/browsers/{id}/curl', scope: 'browser:fetch', doc: curlDoc, bodyLimitBytes: Math.max(config.http.bodyLimitBytes, 2 * c.maxBodyBytes + 64 * 1024), handler: curl }),
  ];
  for (const method of RAW_METHODS) {
    routes.push(route({
      method,
      path: '/curl/raw',
      scope: 'browser:fetch',
      doc: () => ({
        summary: "An HTTP request made by the browser's network stack, answered as the target answered (the SDK's browsers.fetch)",
        description:
          `${CURL_TEXT} The request's body (any content type) and headers are passed on, except hop-by-hop headers, Host, Authorization, ` +
          "Cookie (the profile's are sent), User-Agent and Accept-Encoding (Chromium's), X-Request-Id, Idempotency-Key and x-stainless-*. " +
          'The body is read whole before the request starts (a CDP request carries it whole), at most BROWSERD_CURL_MAX_BODY_BYTES (413). ' +
          "The answer mirrors the target's status and headers (without hop-by-hop ones, Content-Length and Content-Encoding: the body comes decoded) " +
          'and streams its body, at most BROWSERD_CURL_RAW_MAX_RESPONSE_BYTES (413 when Content-Length says so at once, else the connection is cut there).',
        query: query(),
        ...(method === 'GET' ? {} : { body: { mediaType: '*/*', schema: { type: 'string', format: 'binary' }, required: false } }),
        responses: { 200: { description: "the target's answer, whatever its status", mediaType: '*/*', schema: { type: 'string', format: 'binary' } } },
        errors: [400, 413, 422, 429, 503, 504],
      }),
      handler: raw,
    }));
  }
  return routes;
}
