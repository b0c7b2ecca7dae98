// The OpenAPI 3.1 document, generated from the route table so that it cannot name a route that
// does not exist; request and response schemas come from the same zod schemas that validate.
import { z, type ZodType } from 'zod';
import type { Route } from './router.js';

const ERROR_TEXT: Record<number, string> = {
  400: 'invalid_request (not JSON, wrong content type, unparsable multipart) or bad_request (one detail per invalid field)',
  401: 'unauthorized: missing or unknown bearer token, or a session token refused (the message names the fault: alg none, HMAC, unknown kid, bad signature, expired, not yet valid, another audience or session)',
  403: 'forbidden: the token lacks the scope named in details; path_forbidden: a path the files API never touches (inner_error.code names the rule)',
  404: 'not_found: unknown route, session, process, proxy, extension, watch, or a missing path',
  405: 'method_not_allowed: known path, other method',
  409: 'the resource is in a state that does not allow it; the code says which (process_exited, stdin_closed, busy, proxy_in_use, not_a_tty, no_page, executor_limit, clipboard_unavailable, not_a_directory, is_a_directory, already_exists, directory_not_empty)',
  413: 'payload_too_large: the limit is in the message',
  416: 'range_not_satisfiable: the Range starts past the end of the file (Content-Range: bytes */size)',
  422: 'proxy_check_failed / extension_rejected / activation_failed / archive_rejected / unsupported_field / setting_refused / idempotency_key_reused / fetch_failed (a request through the browser got no answer: inner_error.code is Chromium\'s net error, e.g. net::ERR_CONNECTION_REFUSED); inner_error carries the cause (setting_refused: details name each refused setting)',
  429: 'limit_exceeded: the limit is in the message',
  500: 'internal_error: the log has the stack under the request id',
  503: 'browser_unavailable: Chromium is not ready and did not become ready in time',
  504: 'timeout: the operation did not finish within its deadline',
  507: 'no_space: the file system is full',
};

const errorSchema = {
  type: 'object',
  required: ['code', 'message'],
  properties: {
    code: { type: 'string' },
    message: { type: 'string' },
    details: {
      type: 'array',
      items: { type: 'object', required: ['code', 'message'], properties: { code: { type: 'string' }, message: { type: 'string' } } },
    },
    inner_error: { type: 'object', required: ['code', 'message'], properties: { code: { type: 'string' }, message: { type: 'string' } } },
  },
};

export function isZod(x: unknown): x is ZodType {
  return typeof x === 'object' && x !== null && '_zod' in x;
}

function toSchema(x: ZodType | Record<string, unknown>, io: 'input' | 'output'): Record<string, unknown> {
  if (!isZod(x)) return x;
  const { $schema: _ignored, ...schema } = z.toJSONSchema(x, { io, unrepresentable: 'any' }) as Record<string, unknown>;
  return schema;
}

const SESSION_TOKEN_TEXT =
  'A session token: a JWT (RFC 7519) signed with EdDSA (Ed25519), ES256 (P-256) or RS256 (RSA >= 2048 bits); `alg: none` and HMAC (HS*) are refused. ' +
  'Header: `kid` names the key (without it, every control-plane key of the alg is tried). Claims: `aud` BROWSERD_JWT_AUDIENCE (default "browserd"); ' +
  '`sub` (and/or `session_id`) the session id BROWSERD_SESSION_ID; `exp` required; `nbf` and `iat` honoured (5 s leeway); `scope` space-separated scopes ' +
  '(those this daemon does not know grant nothing); `project` optional. Two sources: the control plane signs them with a key of BROWSERD_JWT_KEYS_FILE ' +
  '(a JWKS or PEM public keys, re-read on SIGHUP); the daemon signs its own with an Ed25519 key in its state dir (jwt-signing-key.pem, 0600), ' +
  "for the URLs it hands out (cdp_ws_url of GET /browsers/{id}: the caller's scopes among cdp and browser:fetch, valid BROWSERD_JWT_TTL_SEC). " +
  'A refusal is 401 unauthorized whose message names the fault.';

export interface OpenApiInfo {
  version: string;
  description: string;
}

