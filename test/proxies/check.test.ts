// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// POST /proxies/{id}/check through real proxies on loopback: Debian's tinyproxy with Basic auth,
// and a proxy of the test that sends every tunnel and every absolute-form request to a local origin
// (so no byte leaves loopback, even for the "public" addresses that BROWSERD_TEST_HOOKS resolve=
// gives test names), and a DNS server of the test (BROWSERD_TEST_HOOKS dns=) for the names the
// table does not hold. https targets go through CONNECT, http targets in absolute-form (as the
// browser's requests go through the forwarding proxy); a url check through tinyproxy always uses an
// https URL, so tinyproxy is only ever asked to CONNECT (and refuses every port but the origin's).
import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { PUBLIC_V4, PUBLIC_V6, REFUSED, RESOLVE } from '../helpers/proxies/check-targets.js';
import { expectError } from '../helpers/http.js';
import {
  createProxy,
  freePort,
  selfSigned,
  startConnectProxy,
  startDnsServer,
  startHttpsOrigin,
  startOrigin,
  startTinyproxy,
  type Closer,
  type ConnectProxy,
  type DnsServer,
  type Origin,
  type Tinyproxy,
} from '../helpers/proxies/servers.js';
import { tempDir } from '../kit/cleanup.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';


const dir = tempDir();
const closers: Closer[] = [];
let d: Daemon;
let origin: Origin;
let httpsOrigin: Origin;
let tiny: Tinyproxy;
let pin: ConnectProxy;
let tlsProxy: ConnectProxy;
let gateway: ConnectProxy;
let held: ConnectProxy;
let proxyCertPem: string;
let closedPort: number;
let dns: DnsServer;
let route: (authority: string) => number;

before(async () => {
  const originCert = selfSigned(dir, 'origin', ['DNS:test.example']);
  const proxyCert = selfSigned(dir, 'proxy', ['IP:127.0.0.1']);
  proxyCertPem = proxyCert.cert;
  origin = await startOrigin();
  httpsOrigin = await startHttpsOrigin(originCert);
  // A target that accepts the tunnel and closes it at once.
  const closer = net.createServer((s) => s.destroy());
  await new Promise<void>((r) => closer.listen(0, '127.0.0.1', r));
  closers.push(origin, httpsOrigin, { close: () => new Promise<void>((r) => closer.close(() => r())) });
  route = (authority: string): number =>
    authority.endsWith(':443') ? httpsOrigin.port : authority.endsWith(':81') ? (closer.address() as net.AddressInfo).port : origin.port;
  tiny = await startTinyproxy({ user: 'user', pass: 'secret1', connectPorts: [origin.port] });
  pin = await startConnectProxy({ route });
  tlsProxy = await startConnectProxy({ route, tls: proxyCert });
  gateway = await startConnectProxy({ route });
  held = await startConnectProxy({ route, mode: 'hold' });
  closers.push(tiny, pin, tlsProxy, gateway, held);
  closedPort = await freePort();
  dns = await startDnsServer({
    'counted.example': { a: [PUBLIC_V4] },
    'half.example': { a: [PUBLIC_V4], silent: ['AAAA'] },
    'slow.example': { silent: ['A', 'AAAA'] },
    'private-dns.example': { a: [PUBLIC_V4, '10.1.2.3'] },
    'v6private-dns.example': { a: [PUBLIC_V4], aaaa: ['fd00::1'] },
    'compat-dns.example': { aaaa: ['::7f00:1'] },
  });
  closers.push(dns);
  const providers = path.join(dir, 'providers.json');
  writeFileSync(providers, JSON.stringify({ residential: { host: '127.0.0.1', port: gateway.port, protocol: 'http', username: 'gw', password: 'gwsecret' } }));
  d = await startDaemon({
    env: {
      BROWSERD_PROXY_CHECK_URLS: `http://127.0.0.1:${origin.port}/noip http://127.0.0.1:${origin.port}/json`,
      BROWSERD_PROXY_PROVIDERS_FILE: providers,
      // direct-to: a url check of a bypassed host goes straight to the (public) checked address: here, to the origin.
      BROWSERD_TEST_HOOKS: `resolve=${RESOLVE},dns=${dns.address},direct-to=${origin.port}`,
      BROWSERD_MAX_PROXY_CHECKS: '1',
      // The test origin's self-signed certificate is trusted like a public CA's would be.
      NODE_EXTRA_CA_CERTS: originCert.certFile,
    },
  });
});
after(async () => {
  await d?.cleanup();
  for (const c of closers.reverse()) await c.close();
  rmSync(dir, { recursive: true, force: true });
});

