// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// @long: one of the slowest files (10 s or more alone), started first by test/run.mjs.
// The server's own behaviour, through real HTTP on a random port with a small route table:
// error shape on every path, 405, bad JSON, wrong content type, validation details, 413, 500.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { z } from 'zod';
import { loadConfig } from '../../daemon/core/config.js';
import { createLogger } from '../../daemon/core/log.js';
import { createMetrics } from '../../daemon/core/metrics.js';
import { KeyRing } from '../../daemon/http/auth.js';
import { HttpServer } from '../../daemon/http/server.js';
import type { Route } from '../../daemon/http/router.js';
import { routesIn } from '../../daemon/http/route.js';
import { expectError, rawRequest } from '../helpers/http.js';
import { Writable } from 'node:stream';
import { rmSync } from 'node:fs';
import { tempDir } from '../kit/cleanup.js';
import { TEST_TOKEN } from '../kit/daemon.js';
import { until } from '../kit/wait.js';

const logLines: Record<string, unknown>[] = [];
const sink = new Writable({
  write(chunk: Buffer, _enc, cb) {
    for (const l of chunk.toString().split('\n').filter(Boolean)) logLines.push(JSON.parse(l) as Record<string, unknown>);
    cb();
  },
});

const bodySchema = z.strictObject({ name: z.string().min(1), count: z.number().int().max(10), tags: z.array(z.string()).optional() });
const route = routesIn('test/http/server.test.ts');
const routes: Route[] = [
  route({
    method: 'POST',
    path: '/things',
    scope: 'browser:write',
    doc: () => ({ summary: 'test', body: bodySchema, responses: { 200: { description: 'ok' } } }),
    handler: async (ctx) => ({ status: 200, body: ctx.body }),
  }),
  route({
    method: 'GET',
    path: '/boom',
    scope: null,
    doc: () => ({ summary: 'test', responses: { 200: { description: 'never' } } }),
    handler: async () => {
      throw new Error('secret internal detail /etc/shadow');
    },
  }),
];

let server: HttpServer;
let base = '';
const stateDir = tempDir();

/** Polls the captured log lines until one matches (no fixed sleeps). */
function logLine(pred: (l: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> {
  return until('the log line', () => logLines.find(pred), 5000, 10);
}
const auth = { authorization: `Bearer ${TEST_TOKEN}` };

before(async () => {
  const config = loadConfig({ BROWSERD_LISTEN: '127.0.0.1:0', BROWSERD_STATE_DIR: stateDir, BROWSERD_TOKEN: TEST_TOKEN, BROWSERD_BODY_LIMIT_BYTES: '2048', PATH: process.env.PATH });
  const log = createLogger('info', sink);
  server = new HttpServer({ config, log, metrics: createMetrics(), keyring: KeyRing.create(config, log), routes });
  const addr = await server.listen();
  base = `http://127.0.0.1:${addr.port}`;
});
after(() => {
  server.destroy();
  rmSync(stateDir, { recursive: true, force: true });
});

test('unknown route: 404 not_found in the error shape, with x-request-id', async () => {
  const res = await fetch(`${base}/nope`);
  await expectError(res, 404, 'not_found');
});

test('x-request-id is taken from the request and logged on the access line', async () => {
  const res = await fetch(`${base}/nope`, { headers: { 'x-request-id': 'abc-123' } });
  assert.equal(res.headers.get('x-request-id'), 'abc-123');
  await res.text();
  const line = await logLine((l) => l.req_id === 'abc-123' && l.event === 'request');
  assert.equal(line.status, 404);
  assert.equal(typeof line.ms, 'number');
});

test('wrong method: 405 method_not_allowed with Allow', async () => {
  const res = await fetch(`${base}/things`, { method: 'DELETE', headers: auth });
  assert.equal(res.headers.get('allow'), 'POST');
  await expectError(res, 405, 'method_not_allowed');
});

test('body that is not JSON: 400 invalid_request, code and message only', async () => {
  const res = await fetch(`${base}/things`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{"name":' });
  const body = await expectError(res, 400, 'invalid_request');
  assert.equal(body.details, undefined);
});

test('wrong content type: 400 invalid_request', async () => {
  const res = await fetch(`${base}/things`, { method: 'POST', headers: { ...auth, 'content-type': 'text/plain' }, body: '{}' });
  await expectError(res, 400, 'invalid_request');
});

test('invalid fields: 400 bad_request with one detail per problem', async () => {
  const res = await fetch(`${base}/things`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ name: '', count: 11.5, extra: true }),
  });
  const body = await expectError(res, 400, 'bad_request');
  const details = body.details as { code: string; message: string }[];
  assert.ok(details.length >= 3, JSON.stringify(details));
  for (const d of details) assert.equal(d.code, 'invalid_input');
  assert.ok(details.some((d) => d.message.startsWith('name: ')));
  assert.ok(details.some((d) => d.message.startsWith('count: ')));
});

test('valid body is accepted', async () => {
  const res = await fetch(`${base}/things`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'a', count: 1 }) });
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { name: 'a', count: 1 });
});

