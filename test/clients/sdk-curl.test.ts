// The SDK's direct calls to the VM against the real daemon: `browsers.retrieve('local')` fills the
// SDK's route cache from the daemon's own answer (session_id, base_url, the ?jwt= of cdp_ws_url),
// then `browsers.curl` and `browsers.fetch` go to base_url/curl and base_url/curl/raw with that token
// and no Authorization header, and their requests are made by Chromium: the origin sees Chromium's
// User-Agent and the cookie a page set earlier; with an active proxy, the proxy sees them. Answers
// are checked at run time against the SDK's declared types; the errors of the routes; no token in the log.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { after, before, test } from 'node:test';
import Kernel, { APIError } from '@onkernel/sdk';
import { z } from 'zod';
import { expectError } from '../helpers/http.js';
import { patchBrowser, startHop, type Hop } from '../helpers/proxies/forwarder.js';
import { daemonCdp, waitBrowser, type CdpClient } from '../kit/browser.js';
import { TEST_TOKEN, keysFile, startDaemon, type Daemon } from '../kit/daemon.js';

/** BrowserCurlResponse of resources/browsers/browsers.d.ts. */
const browserCurlResponse = z.strictObject({
  body: z.string(),
  duration_ms: z.number(),
  headers: z.record(z.string(), z.array(z.string())),
  status: z.number(),
});

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

const held: http.ServerResponse[] = [];
const hangWaiters: (() => void)[] = [];
/** Resolves once `n` requests for /hang were received in all. */
/** Until the origin has seen a request for each of these paths (one that timed out first may never arrive). */
const hanging = async (...urls: string[]): Promise<void> => {
  while (!urls.every((u) => seen.some((s) => s.url === u))) await new Promise<void>((resolve) => hangWaiters.push(resolve));
};
const BIN = Buffer.from(Array.from({ length: 150_000 }, (_, i) => (i * 7919) % 256));
const seen: Seen[] = [];
const origin = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const s: Seen = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) };
    seen.push(s);
    const path = (req.url ?? '').split('?')[0];
    if (path === '/set-cookie') {
      res.writeHead(200, { 'content-type': 'text/html', 'set-cookie': 'sid=s3cret-cookie; Path=/; SameSite=Strict; HttpOnly' }).end('<p>cookie set</p>');
    } else if (path === '/echo') {
      res.writeHead(201, [['content-type', 'application/json'], ['x-origin', 'yes'], ['x-multi', 'one'], ['x-multi', 'two']]);
      res.end(JSON.stringify({ method: s.method, ua: req.headers['user-agent'], cookie: req.headers.cookie ?? null, via: req.headers.via ?? null, body_b64: s.body.toString('base64'), x_test: req.headers['x-test'] ?? null }));
    } else if (path === '/two-cookies') {
      res.writeHead(200, [['content-type', 'text/plain'], ['set-cookie', 'first=1; Path=/'], ['set-cookie', 'second=2; Path=/; HttpOnly']]).end('cookies');
    } else if (path === '/cookie-redirect') {
      res.writeHead(302, [['location', '/two-cookies'], ['set-cookie', 'hop=1; Path=/']]).end();
    } else if (path === '/redirect') {
      res.writeHead(302, { location: '/echo?from=redirect' }).end();
    } else if (path === '/bin') {
      res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(BIN);
    } else if (path === '/big') {
      res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(Buffer.alloc(250_000, 1));
    } else if (path === '/hang') {
      held.push(res); // answered by release() only (timeout_ms ends a request before)
      for (const w of hangWaiters.splice(0)) w();
    } else {
      res.writeHead(404).end('not found');
    }
  });
});
const sockets = new Set<Socket>();
origin.on('connection', (s) => {
  sockets.add(s);
  s.on('close', () => sockets.delete(s));
});

const READER = 'reader-token-aaaaaaaaaaaaaaaa';
let d: Daemon;
let sdk: Kernel;
let base: string;
let cdp: CdpClient;
let hop: Hop | null = null;