const custom = (port: number, extra: Record<string, unknown> = {}, protocol: 'http' | 'https' = 'http'): unknown => ({
  type: 'custom',
  protocol,
  config: { host: '127.0.0.1', port, ...extra },
});
const tinyCreds = { username: 'user', password: 'secret1' };

async function check(id: string, url?: string): Promise<Response> {
  return d.fetch(`/proxies/${id}/check`, { method: 'POST', ...(url !== undefined ? { json: { url } } : {}) });
}

async function checkOk(id: string, url?: string): Promise<Record<string, unknown>> {
  const res = await check(id, url);
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return JSON.parse(text) as Record<string, unknown>;
}

async function checkFails(id: string, url: string, cause: string): Promise<string> {
  const err = await expectError(await check(id, url), 422, 'proxy_check_failed');
  const inner = err.inner_error as { code: string; message: string };
  assert.equal(inner.code, cause, JSON.stringify(err));
  return inner.message;
}

async function get(id: string): Promise<Record<string, unknown>> {
  return (await (await d.fetch(`/proxies/${id}`)).json()) as Record<string, unknown>;
}

test('a check without url through tinyproxy: available, the exit IP, last_checked', async () => {
  const id = await createProxy(d, custom(tiny.port, tinyCreds));
  const seen = origin.seen.length;
  const before = Date.now();
  const p = await checkOk(id);
  assert.equal(p.status, 'available');
  assert.equal(p.ip_address, '127.0.0.1');
  assert.ok(Date.parse(String(p.last_checked)) >= before - 1000, String(p.last_checked));
  assert.deepEqual(await get(id), p, 'stored');
  assert.deepEqual(
    origin.seen.slice(seen).map((r) => r.url),
    ['/noip', '/json'],
    'the check URLs in turn until one answers with an IP',
  );
  const line = await d.waitLog((l) => l.event === 'proxy_check' && l.proxy_id === id);
  assert.equal(line.outcome, 'available');
  assert.equal(typeof line.ms, 'number');
});

test('wrong password: unavailable (tinyproxy answers 401), with last_check_error saying why', async () => {
  const id = await createProxy(d, custom(tiny.port, { username: 'user', password: 'wrongpass' }));
  const p = await checkOk(id);
  assert.equal(p.status, 'unavailable');
  assert.equal(p.ip_address, undefined);
  assert.ok(!Number.isNaN(Date.parse(String(p.last_checked))));
  const err = p.last_check_error as { code: string; message: string };
  assert.equal(err.code, 'proxy_auth_failed');
  assert.match(err.message, /refused the credentials: 401/);
  assert.deepEqual(await get(id), p, 'stored and returned by GET');
  const line = await d.waitLog((l) => l.event === 'proxy_check' && l.proxy_id === id);
  assert.equal(line.cause_code, 'proxy_auth_failed');
});

test('proxy down: unavailable with last_check_error proxy_unreachable; a later available check removes it', async () => {
  const port = await freePort();
  const id = await createProxy(d, custom(port));
  const p = await checkOk(id);
  assert.equal(p.status, 'unavailable');
  assert.equal((p.last_check_error as { code: string }).code, 'proxy_unreachable');
  assert.match((p.last_check_error as { message: string }).message, /ECONNREFUSED/);
  const line = await d.waitLog((l) => l.event === 'proxy_check' && l.proxy_id === id);
  assert.equal(line.cause_code, 'proxy_unreachable');
  // The same port now answers as a proxy.
  const late = await startConnectProxy({ route, port });
  closers.push(late);
  const ok = await checkOk(id);
  assert.equal(ok.status, 'available');
  assert.equal(ok.last_check_error, undefined, 'cleared when available');
  assert.equal((await get(id)).last_check_error, undefined);
});

test('an https proxy with a ca_bundle: a check without url is available', async () => {
  const id = await createProxy(d, custom(tlsProxy.port, { ca_bundle: proxyCertPem }, 'https'));
  const p = await checkOk(id);
  assert.equal(p.status, 'available');
  assert.equal(p.ip_address, '127.0.0.1');
});


