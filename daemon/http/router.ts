// The route table: every route declares its method, path template, scope, OpenAPI facts and
// handler (through http/route.ts's routesIn, which also records the file that declares it). Matching is by path segments; `{name}` matches one non-empty segment.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { z, ZodType } from 'zod';
import type { Logger } from '../core/log.js';
import type { Identity, Scope } from './auth.js';
import type { QuerySchema } from './query.js';

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** What a handler returns: a JSON reply, or `null` when it wrote the response itself (SSE, 204). */
export type Reply = { status: number; body?: unknown; headers?: Record<string, string> } | null;

/** What a handler is handed, parsed and validated: the path's parameters, the query, the JSON body. */
export interface RouteInput {
  params: Record<string, string>;
  query: Record<string, unknown>;
  body: unknown;
}

export interface RequestContext<I extends RouteInput = RouteInput> {
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
  /** The path's parameters (percent-decoded), validated by `doc.params` when the route declares it. */
  params: I['params'];
  /** The query parameters as the route's `doc.query` parsed them (unknown ones are refused before the handler runs). */
  query: I['query'];
  /**
   * The JSON body as the route's `doc.body` (a zod schema) parsed it, read before the handler runs
   * (at most the route's bodyLimitBytes, else BROWSERD_BODY_LIMIT_BYTES; an empty body is `{}` where
   * doc.bodyRequired is false). undefined for a route whose body is not JSON or that reads it itself.
   */
  body: I['body'];
  /** null only on public routes. */
  identity: Identity | null;
  reqId: string;
  log: Logger;
  /** Aborted when the client goes away or the daemon shuts down (end long streams then). */
  signal: AbortSignal;
  /**
   * Aborted only when the client goes away before the answer — never for a request with an
   * Idempotency-Key (its retry takes the answer), never at shutdown (requests in flight finish).
   */
  clientGone: AbortSignal;
  /** Reads and validates a JSON body (415-style errors are 400 invalid_request, per the contract). */
  json<T>(schema: ZodType<T>, opts?: { limitBytes?: number; optional?: boolean }): Promise<T>;
  /** `json` for a body with a big top-level base64 string `field`: also its strict decoding when read on the fast path (else null). */
  jsonBase64<T>(schema: ZodType<T>, field: string, opts?: { limitBytes?: number }): Promise<{ body: T; decoded: Buffer | null }>;
}

export interface UpgradeContext<I extends RouteInput = RouteInput> {
  req: IncomingMessage;
  socket: Duplex;
  head: Buffer;
  url: URL;
  params: I['params'];
  query: I['query'];
  identity: Identity;
  reqId: string;
  log: Logger;
  /** Answers the upgrade request with this error (in the contract's shape) and ends the socket. */
  refuse(err: unknown): void;
}

/** OpenAPI facts of one operation; the document is generated from these. */
export interface RouteDoc {
  summary: string;
  description?: string;
  /** A zod schema (JSON body) or a ready JSON Schema object with its media type. */
  body?: ZodType | { mediaType: string; schema: Record<string, unknown>; required?: boolean };
  bodyRequired?: boolean;
  /** The query parameters (a strict zod object of http/query.ts helpers); without it the route takes none. */
  query?: QuerySchema;
  /** The path's parameters (a zod object): validated before the handler runs, and their types in the document. Without it each is a string. */
  params?: z.ZodObject<Record<string, z.ZodType>>;
  /** Success responses: status → description and schema (zod or JSON Schema). */
  responses: Record<number, { description: string; schema?: ZodType | Record<string, unknown>; mediaType?: string }>;
  /** Error statuses this route can answer besides 401/403/404/405/500. */
  errors?: number[];
}