before(async () => {
  await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
  const keys = keysFile([
    { id: 'admin', token: TEST_TOKEN, scopes: ['browser:read', 'browser:write', 'cdp', 'browser:fetch', 'proxies:read', 'proxies:write'] },
    { id: 'reader', token: READER, scopes: ['browser:read'] },
  ]);
  d = await startDaemon({
    autostart: true,
    token: null,
    bearer: TEST_TOKEN,
    env: { BROWSERD_KEYS_FILE: keys, BROWSERD_CURL_MAX_BODY_BYTES: '100000', BROWSERD_CURL_MAX_RESPONSE_BYTES: '200000', BROWSERD_CURL_MAX_CONCURRENT: '2', BROWSERD_TEST_HOOKS: 'resolve=site.test:127.0.0.1' },
  });
  sdk = new Kernel({ apiKey: TEST_TOKEN, baseURL: d.url, maxRetries: 0 });
  await waitBrowser(d, (s) => s.state === 'ready', 'ready');
  cdp = await daemonCdp(d);
  // A page of the origin sets a cookie (SameSite=Strict, HttpOnly): Page.navigate answers once the
  // navigation committed, which is after its response's cookies went into the jar.
  const { targetId } = await cdp.send('Target.createTarget', { url: 'about:blank' });
  const { sessionId } = await cdp.send('Target.attachToTarget', { targetId, flatten: true });
  const nav = await cdp.send('Page.navigate', { url: `${base}/set-cookie` }, { sessionId });
  assert.equal(nav.errorText, undefined);
  assert.ok((await cdp.send('Storage.getCookies', {})).cookies.some((c) => c.name === 'sid' && c.sameSite === 'Strict'));
});
after(async () => {
  cdp?.close();
  await d?.cleanup();
  await hop?.close();
  for (const s of sockets) s.destroy();
  await new Promise((resolve) => origin.close(resolve));
});

const chromiumUa = async (): Promise<string> => (await d.call<{ 'User-Agent': string }>('/browsers/local/cdp/json/version'))['User-Agent'];

test("browsers.retrieve('local') fills the SDK's route cache from the daemon's answer", async () => {
  assert.equal(sdk.browserRouteCache.get('local'), undefined);
  const b = await sdk.browsers.retrieve('local');
  const route = sdk.browserRouteCache.get('local');
  assert.ok(route !== undefined, 'the route cache has the session');
  assert.equal(route.sessionId, 'local');
  assert.equal(route.baseURL, d.url);
  assert.equal(route.jwt, new URL(b.cdp_ws_url).searchParams.get('jwt'));
});

test('browsers.curl goes to base_url/curl with the token, and Chromium makes the request: its User-Agent, the page\'s cookie', async () => {
  await sdk.browsers.retrieve('local');
  const before = d.logs.length;
  const answer = await sdk.browsers.curl('local', { url: `${base}/echo`, method: 'POST', body: 'hello browser', headers: { 'x-test': 'one' } });
  browserCurlResponse.parse(answer);
  assert.equal(answer.status, 201);
  assert.deepEqual(answer.headers['x-multi'], ['one', 'two']);
  assert.deepEqual(answer.headers['x-origin'], ['yes']);
  const echo = JSON.parse(answer.body) as Record<string, string | null>;
  assert.equal(echo.method, 'POST');
  assert.equal(Buffer.from(echo.body_b64 ?? '', 'base64').toString(), 'hello browser');
  assert.equal(echo.x_test, 'one');
  assert.equal(echo.ua, await chromiumUa());
  assert.equal(echo.cookie, 'sid=s3cret-cookie');
  // It went to /curl, authenticated by the session token (the SDK sends no Authorization header there).
  const line = await d.waitLog((l) => l.event === 'request' && l.route === '/curl' && d.logs.indexOf(l) >= before);
  assert.equal(line.key_id, 'jwt:self');
  // base64, redirects followed, HEAD.
  const bin = await sdk.browsers.curl('local', { url: `${base}/bin`, response_encoding: 'base64' });
  browserCurlResponse.parse(bin);
  assert.ok(Buffer.from(bin.body, 'base64').equals(BIN));
  const redirected = await sdk.browsers.curl('local', { url: `${base}/redirect` });
  assert.equal(redirected.status, 201);
  assert.equal(seen.at(-1)?.url, '/echo?from=redirect');
  const head = await sdk.browsers.curl('local', { url: `${base}/echo`, method: 'HEAD' });
  assert.equal(head.status, 201);
  assert.equal(head.body, '');
});