test('the url guard refuses every non-public target with 400, before any connection', async () => {
  const id = await createProxy(d, custom(pin.port));
  const connects = pin.connections;
  for (const url of REFUSED) {
    const err = await expectError(await check(id, url), 400, 'bad_request');
    const details = err.details as { message: string }[];
    assert.equal(details.length, 1, url);
    assert.match(details[0]?.message ?? '', /^url: /, url);
  }
  assert.equal(pin.connections, connects, 'the proxy was never contacted');
  assert.equal((await get(id)).status, undefined);
  assert.deepEqual(dns.queries.filter((q) => q.name.includes('localhost')), [], 'localhost names are never looked up');
  assert.deepEqual(dns.asked('v6private-dns.example').map((q) => q.type).sort(), ['A', 'AAAA'], 'both families are judged');
});

test('a url check tunnels to the checked address; the host name only in SNI and Host', async () => {
  const id = await createProxy(d, custom(pin.port));
  const p = await checkOk(id, 'https://test.example/json');
  assert.equal(pin.seen.at(-1)?.authority, `${PUBLIC_V4}:443`);
  assert.deepEqual(httpsOrigin.seen.at(-1), { url: '/json', host: 'test.example', servername: 'test.example' });
  assert.equal(p.status, undefined, 'a url check changes no status');
  assert.equal(p.last_checked, undefined);

  await checkOk(id, 'http://test.example:8080/text?x=1');
  assert.equal(pin.seen.at(-1)?.authority, `${PUBLIC_V4}:8080`);
  assert.deepEqual(origin.seen.at(-1), { url: '/text?x=1', host: 'test.example:8080' });

  await checkOk(id, 'http://v6.example/json');
  assert.equal(pin.seen.at(-1)?.authority, `[${PUBLIC_V6}]:80`);
  assert.equal(origin.seen.at(-1)?.host, 'v6.example');

  await checkOk(id, `http://${PUBLIC_V4}/json`);
  assert.equal(pin.seen.at(-1)?.authority, `${PUBLIC_V4}:80`);
});

test('a url check leaves status, last_checked and ip_address as they were', async () => {
  const id = await createProxy(d, custom(tiny.port, tinyCreds));
  const checked = await checkOk(id);
  assert.equal(checked.status, 'available');
  await checkFails(id, 'https://test.example/', 'target_unreachable');
  assert.deepEqual(await get(id), checked);
});

test('an http target is asked in absolute-form; its 5xx is target_unreachable there, an https target answering 5xx is reachable', async () => {
  const id = await createProxy(d, custom(pin.port));
  await checkOk(id, 'http://test.example/status/404');
  assert.deepEqual(
    { form: pin.seen.at(-1)?.form, target: pin.seen.at(-1)?.target },
    { form: 'absolute', target: `http://${PUBLIC_V4}/status/404` },
    'the checked address in the request target, the name only in Host',
  );
  assert.equal(origin.seen.at(-1)?.host, 'test.example');
  assert.match(await checkFails(id, 'http://test.example/status/503', 'target_unreachable'), /answered 503/);
  await checkOk(id, 'https://test.example/status/503');
  assert.equal(pin.seen.at(-1)?.form, 'connect');
});

test('failed url checks name their cause', async () => {
  const down = await createProxy(d, custom(closedPort));
  assert.match(await checkFails(down, 'http://test.example/', 'proxy_unreachable'), /ECONNREFUSED/);

  const badAuth = await createProxy(d, custom(tiny.port, { username: 'user', password: 'wrongpass' }));
  assert.match(await checkFails(badAuth, 'http://test.example/', 'proxy_auth_failed'), /401/);

  // tinyproxy refuses CONNECT to a port other than its ConnectPort lines (403), without connecting.
  const good = await createProxy(d, custom(tiny.port, tinyCreds));
  assert.match(await checkFails(good, 'https://test.example/', 'target_unreachable'), /CONNECT 93\.184\.216\.34:443 with 403/);

  const viaPin = await createProxy(d, custom(pin.port));
  // A tunnel the target closes at once; the same in absolute-form is the proxy closing without an answer.
  assert.match(await checkFails(viaPin, 'https://test.example:81/', 'tls_failed'), /TLS with test\.example failed/);
  assert.match(await checkFails(viaPin, 'http://test.example:81/', 'proxy_unreachable'), /the proxy gave no HTTP answer/);
  assert.match(await checkFails(viaPin, 'https://other.example/', 'tls_failed'), /other\.example/);

  const tlsNoCa = await createProxy(d, custom(tlsProxy.port, {}, 'https'));
  assert.match(await checkFails(tlsNoCa, 'https://test.example/json', 'tls_failed'), /proxy/);
  for (const id of [down, badAuth, good, viaPin, tlsNoCa]) assert.equal((await get(id)).status, undefined);
});

