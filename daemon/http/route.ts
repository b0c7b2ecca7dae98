// The one way to define a route. Each routes file makes its maker once, naming itself (its path
// from the repository root, e.g. daemon/fs/routes.ts):
//   const route = routesIn(<that path, quoted>);
// and declares every route with it: route({ method, path, scope, doc, handler }) (or `upgrade` for a
// WebSocket). The maker records the file on the route (`source`, served as `x-source` in the OpenAPI
// document and listed in docs/routes.md): a string, since the daemon ships as one bundled file where
// import.meta.url names the bundle. test/http/routes-doc.test.ts checks that each name is its file's.
import type { Route } from './router.js';

/** A route as its file declares it: everything but `source`, which the maker adds. */
export type RouteSpec = Route extends infer R ? (R extends Route ? Omit<R, 'source'> : never) : never;

/** The route maker of the routes file `source` (its path from the repository root). */
export function routesIn(source: string): (spec: RouteSpec) => Route {
  return (spec) => Object.assign(spec, { source }) as Route;
}