export function buildOpenApi(routes: readonly Route[], info: OpenApiInfo): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const d = route.doc;
    const params = [...route.path.matchAll(/\{([^}]+)\}/g)].map((m) => {
      const name = m[1] as string;
      // A parameter doc.params declares: its type and description from the schema.
      const typed = d.params?.shape[name];
      const { description, ...schema } = typed === undefined ? { type: 'string' } : (toSchema(typed, 'input') as { description?: string });
      return {
        name,
        in: 'path',
        required: true,
        schema,
        description: description ?? (name === 'id' ? 'the session id (BROWSERD_SESSION_ID); any other is 404' : undefined),
      };
    });
    const query = Object.entries(d.query?.shape ?? {}).map(([name, q]) => {
      const schema = toSchema(q, 'input');
      const { description, ...rest } = schema as { description?: string };
      return { name, in: 'query', required: !q.safeParse(undefined).success, description, schema: rest };
    });
    const responses: Record<string, unknown> = {};
    for (const [status, r] of Object.entries(d.responses)) {
      responses[status] = r.schema
        ? { description: r.description, content: { [r.mediaType ?? 'application/json']: { schema: toSchema(r.schema, 'output') } } }
        : { description: r.description };
    }
    const errs = new Set([404, 405, 500, ...(d.errors ?? [])]);
    if (route.scope !== null) errs.add(401);
    if (route.scope !== null && route.scope !== 'any') errs.add(403);
    if (d.body) errs.add(400);
    for (const status of [...errs].sort()) {
      responses[String(status)] = { description: ERROR_TEXT[status] ?? 'error', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
    }
    const op: Record<string, unknown> = {
      operationId: operationIdOf(route.method, route.path),
      tags: [familyOf(route.source)],
      summary: d.summary,
      description: d.description,
      security: route.scope === null ? [] : [{ bearer: [] }, { sessionToken: [] }, { sessionTokenQuery: [] }],
      'x-scope': route.scope === null ? 'public' : route.scope === 'any' ? 'any valid token' : route.scope,
      parameters: [...params, ...query],
      responses,
    };
    if (d.body) {
      const body = d.body;
      op.requestBody = isZod(body)
        ? { required: d.bodyRequired ?? true, content: { 'application/json': { schema: toSchema(body, 'input') } } }
        : { required: body.required ?? true, content: { [body.mediaType]: { schema: body.schema } } };
    }
    if (route.upgrade) op['x-websocket'] = true;
    if (route.rootOf !== undefined) op['x-root-of'] = route.rootOf;
    op['x-source'] = route.source;
    (paths[route.path] ??= {})[route.method.toLowerCase()] = op;
  }
  return {
    openapi: '3.1.0',
    info: { title: 'browserd', version: info.version, description: info.description },
    servers: [{ url: '/' }],
    tags: [...new Set(routes.map((r) => familyOf(r.source)))].sort().map((name) => ({ name, description: `the routes of daemon/${name === 'system' ? 'http' : name}/` })),
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'A key: BROWSERD_TOKEN, <state>/token, or a key of BROWSERD_KEYS_FILE (its sha256 stored).' },
        sessionToken: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: SESSION_TOKEN_TEXT },
        sessionTokenQuery: { type: 'apiKey', in: 'query', name: 'jwt', description: `The same session token as the query parameter \`jwt\` (every route, WebSocket upgrades included), for clients that cannot send headers. Used only without an Authorization header; removed from the URL before the route sees it, and never logged. ${SESSION_TOKEN_TEXT}` },
      },
      schemas: { Error: errorSchema },
    },
    paths,
  };
}

/**
 * A route's family (its OpenAPI tag): the daemon module that serves it, `fs` for
 * daemon/fs/routes.ts; `system` for the routes of http/ itself (health, readiness, metrics, this document).
 */
export function familyOf(source: string): string {
  const module = source.split('/')[1] ?? source;
  return module === 'http' ? 'system' : module;
}

/** A route's OpenAPI operationId: `getBrowsersIdTelemetryStream` for GET /browsers/{id}/telemetry/stream. */
export function operationIdOf(method: string, routePath: string): string {
  return `${method.toLowerCase()}${routePath.replace(/[{}]/g, '').replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ?? '').toUpperCase())}`;
}