test("a url check of a host in the proxy's bypass_hosts goes straight to the target, not through the proxy", async () => {
  const id = await createProxy(d, { ...(custom(pin.port) as object), bypass_hosts: ['test.example'] });
  const through = pin.seen.length;
  await checkOk(id, 'http://test.example/text?direct');
  assert.equal(pin.seen.length, through, 'the proxy was not asked');
  assert.deepEqual(origin.seen.at(-1), { url: '/text?direct', host: 'test.example' }, 'origin-form, straight');
  const line = await d.waitLog((l) => l.event === 'proxy_check' && l.proxy_id === id);
  assert.equal(line.route, 'direct');
  await checkOk(id, 'http://other.example/text?proxied');
  assert.equal(pin.seen.length, through + 1, 'a host not bypassed goes through the proxy');
  // The default check measures the proxy itself: through it, whatever bypass_hosts says.
  const all = await createProxy(d, { ...(custom(pin.port) as object), bypass_hosts: ['127.0.0.1'] });
  const before = pin.seen.length;
  assert.equal((await checkOk(all)).status, 'available');
  assert.ok(pin.seen.length > before);
});

test('names the table does not hold go to DNS: NXDOMAIN is target_unreachable; a server that drops AAAA does not fail the check', async () => {
  const viaPin = await createProxy(d, custom(pin.port));
  assert.match(await checkFails(viaPin, 'http://missing.example/', 'target_unreachable'), /missing\.example: ENOTFOUND/);
  assert.equal(dns.asked('missing.example').length, 2, 'A and AAAA');
  await checkOk(viaPin, 'http://half.example/json');
  assert.equal(pin.seen.at(-1)?.authority, `${PUBLIC_V4}:80`);
  assert.equal(origin.seen.at(-1)?.host, 'half.example');
});

test('an https proxy is verified against its ca_bundle', async () => {
  const id = await createProxy(d, custom(tlsProxy.port, { ca_bundle: proxyCertPem }, 'https'));
  const seen = tlsProxy.seen.length;
  await checkOk(id, 'https://test.example/json');
  assert.equal(tlsProxy.seen.length, seen + 1);
  assert.equal(tlsProxy.seen.at(-1)?.authority, `${PUBLIC_V4}:443`);
  assert.equal(httpsOrigin.seen.at(-1)?.servername, 'test.example');
});

test('managed types go through their gateway with the targeting in the username', async () => {
  const id = await createProxy(d, { type: 'residential', config: { country: 'US', state: 'CO', city: 'Denver', os: 'windows' } });
  await checkOk(id, 'http://test.example/json');
  const auth = gateway.seen.at(-1)?.proxyAuthorization ?? '';
  assert.match(auth, /^Basic /);
  assert.equal(Buffer.from(auth.slice(6), 'base64').toString(), 'gw-country-us-state-co-city-denver:gwsecret');
  const p = await checkOk(id);
  assert.equal(p.status, 'available');
  assert.equal(p.ip_address, '127.0.0.1');
  const dc = await createProxy(d, { type: 'datacenter' });
  const err = await expectError(await check(dc), 422, 'proxy_check_failed');
  assert.equal((err.inner_error as { code: string }).code, 'provider_not_configured');
});

