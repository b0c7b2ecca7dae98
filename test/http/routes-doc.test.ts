// docs/routes.md is kept true: regenerated from the OpenAPI document a real daemon serves, it must
// equal the committed file; and the file each route names as its source is the one that declares it.
import assert from 'node:assert/strict';
import { globSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { repoRoot, startDaemon, type Daemon } from '../kit/daemon.js';
import { renderRoutesDoc, ROUTES_DOC, ROUTES_DOC_COMMAND, type OpenApiDocument } from '../kit/routes-doc.js';

let d: Daemon;
let doc: OpenApiDocument;

before(async () => {
  d = await startDaemon({ production: true });
  const res = await fetch(`${d.url}/openapi.json`);
  assert.equal(res.status, 200);
  doc = (await res.json()) as OpenApiDocument;
});
after(() => d.cleanup());

test(`${ROUTES_DOC} matches the served OpenAPI document`, () => {
  const committed = readFileSync(path.join(repoRoot, ROUTES_DOC), 'utf8');
  const fresh = renderRoutesDoc(doc);
  if (committed !== fresh) {
    const a = committed.split('\n');
    const b = fresh.split('\n');
    const i = a.findIndex((line, n) => line !== b[n]);
    assert.fail(
      `${ROUTES_DOC} is out of date: run \`${ROUTES_DOC_COMMAND}\` and commit it.\n` +
        `first difference at line ${i + 1}:\n  committed: ${a[i] ?? '(end of file)'}\n  served:    ${b[i] ?? '(end of file)'}`,
    );
  }
});

test('each route names the file that declares it, and each routes file names itself', () => {
  const makers = new Map<string, string>();
  for (const rel of globSync('daemon/**/*.ts', { cwd: repoRoot })) {
    for (const m of readFileSync(path.join(repoRoot, rel), 'utf8').matchAll(/routesIn\('([^']+)'\)/g)) {
      assert.equal(m[1], rel, `${rel} calls routesIn('${m[1]}'): it must name itself`);
      makers.set(rel, m[1] as string);
    }
  }
  let n = 0;
  for (const [p, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const source = op['x-source'];
      assert.ok(source !== undefined && makers.has(source), `${method.toUpperCase()} ${p}: x-source ${String(source)} is not a file that declares routes`);
      n++;
    }
  }
  assert.ok(n > 90, `only ${n} routes in the document`);
});

test('the browser record and its PATCH are the browser module\'s, with the fields the proxy and profile modules register', () => {
  const record = doc.paths['/browsers/{id}'] as Record<string, { 'x-source'?: string; requestBody?: { content: Record<string, { schema: { properties?: Record<string, unknown> } }> } }>;
  assert.equal(record.get?.['x-source'], 'daemon/chromium/routes.ts');
  assert.equal(record.patch?.['x-source'], 'daemon/chromium/routes.ts');
  const fields = Object.keys(record.patch?.requestBody?.content['application/json']?.schema.properties ?? {}).sort();
  assert.deepEqual(fields, ['disable_default_proxy', 'name', 'profile', 'proxy_id', 'tags', 'telemetry', 'viewport']);
});
