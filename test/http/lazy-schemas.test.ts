// @no-chromium
// The daemon builds no zod schema and no route's OpenAPI facts before they are used (bench/ANALYSIS.md
// §7, docs/development.md "Routes and their schemas"): a route's `doc` is a function called at the
// first read of `route.doc` (the route's first request, or the OpenAPI document), a module's schema a
// core/lazy.ts `lazy`. Here: the mechanism (units), that importing every module of daemon/ that uses
// zod registers no schema (the schemas with a description register in zod's global registry when they
// are built, so that registry counts them), and, against the real daemon, that the first request to a
// route validates as strictly as every later one.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { z } from 'zod';
import { lazy } from '../../daemon/core/lazy.js';
import { routesIn } from '../../daemon/http/route.js';
import { Router, type RouteDoc } from '../../daemon/http/router.js';
import { repoRoot, startDaemon, type Daemon } from '../kit/daemon.js';

describe('lazy()', () => {
  test('makes its value at the first call, once, and returns it at every call', () => {
    let made = 0;
    const value = lazy(() => ({ n: ++made }));
    assert.equal(made, 0);
    const first = value();
    assert.equal(made, 1);
    assert.equal(value(), first);
    assert.equal(made, 1);
  });

  test('a value that is undefined is kept too', () => {
    let made = 0;
    const value = lazy(() => {
      made++;
      return undefined;
    });
    value();
    value();
    assert.equal(made, 1);
  });
});

describe("a route's doc", () => {
  test('is made at the first read of route.doc, not when the route or the router is made, and kept', () => {
    let made = 0;
    const doc = (): RouteDoc => {
      made++;
      return { summary: 'a thing', responses: { 200: { description: 'ok', schema: z.object({ a: z.string() }) } } };
    };
    const route = routesIn('test/http/lazy-schemas.test.ts');
    const routes = [
      route({ method: 'GET', path: '/things/{name}', scope: null, doc, handler: () => Promise.resolve({ status: 200 }) }),
      route({ method: 'POST', path: '/things/{name}', scope: null, doc, handler: () => Promise.resolve({ status: 200 }) }),
    ];
    const router = new Router(routes);
    const m = router.match('GET', '/things/x');
    assert.equal(m.kind, 'found');
    assert.deepEqual(router.match('PUT', '/things/x'), { kind: 'method', allowed: ['GET', 'POST'] });
    assert.equal(made, 0, 'making the routes and matching a request built no doc');
    const get = routes[0];
    assert.ok(get !== undefined);
    assert.equal(get.source, 'test/http/lazy-schemas.test.ts');
    const first = get.doc;
    assert.equal(first.summary, 'a thing');
    assert.equal(made, 1);
    assert.equal(get.doc, first, 'the same doc at every read');
    assert.equal(made, 1);
    assert.equal(Object.keys(get).includes('doc'), true, 'doc is listed with the route (the OpenAPI document walks it)');
  });
});

/** daemon/**\/*.ts files that import zod, as the compiled modules' paths relative to this file's folder. */
function zodModules(): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const e of readdirSync(path.join(repoRoot, dir), { withFileTypes: true })) {
      const rel = path.join(dir, e.name);
      if (e.isDirectory()) walk(rel);
      else if (e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') && rel !== path.join('daemon', 'main.ts') && /from 'zod'/.test(readFileSync(path.join(repoRoot, rel), 'utf8'))) out.push(rel);
    }
  };
  walk('daemon');
  return out;
}

describe('importing the modules', () => {
  test("every module of daemon/ that uses zod builds no described schema at import; a lazy schema's first call does", async () => {
    const modules = zodModules();
    assert.ok(modules.length >= 30, `found ${modules.length} modules that use zod`);
    const registry = z.globalRegistry as unknown as { add: (...args: unknown[]) => unknown };
    const add = registry.add;
    let added = 0;
    registry.add = function (this: unknown, ...args: unknown[]) {
      added++;
      return add.apply(this, args);
    };
    try {
      for (const m of modules) await import(path.join(repoRoot, 'dist', m.replace(/\.ts$/, '.js')));
      assert.equal(added, 0, `${added} zod schemas with a description were built when the modules were imported`);
      const schemas = (await import('../../daemon/processes/schemas.js')) as { spawnBody: () => z.ZodType };
      const body = schemas.spawnBody();
      assert.ok(added > 0, 'the first call of a lazy schema builds it (and the counter sees it)');
      const after = added;
      assert.equal(schemas.spawnBody(), body);
      assert.equal(added, after, 'a second call builds nothing');
    } finally {
      registry.add = add;
    }
  });
});

describe('the real daemon: a route validates at its first request as at every later one', () => {
  let d: Daemon;
  before(async () => {
    d = await startDaemon();
  });
  after(async () => {
    await d.cleanup();
  });

  test('a bad query and a bad body as the first requests of their routes are 400 with their details, twice the same', async () => {
    const answers: { status: number; body: unknown }[][] = [[], []];
    for (const round of answers) {
      const q = await d.fetch('/browsers/local/fs/list_files?path=/tmp&bogus=1');
      round.push({ status: q.status, body: await q.json() });
      const b = await d.fetch('/browsers/local/process/spawn', { method: 'POST', json: { command: '', args: 'not a list' } });
      round.push({ status: b.status, body: await b.json() });
    }
    const [first, second] = answers;
    assert.deepEqual(first, second);
    const [q, b] = first as [{ status: number; body: { code: string; details: { message: string }[] } }, { status: number; body: { code: string; details: { message: string }[] } }];
    assert.equal(q.status, 400);
    assert.equal(q.body.code, 'bad_request');
    assert.match(JSON.stringify(q.body.details), /bogus: is not a query parameter of this route/);
    assert.equal(b.status, 400);
    assert.equal(b.body.code, 'bad_request');
    assert.match(JSON.stringify(b.body.details), /command/);
    assert.match(JSON.stringify(b.body.details), /args/);
    // The document built after those routes' docs were made lists them as before.
    const doc = (await (await d.fetch('/openapi.json')).json()) as { paths: Record<string, Record<string, unknown>> };
    assert.ok(doc.paths['/browsers/{id}/fs/list_files']?.get);
    assert.ok(doc.paths['/browsers/{id}/process/spawn']?.post);
  });
});