test('two checks of one proxy and one url at once share one run; other checks, other urls included, past the limit are 429', async () => {
  const id = await createProxy(d, custom(held.port));
  const other = await createProxy(d, custom(pin.port));
  const first = check(id, 'http://test.example/json');
  await held.waitSeen(1);
  const second = check(id, 'http://test.example/json');
  await d.waitLog((l) => l.event === 'proxy_check_joined');
  const refused = await expectError(await check(other, 'http://test.example/json'), 429, 'limit_exceeded');
  assert.match(String(refused.message), /limit 1/);
  await expectError(await check(id, 'http://test.example/text'), 429, 'limit_exceeded');
  held.release();
  const [r1, r2] = await Promise.all([first, second]);
  assert.equal(r1.status, 200, await r1.clone().text());
  assert.equal(r2.status, 200);
  assert.deepEqual(await r1.json(), await r2.json());
  assert.equal(held.seen.length, 1, 'one run through the proxy');
  await checkOk(other, 'http://test.example/json');
});

test('past the check limit a url check is 429 before its name is looked up', async () => {
  const hold = await startConnectProxy({ route, mode: 'hold' });
  closers.push(hold);
  const id = await createProxy(d, custom(hold.port));
  const other = await createProxy(d, custom(pin.port));
  const first = check(id, 'http://test.example/json');
  await hold.waitSeen(1);
  const refused = await expectError(await check(other, 'http://counted.example/json'), 429, 'limit_exceeded');
  assert.match(String(refused.message), /limit 1/);
  assert.deepEqual(dns.asked('counted.example'), [], 'no lookup for a check that got no slot');
  hold.release();
  const r1 = await first;
  assert.equal(r1.status, 200, await r1.text());
  // The same check with a free slot: now the name is looked up (A and AAAA) and the tunnel pinned.
  await checkOk(other, 'http://counted.example/json');
  assert.deepEqual(dns.asked('counted.example').map((q) => q.type).sort(), ['A', 'AAAA']);
  assert.equal(pin.seen.at(-1)?.authority, `${PUBLIC_V4}:80`);
});

test('checks are counted by outcome; no password or credentials are logged', async () => {
  const text = await (await d.fetch('/metrics')).text();
  for (const outcome of ['available', 'unavailable', 'ok', 'proxy_auth_failed', 'tls_failed', 'provider_not_configured']) {
    assert.match(text, new RegExp(`browserd_proxy_checks_total\\{outcome="${outcome}"\\} [1-9]`), outcome);
  }
  const logs = JSON.stringify(d.logs);
  for (const secret of ['secret1', 'wrongpass', 'gwsecret', Buffer.from('user:secret1').toString('base64'), 'gw-country']) {
    assert.ok(!logs.includes(secret), `${secret} is not logged`);
  }
});

test('a proxy or a name that never answers: timeout, naming the phase', async () => {
  const hang = await startConnectProxy({ mode: 'hang' });
  const dt = await startDaemon({ env: { BROWSERD_PROXY_CHECK_TIMEOUT_MS: '1000', BROWSERD_TEST_HOOKS: `resolve=${RESOLVE},dns=${dns.address}` } });
  try {
    const id = await createProxy(dt, custom(hang.port));
    const err = await expectError(await dt.fetch(`/proxies/${id}/check`, { method: 'POST', json: { url: 'https://test.example/' } }), 422, 'proxy_check_failed');
    const inner = err.inner_error as { code: string; message: string };
    assert.equal(inner.code, 'timeout');
    assert.match(inner.message, /CONNECT/);
    const plain = await expectError(await dt.fetch(`/proxies/${id}/check`, { method: 'POST', json: { url: 'http://test.example/' } }), 422, 'proxy_check_failed');
    assert.deepEqual(plain.inner_error, { code: 'timeout', message: "no answer to GET through the proxy before the check's deadline" });
    // A name whose DNS server never answers: the lookup is under the check's deadline too.
    const connections = hang.connections;
    const slow = await expectError(await dt.fetch(`/proxies/${id}/check`, { method: 'POST', json: { url: 'http://slow.example/' } }), 422, 'proxy_check_failed');
    const slowInner = slow.inner_error as { code: string; message: string };
    assert.equal(slowInner.code, 'timeout', JSON.stringify(slow));
    assert.match(slowInner.message, /resolve phase\) of slow\.example/);
    assert.equal(hang.connections, connections, 'no connection after a failed lookup');
    assert.ok(dns.asked('slow.example').length >= 2, 'the DNS server was asked');
    const res = await dt.fetch(`/proxies/${id}/check`, { method: 'POST' });
    assert.equal(((await res.json()) as { status: string }).status, 'unavailable');
  } finally {
    await dt.cleanup();
    await hang.close();
  }
});
