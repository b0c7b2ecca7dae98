// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// Routes driven by their schemas (issue 39), on a small route table over real HTTP: the handler gets
// the path's parameters, the query and the JSON body validated and typed (one bad_request detail per
// problem, all of them at once); a browser route answers at its root path too, its {id} the session;
// and with the test build's answer check on, an answer off its doc.responses is a 500.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';
import { z } from 'zod';
import { loadConfig } from '../../daemon/core/config.js';
import { createLogger } from '../../daemon/core/log.js';
import { createMetrics } from '../../daemon/core/metrics.js';
import { KeyRing } from '../../daemon/http/auth.js';
import { routesIn, withRootPaths } from '../../daemon/http/route.js';
import type { Route } from '../../daemon/http/router.js';
import { HttpServer } from '../../daemon/http/server.js';
import { expectError } from '../helpers/http.js';
import { tempDir } from '../kit/cleanup.js';
import { TEST_TOKEN } from '../kit/daemon.js';

const route = routesIn('test/http/route-input.test.ts');
const params = z.strictObject({ id: z.string(), n: z.string().regex(/^\d{1,6}$/, 'must be a number').transform(Number) });
const query = z.strictObject({ twice: z.enum(['true', 'false']).optional() });
const body = z.strictObject({ name: z.string().min(1), tags: z.array(z.string()).max(2).optional() });
const answer = z.object({ id: z.string(), n: z.number(), name: z.string(), twice: z.boolean() });

const routes: Route[] = [
  route({
    method: 'POST',
    path: '/browsers/{id}/things/{n}',
    scope: 'browser:write',
    doc: () => ({ summary: 'test', params, query, body, responses: { 200: { description: 'ok', schema: answer } } }),
    // Typed from the doc: ctx.params.n is a number, ctx.body.name a string.
    handler: async (ctx) => ({ status: 200, body: { id: ctx.params.id, n: ctx.params.n * (ctx.query.twice === 'true' ? 2 : 1), name: ctx.body.name, twice: ctx.query.twice === 'true' } }),
  }),
  route({
    method: 'GET',
    path: '/browsers/{id}/off',
    scope: 'browser:read',
    doc: () => ({ summary: 'test', responses: { 200: { description: 'ok', schema: z.object({ x: z.number() }) } } }),
    handler: async () => ({ status: 200, body: { x: 'not a number' } }),
  }),
  route({
    method: 'GET',
    path: '/browsers/{id}/unlisted',
    scope: 'browser:read',
    doc: () => ({ summary: 'test', responses: { 200: { description: 'ok' } } }),
    handler: async () => ({ status: 201, body: {} }),
  }),
];

let server: HttpServer;
let base = '';
const stateDir = tempDir();
const auth = { authorization: `Bearer ${TEST_TOKEN}`, 'content-type': 'application/json' };

before(async () => {
  const config = loadConfig({ BROWSERD_LISTEN: '127.0.0.1:0', BROWSERD_STATE_DIR: stateDir, BROWSERD_TOKEN: TEST_TOKEN, PATH: process.env.PATH });
  const log = createLogger('fatal', new Writable({ write: (_c, _e, cb) => cb() }));
  // The answer check of the test build (browserd-test.js), on this in-process server.
  server = new HttpServer({ config: { ...config, testHooks: { ...config.testHooks, checkAnswers: true } }, log, metrics: createMetrics(), keyring: KeyRing.create(config, log), routes });
  base = `http://127.0.0.1:${(await server.listen()).port}`;
});
after(() => {
  server.destroy();
  rmSync(stateDir, { recursive: true, force: true });
});

test('the handler gets the params, query and body parsed by the doc, at both paths', async () => {
  for (const p of ['/browsers/local/things/21?twice=true', '/things/21?twice=true']) {
    const res = await fetch(`${base}${p}`, { method: 'POST', headers: auth, body: JSON.stringify({ name: 'a' }) });
    assert.equal(res.status, 200, p);
    assert.deepEqual(await res.json(), { id: 'local', n: 42, name: 'a', twice: true });
  }
});

test('every problem of the params, the query and the body is one detail of one 400', async () => {
  const bad = await fetch(`${base}/browsers/local/things/x?twice=maybe`, { method: 'POST', headers: auth, body: '{"name":"a"}' });
  const err = await expectError(bad, 400, 'bad_request');
  assert.deepEqual((err.details as { message: string }[]).map((d) => d.message.split(':')[0]).sort(), ['n', 'twice']);
  const badBody = await fetch(`${base}/things/1`, { method: 'POST', headers: auth, body: '{"name":"","tags":["a","b","c"],"extra":1}' });
  const e2 = await expectError(badBody, 400, 'bad_request');
  assert.equal((e2.details as unknown[]).length, 3, JSON.stringify(e2));
  await expectError(await fetch(`${base}/things/1`, { method: 'POST', headers: auth, body: 'not json' }), 400, 'invalid_request');
});

test('the test build refuses an answer off its doc.responses: 500', async () => {
  await expectError(await fetch(`${base}/off`, { headers: auth }), 500, 'internal_error');
  await expectError(await fetch(`${base}/browsers/local/unlisted`, { headers: auth }), 500, 'internal_error');
});

test('a root path a declared route takes already stops the start, naming both', () => {
  const taken = route({ method: 'GET', path: '/things/{other}', scope: null, doc: () => ({ summary: 't', responses: { 200: { description: 'ok' } } }), handler: async () => null });
  const browser = route({ method: 'GET', path: '/browsers/{id}/things/{n}', scope: null, doc: () => ({ summary: 't', responses: { 200: { description: 'ok' } } }), handler: async () => null });
  assert.throws(() => withRootPaths([taken, browser]), /GET \/browsers\/\{id\}\/things\/\{n\}.*root path \/things\/\{n\}.*rootPath: false/);
  const kept = route({ method: 'GET', path: '/browsers/{id}/things/{n}', scope: null, rootPath: false, doc: () => ({ summary: 't', responses: { 200: { description: 'ok' } } }), handler: async () => null });
  assert.deepEqual(withRootPaths([taken, kept]).map((r) => r.path), ['/things/{other}', '/browsers/{id}/things/{n}']);
});