export interface BaseRoute {
  method: Method;
  /** The file that declares it, from the repository root (http/route.ts's routesIn adds it). */
  source: string;
  path: string;
  /** null: public (no token). 'any': any valid token. Else the scope required. */
  scope: Scope | 'any' | null;
  doc: RouteDoc;
  /**
   * Also takes the token as the query parameter `token` (or `jwt`) when no Authorization header
   * is sent: for pages and WebSockets opened from a link (the live view). Declare them in doc.query.
   */
  queryToken?: boolean;
  /** Errors answer with a small HTML page (not JSON) to a client that accepts text/html: a page a person opens. */
  htmlErrors?: boolean;
  /**
   * A key or session token of another project than BROWSERD_PROJECT_ID may call it (it reads only the
   * caller's own credential: /whoami). Without it, every route that takes a token is the project's:
   * such a caller is answered 404, as if the route (or the session) did not exist.
   */
  crossProject?: true;
  /**
   * false: a route under /browsers/{id}/… that is not also served at its root path (http/route.ts's
   * withRootPaths). Needed only where a root route of the same path has a meaning of its own.
   */
  rootPath?: false;
  /** On a root path that withRootPaths made: the path of the browser route it serves (its `{id}` is this daemon's session). */
  readonly rootOf?: string;
  /** The most bytes of its JSON body (default BROWSERD_BODY_LIMIT_BYTES). */
  bodyLimitBytes?: number;
  /**
   * The handler reads the body itself (ctx.json / ctx.jsonBase64 / the request stream): an upload
   * beside a JSON body, or a fast path of its own. Without it, a zod `doc.body` is read and
   * validated before the handler runs (ctx.body).
   */
  readsBody?: true;
}

export interface HttpRoute extends BaseRoute {
  handler(ctx: RequestContext): Promise<Reply>;
  upgrade?: undefined;
}

export interface UpgradeRoute extends BaseRoute {
  method: 'GET';
  /** A WebSocket route: the server authenticates, then hands the raw socket over. */
  upgrade(ctx: UpgradeContext): void;
  handler?: undefined;
}

export type Route = HttpRoute | UpgradeRoute;

type Match =
  | { kind: 'found'; route: Route; params: Record<string, string> }
  | { kind: 'method'; allowed: Method[] }
  | { kind: 'none' };

interface Compiled {
  route: Route;
  /** Per segment: its literal text, or null for a parameter. */
  literals: (string | null)[];
  /** Per segment: the parameter's name, or null for a literal. */
  names: (string | null)[];
}

export class Router {
  /** The routes by their number of path segments (only those can match), in declaration order. */
  private readonly bySegments = new Map<number, Compiled[]>();

  constructor(readonly routes: readonly Route[]) {
    const seen = new Set<string>();
    for (const r of routes) {
      const key = `${r.method} ${r.path}`;
      if (seen.has(key)) throw new Error(`duplicate route ${key}`);
      seen.add(key);
    }
    for (const route of routes) {
      const segments = split(route.path);
      const isParam = (t: string): boolean => t.startsWith('{') && t.endsWith('}');
      const list = this.bySegments.get(segments.length) ?? [];
      list.push({ route, literals: segments.map((t) => (isParam(t) ? null : t)), names: segments.map((t) => (isParam(t) ? t.slice(1, -1) : null)) });
      this.bySegments.set(segments.length, list);
    }
  }

  match(method: string, pathname: string): Match {
    const parts = split(pathname);
    const allowed: Method[] = [];
    for (const c of this.bySegments.get(parts.length) ?? []) {
      // The literal segments first (no allocation, no decoding): most routes differ there.
      if (!literalsMatch(c.literals, parts)) continue;
      const params = bindParams(c.names, parts);
      if (params === null) continue;
      if (c.route.method === method || (method === 'HEAD' && c.route.method === 'GET' && !c.route.upgrade)) {
        return { kind: 'found', route: c.route, params };
      }
      allowed.push(c.route.method);
    }
    return allowed.length > 0 ? { kind: 'method', allowed: [...new Set(allowed)] } : { kind: 'none' };
  }
}

function split(p: string): string[] {
  return p.split('/').filter((s) => s !== '');
}

function literalsMatch(literals: (string | null)[], parts: string[]): boolean {
  if (literals.length !== parts.length) return false;
  for (let i = 0; i < literals.length; i++) {
    const t = literals[i];
    if (t !== null && t !== parts[i]) return false;
  }
  return true;
}

/** The parameters' values, percent-decoded; null when one is not valid percent-encoding (no match). */
function bindParams(names: (string | null)[], parts: string[]): Record<string, string> | null {
  const params: Record<string, string> = {};
  for (let i = 0; i < names.length; i++) {
    const name = names[i];
    if (name === null || name === undefined) continue;
    try {
      params[name] = decodeURIComponent(parts[i] as string);
    } catch {
      return null;
    }
  }
  return params;
}