test('oversized body: 413 with the limit in the message, and the socket is closed, not left hanging', async () => {
  const res = await fetch(`${base}/things`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'x'.repeat(5000), count: 1 }) });
  const body = await expectError(res, 413, 'payload_too_large');
  assert.match(String(body.message), /2048/);
  // A client that declares a large body and sends only part of it gets the 413 and a closed socket.
  const { text, closedByServer } = await rawRequest(
    base,
    `POST /things HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${TEST_TOKEN}\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n{"name":`,
  );
  assert.match(text, /^HTTP\/1.1 413/);
  assert.match(text, /"code":"payload_too_large"/);
  assert.ok(closedByServer, 'the server closed the connection');
  // Chunked, no content-length: cut off past the limit too.
  const chunked = await rawRequest(
    base,
    `POST /things HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${TEST_TOKEN}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n1000\r\n${'a'.repeat(4096)}\r\n`,
  );
  assert.match(chunked.text, /^HTTP\/1.1 413/);
  assert.ok(chunked.closedByServer);
});

test('an internal failure is 500 internal_error and says nothing internal', async () => {
  const res = await fetch(`${base}/boom`);
  const body = await expectError(res, 500, 'internal_error');
  assert.doesNotMatch(JSON.stringify(body), /shadow|secret|Error:/);
  const reqId = res.headers.get('x-request-id');
  const logged = await logLine((l) => l.req_id === reqId && l.event === 'internal_error');
  assert.match(JSON.stringify(logged), /secret internal detail/);
});

test('HEAD of a GET route answers without a body', async () => {
  const res = await fetch(`${base}/boom`, { method: 'HEAD' });
  assert.equal(res.status, 500);
  assert.equal(await res.text(), '');
});

test('malformed requests get the error shape with a request id, and the daemon keeps serving', async () => {
  const { text } = await rawRequest(base, 'GARBAGE\r\n\r\n');
  assert.match(text, /^HTTP\/1.1 400/);
  assert.match(text, /"code":"invalid_request"/);
  assert.match(text, /x-request-id: /i);
  // A request target that is no path (once crashed the daemon).
  for (const upgrade of ['', 'connection: upgrade\r\nupgrade: websocket\r\n']) {
    const bad = await rawRequest(base, `GET http://[/ HTTP/1.1\r\nhost: x\r\n${upgrade}\r\n`);
    assert.match(bad.text, /^HTTP\/1.1 400/, bad.text);
    assert.match(bad.text, /"code":"invalid_request"/);
  }
  const big = await rawRequest(base, `GET /nope HTTP/1.1\r\nhost: x\r\nx-big: ${'a'.repeat(20_000)}\r\n\r\n`);
  assert.match(big.text, /^HTTP\/1.1 431/);
  assert.match(big.text, /x-request-id: /i);
  const res = await fetch(`${base}/nope`);
  await expectError(res, 404, 'not_found');
});

test('an Upgrade header on a route that is no WebSocket route is ignored: plain HTTP answers', async () => {
  const h2c = await rawRequest(base, 'GET /boom HTTP/1.1\r\nhost: x\r\nconnection: Upgrade, HTTP2-Settings\r\nupgrade: h2c\r\nhttp2-settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n');
  assert.match(h2c.text, /^HTTP\/1.1 500/);
  assert.match(h2c.text, /"code":"internal_error"/);
  const ws = await rawRequest(
    base,
    `POST /things HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${TEST_TOKEN}\r\nconnection: Upgrade\r\nupgrade: websocket\r\nsec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`,
  );
  assert.doesNotMatch(ws.text, /^HTTP\/1.1 (404|101)/, ws.text);
  const wrongMethod = await rawRequest(base, 'DELETE /things HTTP/1.1\r\nhost: x\r\nconnection: Upgrade\r\nupgrade: websocket\r\n\r\n');
  assert.match(wrongMethod.text, /^HTTP\/1.1 405/);
});

test('a client that keeps sending a refused body reads the 413, and the connection stays usable', async () => {
  const big = JSON.stringify({ name: 'x'.repeat(200_000), count: 1 });
  // Chunked (no declared length): refused past the limit, the rest drained, then answered.
  const res = await fetch(`${base}/things`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: new Blob([big]).stream(),
    duplex: 'half',
  } as RequestInit);
  await expectError(res, 413, 'payload_too_large');
  // With a declared length.
  const res2 = await fetch(`${base}/things`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: big });
  await expectError(res2, 413, 'payload_too_large');
  const ok = await fetch(`${base}/things`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'a', count: 2 }) });
  assert.equal(ok.status, 200);
  await ok.text();
});
