// Health, readiness, discovery, metrics and identity: the routes that belong to no one concern.
import { z } from 'zod';
import { lazy } from '../core/lazy.js';
import type { Metrics } from '../core/metrics.js';
import { BrowserUnavailableError } from '../core/errors.js';
import type { Route } from './router.js';
import { routesIn } from './route.js';
import { DOCS_PAGE_CSP, renderDocsPage } from './docs-page.js';
import { buildOpenApi } from './openapi.js';

const route = routesIn('daemon/http/system-routes.ts');

interface SystemDeps {
  metrics: Metrics;
  /** null when Chromium answers DevTools; else why not (for the 503 message). */
  notReadyReason(): string | null;
  /** The server's whole route table (read at the document's first request, once the table is complete). */
  routes(): readonly Route[];
  /** The package's version, the document's info.version. */
  version: string;
}

const DESCRIPTION = 'browserd: the per-VM browser-host daemon. Every route but /healthz, /readyz, /openapi.json and /docs (this document as a page to read) takes a bearer token.';

const statusSchema = lazy(() => z.object({ status: z.literal('ok') }));
const whoamiSchema = lazy(() => z.object({ key_id: z.string(), scopes: z.array(z.string()), project: z.string().nullable() }));

export function systemRoutes(deps: SystemDeps): Route[] {
  // The OpenAPI document is built at its first request (~30 ms of zod's JSON Schema conversion, and its memory).
  let openapi: Record<string, unknown> | null = null;
  const openapiDoc = (): Record<string, unknown> => (openapi ??= buildOpenApi(deps.routes(), { version: deps.version, description: DESCRIPTION }));
  let docsPage: string | null = null;
  return [
    route({
      method: 'GET',
      path: '/healthz',
      scope: null,
      doc: () => ({ summary: 'Liveness: 200 while the process serves', responses: { 200: { description: 'serving', schema: statusSchema() } } }),
      handler: async () => ({ status: 200, body: { status: 'ok' } }),
    }),
    route({
      method: 'GET',
      path: '/readyz',
      scope: null,
      doc: () => ({
        summary: 'Readiness: 200 when Chromium answers DevTools, else 503 browser_unavailable',
        responses: { 200: { description: 'ready', schema: statusSchema() } },
        errors: [503],
      }),
      handler: async () => {
        const reason = deps.notReadyReason();
        if (reason !== null) throw new BrowserUnavailableError(reason);
        return { status: 200, body: { status: 'ok' } };
      },
    }),
    route({
      method: 'GET',
      path: '/openapi.json',
      scope: null,
      doc: () => ({ summary: 'This OpenAPI 3.1 document', responses: { 200: { description: 'the document', schema: { type: 'object' } } } }),
      handler: async () => ({ status: 200, body: openapiDoc() }),
    }),
    route({
      method: 'GET',
      path: '/docs',
      scope: null,
      doc: () => ({
        summary: 'This OpenAPI document as a page to read in a browser (self-contained: it makes no request)',
        description:
          'Public like GET /openapi.json, whose facts it renders (one section per route family; each route with its scope, parameters, body and responses): ' +
          'a person opens it from a link, and it holds no secret. Rendered once by the daemon; its Content-Security-Policy forbids the page any request (no script, font or image).',
        responses: { 200: { description: 'the page', mediaType: 'text/html; charset=utf-8', schema: { type: 'string' } } },
      }),
      handler: async (ctx) => {
        docsPage ??= renderDocsPage(openapiDoc());
        ctx.res
          .writeHead(200, {
            'content-type': 'text/html; charset=utf-8',
            'content-length': Buffer.byteLength(docsPage),
            'content-security-policy': DOCS_PAGE_CSP,
            'x-content-type-options': 'nosniff',
            'cache-control': 'no-cache',
          })
          .end(docsPage);
        return null;
      },
    }),
    route({
      method: 'GET',
      path: '/metrics',
      scope: 'browser:read',
      doc: () => ({
        summary: 'Prometheus metrics (text exposition format)',
        responses: { 200: { description: 'metrics', mediaType: 'text/plain; version=0.0.4', schema: { type: 'string' } } },
      }),
      handler: async (ctx) => {
        const text = await deps.metrics.registry.metrics();
        ctx.res.writeHead(200, { 'content-type': deps.metrics.registry.contentType }).end(text);
        return null;
      },
    }),
    route({
      method: 'GET',
      path: '/whoami',
      scope: 'any',
      // It reads only the caller's own credential: how a key of another project learns why every other route is 404.
      crossProject: true,
      doc: () => ({
        summary: 'The identity and authorization context of this request (for debugging a 403)',
        responses: { 200: { description: 'the key behind the token', schema: whoamiSchema() } },
      }),
      handler: async (ctx) => {
        const id = ctx.identity;
        if (id === null) throw new Error('whoami without identity');
        return { status: 200, body: { key_id: id.keyId, scopes: [...id.scopes].sort(), project: id.project } };
      },
    }),
  ];
}
