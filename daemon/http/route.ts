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
import type { Route, RouteDoc } from './router.js';

/** A route as its file declares it: everything but `source`, which the maker adds; `doc` made on first use. */
export type RouteSpec = Route extends infer R ? (R extends Route ? Omit<R, 'source' | 'doc'> & { doc: () => RouteDoc } : never) : never;

/** The route maker of the routes file `source` (its path from the repository root). */
export function routesIn(source: string): (spec: RouteSpec) => Route {
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
