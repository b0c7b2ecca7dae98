// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// A proxy created without `protocol` is reached with TLS (https is the default); most first proxies
// are plain HTTP proxies. The check says so: last_check_error (and a url check's inner_error) is
// tls_failed with a message suggesting `protocol: http`, whether the proxy answers the TLS
// ClientHello with HTTP (told at once), waits for a line end (tinyproxy: the plain-HTTP probe at
// the end of the deadline tells it) or closes.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { NOT_TLS_HINT } from '../../daemon/proxies/upstream/dial.js';
import { expectError } from '../helpers/http.js';
import { createProxy, startOrigin, startTinyproxy, type Closer, type Origin, type Tinyproxy } from '../helpers/proxies/servers.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';

const closers: Closer[] = [];
let d: Daemon;
let origin: Origin;
let tiny: Tinyproxy;
let answersHttp: number;
let closesAtOnce: number;

/** A server that answers `reply` to the first bytes it gets (null: closes without a word). */
async function replyServer(reply: string | null): Promise<number> {
  const server = net.createServer((s) => {
    s.on('error', () => s.destroy());
    s.once('data', () => (reply === null ? s.destroy() : s.end(reply)));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  closers.push({ close: () => new Promise<void>((r) => server.close(() => r())) });
  return (server.address() as net.AddressInfo).port;
}

before(async () => {
  origin = await startOrigin();
  tiny = await startTinyproxy({ connectPorts: [origin.port] });
  closers.push(origin, tiny);
  answersHttp = await replyServer('HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n');
  closesAtOnce = await replyServer(null);
  d = await startDaemon({
    env: {
      BROWSERD_PROXY_CHECK_URLS: `http://127.0.0.1:${origin.port}/json`,
      BROWSERD_PROXY_CHECK_TIMEOUT_MS: '2000',
      BROWSERD_TEST_HOOKS: 'resolve=test.example:93.184.216.34',
    },
  });
});
after(async () => {
  await d?.cleanup();
  for (const c of closers.reverse()) await c.close();
});

const defaultProtocol = (port: number): unknown => ({ type: 'custom', config: { host: '127.0.0.1', port } });

async function lastError(id: string): Promise<{ code: string; message: string }> {
  const res = await d.fetch(`/proxies/${id}/check`, { method: 'POST' });
  const body = (await res.json()) as { status: string; protocol: string; last_check_error: { code: string; message: string } };
  assert.equal(res.status, 200);
  assert.equal(body.protocol, 'https', 'the default protocol');
  assert.equal(body.status, 'unavailable');
  return body.last_check_error;
}

test('tinyproxy waits for a line end after the ClientHello: the probe finds plain HTTP on the same port', async () => {
  const id = await createProxy(d, defaultProtocol(tiny.port));
  const err = await lastError(id);
  assert.equal(err.code, 'tls_failed');
  assert.ok(err.message.startsWith(NOT_TLS_HINT), err.message);
  // Mostly tinyproxy waits for the end of its request line, and the probe at the deadline finds it;
  // when the ClientHello's random bytes happen to hold the line ends it waits for, it answers at once
  // (the path of the next test). Either way the hint is given.
  assert.match(err.message, /the same port answers plain HTTP: "HTTP\/1\.\d 400|answered the TLS ClientHello with bytes that are no TLS: ERR_SSL_WRONG_VERSION_NUMBER/);
  // The suggested fix works.
  const fixed = await createProxy(d, { type: 'custom', protocol: 'http', config: { host: '127.0.0.1', port: tiny.port } });
  const res = await d.fetch(`/proxies/${fixed}/check`, { method: 'POST' });
  const body = (await res.json()) as { status: string; last_check_error?: unknown };
  assert.equal(body.status, 'available');
  assert.equal(body.last_check_error, undefined);
});

test('a proxy that answers the ClientHello with HTTP at once: the hint without waiting', async () => {
  const id = await createProxy(d, defaultProtocol(answersHttp));
  const err = await lastError(id);
  assert.equal(err.code, 'tls_failed');
  assert.ok(err.message.startsWith(NOT_TLS_HINT), err.message);
  assert.match(err.message, /ERR_SSL_WRONG_VERSION_NUMBER/);
});

test('a port that closes without a word (and answers no plain HTTP either): tls_failed without the hint', async () => {
  const id = await createProxy(d, defaultProtocol(closesAtOnce));
  const err = await lastError(id);
  assert.equal(err.code, 'tls_failed');
  assert.ok(!err.message.includes('plain HTTP proxy'), err.message);
  assert.match(err.message, /TLS with the proxy failed: ECONNRESET/);
});

test('a url check through a plain HTTP proxy reached with TLS: 422 tls_failed with the hint; nothing changes', async () => {
  const id = await createProxy(d, defaultProtocol(tiny.port));
  const err = await expectError(await d.fetch(`/proxies/${id}/check`, { method: 'POST', json: { url: 'https://test.example/' } }), 422, 'proxy_check_failed');
  const inner = err.inner_error as { code: string; message: string };
  assert.equal(inner.code, 'tls_failed');
  assert.ok(inner.message.startsWith(NOT_TLS_HINT), inner.message);
  const p = (await (await d.fetch(`/proxies/${id}`)).json()) as Record<string, unknown>;
  assert.equal(p.status, undefined);
  assert.equal(p.last_check_error, undefined);
});
