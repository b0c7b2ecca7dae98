// The one way to define a route. Each routes file makes its maker once, naming itself (its path
// from the repository root, e.g. daemon/fs/routes.ts):
//   const route = routesIn(<that path, quoted>);
// and declares every route with it: route({ method, path, scope, doc: () => ({ … }), handler }) (or
// `upgrade` for a WebSocket). The maker records the file on the route (`source`, served as `x-source`
// in the OpenAPI document and listed in docs/routes.md): a string, since the daemon ships as one
// bundled file where import.meta.url names the bundle. test/http/routes-doc.test.ts checks that each
// name is its file's.
//
// `doc` (the route's OpenAPI facts with its zod schemas: query, body, responses) is given as a
// function: the maker calls it the first time `route.doc` is read — the route's first request, which
// parses its query against `doc.query`, or the first GET /openapi.json — and keeps the result. So the
// route table (method, path, scope, handler) is complete when the daemon listens, and no route's
// schemas are built before they are needed (bench/ANALYSIS.md §7).
// The schemas drive the handler's input: the server validates the path's parameters (`doc.params`),
// the query (`doc.query`) and a JSON body (`doc.body`, a zod schema) before the handler runs, and the
// handler gets them typed: `ctx.params` (each parameter of the path, a string, or what doc.params
// makes of it), `ctx.query`, `ctx.body`. A bad value is 400 bad_request with one detail per problem.
import type { z, ZodType } from 'zod';
import type { BaseRoute, Method, Reply, RequestContext, Route, RouteDoc, UpgradeContext } from './router.js';

/** `{id: string, process_id: string}` for '/browsers/{id}/process/{process_id}/kill'. */
export type ParamsOf<P extends string> = P extends `${string}{${infer N}}${infer R}` ? { [K in N | keyof ParamsOf<R>]: string } : Record<never, string>;

/** A route's input as its path and doc declare it. */
export interface InputOf<P extends string, D extends RouteDoc> {
  // A doc typed only as RouteDoc (its schemas optional, unknown here) gives the loose types.
  params: D extends { params: infer S extends ZodType } ? z.output<S> : ParamsOf<P>;
  query: D extends { query: infer Q extends ZodType } ? z.output<Q> : Record<string, unknown>;
  body: D extends { body: infer B extends ZodType } ? z.output<B> : unknown;
}

type Common = Omit<BaseRoute, 'source' | 'doc' | 'rootOf' | 'path' | 'method'>;

/** An HTTP route as its file declares it: everything but `source`, which the maker adds; `doc` made on first use. */
export type HttpRouteSpec<P extends string, D extends RouteDoc> = Common & {
  method: Method;
  path: P;
  doc: () => D;
  handler(ctx: RequestContext<InputOf<P, D>>): Promise<Reply>;
  upgrade?: undefined;
};

/** A WebSocket route as its file declares it. */
export type UpgradeRouteSpec<P extends string, D extends RouteDoc> = Common & {
  method: 'GET';
  path: P;
  doc: () => D;
  upgrade(ctx: UpgradeContext<InputOf<P, D>>): void;
  handler?: undefined;
};

export type RouteSpec<P extends string = string, D extends RouteDoc = RouteDoc> = HttpRouteSpec<P, D> | UpgradeRouteSpec<P, D>;

/** The route maker of the routes file `source` (its path from the repository root). */
export function routesIn(source: string): <P extends string, D extends RouteDoc>(spec: RouteSpec<P, D>) => Route {
  return (spec) => {
    const { doc: makeDoc, ...rest } = spec;
    const route = { ...rest, source } as Omit<Route, 'doc'> & { doc?: RouteDoc };
    Object.defineProperty(route, 'doc', {
      configurable: true,
      enumerable: true,
      get(): RouteDoc {
        const doc = makeDoc();
        // From now on a plain property: a request reads it without a call.
        Object.defineProperty(route, 'doc', { value: doc, enumerable: true, writable: false, configurable: false });
        return doc;
      },
    });
    return route as Route;
  };
}

/** The prefix of the routes that act on this daemon's browser session. */
const BROWSER_PREFIX = '/browsers/{id}/';

/** `GET /x/{}`: a method and a path template up to the names of its parameters (two such routes would shadow each other). */
const shapeOf = (method: string, path: string): string => `${method} ${path.replace(/\{[^}]+\}/g, '{}')}`;

/**
 * The route table with the root paths of the browser routes: each route under /browsers/{id}/… is
 * also served at the rest of its path (`/process/exec` for `/browsers/{id}/process/exec`), the SDK's
 * direct-to-VM mapping of `/browsers/{id}/{rest}` to `{base_url}/{rest}?jwt=…`. A root path is the
 * same route: its handler, scope, project rule, limits, errors and doc (its OpenAPI entry, made on
 * first use like the route's); only its path differs, and its `{id}` is bound to this daemon's
 * session (the server sets it). A root path that a declared route takes already (same method, same
 * template up to parameter names) is an error at start: the browser route must say `rootPath: false`
 * (the root route keeps its own meaning), so that no path changes meaning silently.
 */
export function withRootPaths(routes: readonly Route[]): Route[] {
  const declared = new Map(routes.map((r) => [shapeOf(r.method, r.path), r]));
  const out: Route[] = [];
  for (const route of routes) {
    out.push(route);
    if (!route.path.startsWith(BROWSER_PREFIX) || route.rootPath === false) continue;
    const path = route.path.slice(BROWSER_PREFIX.length - 1);
    const taken = declared.get(shapeOf(route.method, path));
    if (taken !== undefined) {
      throw new Error(`${route.method} ${route.path} (${route.source}): its root path ${path} is a route of ${taken.source} already; declare rootPath: false on the browser route to keep the root route's meaning`);
    }
    // Everything but the path is read from the route itself (its doc getter too, so that the doc is
    // still made once, on first use, and shared).
    out.push(Object.create(route, { path: { value: path, enumerable: true }, rootOf: { value: route.path, enumerable: true } }) as Route);
  }
  return out;
}