test('browsers.fetch goes to base_url/curl/raw: any method, the raw body both ways, status and headers mirrored', async () => {
  await sdk.browsers.retrieve('local');
  const payload = Buffer.from([0, 1, 2, 250, 251, 252, 255]);
  const res = await sdk.browsers.fetch('local', `${base}/echo?q=1`, { method: 'PUT', body: payload, headers: { 'content-type': 'application/octet-stream', 'x-test': 'raw' } });
  assert.equal(res.status, 201, JSON.stringify(seen.slice(-2).map((s) => [s.method, s.url])));
  assert.equal(res.headers.get('x-origin'), 'yes');
  assert.equal(res.headers.get('x-multi'), 'one, two');
  const echo = (await res.json()) as Record<string, string | null>;
  assert.equal(echo.method, 'PUT');
  assert.ok(Buffer.from(echo.body_b64 ?? '', 'base64').equals(payload));
  assert.equal(echo.x_test, 'raw');
  assert.equal(echo.ua, await chromiumUa(), "Chromium's User-Agent, not the SDK's");
  assert.equal(echo.cookie, 'sid=s3cret-cookie');
  assert.equal(seen.at(-1)?.url, '/echo?q=1');
  const bin = await sdk.browsers.fetch('local', `${base}/bin`);
  assert.equal(bin.status, 200);
  assert.ok(Buffer.from(await bin.arrayBuffer()).equals(BIN), 'a binary answer, byte for byte');
  // The target's 404 comes back as it is (the SDK turns it into its APIError, the target's body as message).
  await assert.rejects(sdk.browsers.fetch('local', `${base}/nothing`, { method: 'DELETE' }), (err: unknown) => err instanceof APIError && err.status === 404 && /not found/.test(err.message));
  assert.deepEqual([seen.at(-1)?.method, seen.at(-1)?.url], ['DELETE', '/nothing']);
  const raw404 = await d.fetch(`/curl/raw?url=${encodeURIComponent(`${base}/nothing`)}`, { method: 'PATCH', body: 'x' });
  assert.equal(raw404.status, 404);
  assert.equal(await raw404.text(), 'not found');
});

test('with an active proxy, the proxy sees the request of browsers.curl and browsers.fetch', async () => {
  const port = (origin.address() as AddressInfo).port;
  hop = await startHop('proxyA', port);
  const proxy = await d.call<{ id: string }>('/proxies', { method: 'POST', json: { type: 'custom', name: 'hop', protocol: 'http', config: { host: '127.0.0.1', port: hop.tiny.port } } }, 201);
  assert.equal((await patchBrowser(d, { proxy_id: proxy.id })).status, 200);
  await sdk.browsers.retrieve('local');
  // Once seen to end in 504 after 30 s on a busy machine: a failure says where the request was.
  const answer = await sdk.browsers.curl('local', { url: `http://site.test:${port}/echo` }).catch((err: unknown) => {
    const trail = d.logs.filter((l) => /forwarder|proxy|curl|request/.test(String(l.event))).slice(-15);
    throw new Error(`${(err as Error).message}; tinyproxy saw ${hop?.sink.seen.length ?? 0} at its upstream; the daemon's last lines: ${JSON.stringify(trail)}`, { cause: err });
  });
  browserCurlResponse.parse(answer);
  assert.equal(answer.status, 201, answer.body);
  const echo = JSON.parse(answer.body) as Record<string, string | null>;
  assert.match(echo.via ?? '', /proxyA/, 'tinyproxy carried it');
  assert.equal(echo.ua, await chromiumUa());
  const sinkBefore = hop.sink.seen.length;
  const res = await sdk.browsers.fetch('local', `http://site.test:${port}/echo`, { method: 'POST', body: 'via proxy' });
  const raw = (await res.json()) as Record<string, string | null>;
  assert.match(raw.via ?? '', /proxyA/);
  assert.ok(hop.sink.seen.length > sinkBefore, 'the proxy behind tinyproxy saw it');
  assert.equal((await patchBrowser(d, { proxy_id: null })).status, 200);
});

test('errors: scheme, the daemon\'s own port, a refused connection, timeout_ms, size limits, the scope', async () => {
  const post = (body: unknown, token = TEST_TOKEN): Promise<Response> => d.fetch('/curl', { method: 'POST', json: body, headers: { authorization: `Bearer ${token}` } });
  assert.match(String((await expectError(await post({ url: 'ftp://127.0.0.1/x' }), 400, 'bad_request')).message), /url: must be http or https/);
  assert.match(String((await expectError(await post({ url: `${d.url}/healthz` }), 400, 'bad_request')).message), /port of browserd itself/);
  const closed = http.createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const closedPort = (closed.address() as AddressInfo).port;
  await new Promise((resolve) => closed.close(resolve));
  // Refused: the browser's forwarding proxy answers for it (http), or the tunnel fails (https).
  const failed = await expectError(await post({ url: `http://127.0.0.1:${closedPort}/` }), 422, 'fetch_failed');
  assert.equal((failed.inner_error as { code: string }).code, 'proxy_error');
  assert.match(String(failed.message), /ECONNREFUSED/);
  const tunnel = await expectError(await post({ url: `https://127.0.0.1:${closedPort}/` }), 422, 'fetch_failed');
  assert.match(String((tunnel.inner_error as { code: string }).code), /^net::ERR_/);
  assert.match(String((await expectError(await post({ url: `${base}/hang?t`, timeout_ms: 300 }), 504, 'timeout')).message), /within 300 ms \(timeout_ms/);
  // Two requests in flight (held by the origin): a third is 429, safe to retry.
  const inFlight = [post({ url: `${base}/hang?a` }), post({ url: `${base}/hang?b` })];
  await hanging('/hang?a', '/hang?b');
  const busy = await post({ url: `${base}/echo` });
  assert.equal(busy.headers.get('x-should-retry'), 'true');
  assert.match(String((await expectError(busy, 429, 'limit_exceeded')).message), /BROWSERD_CURL_MAX_CONCURRENT/);
  for (const r of held.splice(0)) if (!r.destroyed) r.writeHead(200).end('released');
  for (const r of await Promise.all(inFlight)) assert.equal(((await r.json()) as { body: string }).body, 'released');
  assert.match(String((await expectError(await post({ url: `${base}/echo`, method: 'POST', body: 'x'.repeat(100_001) }), 413, 'payload_too_large')).message), /BROWSERD_CURL_MAX_BODY_BYTES/);
  assert.match(String((await expectError(await post({ url: `${base}/big` }), 413, 'payload_too_large')).message), /BROWSERD_CURL_MAX_RESPONSE_BYTES/);
  await expectError(await post({ url: `${base}/echo`, method: 'GET', body: 'x' }), 400, 'bad_request');
  await expectError(await post({ url: `${base}/echo` }, READER), 403, 'forbidden');
  await expectError(await d.fetch(`/curl/raw?url=${encodeURIComponent('file:///etc/passwd')}`), 400, 'bad_request');
  await expectError(await d.fetch('/curl/raw'), 400, 'bad_request');
  // The SDK refuses a call it cannot route, as declared: fetch before the cache has the session.
  const fresh = new Kernel({ apiKey: TEST_TOKEN, baseURL: d.url, maxRetries: 0 });
  await assert.rejects(fresh.browsers.fetch('local', `${base}/echo`), /route cache/);
  await assert.rejects(fresh.browsers.curl('other', { url: `${base}/echo` }), (err: unknown) => err instanceof APIError && err.status === 404);
});

test("/curl and /curl/raw return the target's Set-Cookie lines, each one, of the answer that ended a redirect chain", async () => {
  const want = ['first=1; Path=/', 'second=2; Path=/; HttpOnly'];
  for (const start of ['/two-cookies', '/cookie-redirect']) {
    const r = await sdk.browsers.curl('local', { url: `${base}${start}` });
    assert.equal(r.status, 200);
    assert.deepEqual(r.headers['set-cookie'], want, `${start}: /curl`);
    const raw = await d.fetch(`/curl/raw?url=${encodeURIComponent(`${base}${start}`)}`);
    assert.equal(raw.status, 200);
    assert.deepEqual(raw.headers.getSetCookie(), want, `${start}: /curl/raw`);
    await raw.text();
  }
  // The browser kept them too, as for any navigation.
  const { cookies } = await cdp.send('Storage.getCookies', {});
  assert.ok(['first', 'second', 'hop'].every((n) => cookies.some((c) => c.name === n)));
});

test('no session token in the log, a target URL that carries one included', async () => {
  const b = await sdk.browsers.retrieve('local');
  const jwt = new URL(b.cdp_ws_url).searchParams.get('jwt') ?? '';
  assert.ok(jwt.length > 20);
  // The curl line names the target URL: one with a jwt in it.
  await sdk.browsers.curl('local', { url: `${base}/echo?jwt=${jwt}` });
  await d.waitLog((l) => l.event === 'curl' && String(l.url).includes('/echo?jwt='));
  await d.fetch('/healthz');
  const text = d.logs.map((l) => JSON.stringify(l)).join('\n');
  assert.ok(!text.includes(jwt), 'the token is in the log');
  assert.ok(!text.includes(jwt.split('.')[2] ?? 'none'), "the token's signature is in the log");
});
