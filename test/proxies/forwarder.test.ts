// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The browser's forwarding proxy through the real daemon, with two real tinyproxy instances A and B
// (each adds its own Via header) in front of proxies of the test that send everything to a loopback
// origin reporting the Via header it saw. Clients talk to the forwarder as Chromium does:
// absolute-form requests for http:// and CONNECT tunnels. PATCH /browsers/{id} switches the exit.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { expectError } from '../helpers/http.js';
import { createProxy, type Closer } from '../helpers/proxies/servers.js';
import {
  forwarderPort,
  patchBrowser,
  rawConnection,
  startHop,
  startViaOrigin,
  viaProxy,
  viaTunnel,
  type Hop,
  type ViaOrigin,
} from '../helpers/proxies/forwarder.js';
import { tempDir } from '../kit/cleanup.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';

const closers: Closer[] = [];
const stateDir = tempDir();
let d: Daemon;
let origin: ViaOrigin;
let A: Hop;
let B: Hop;
let fp: number;
let idA: string;
let idB: string;

// forwarder-uid=0: the test's own clients (root) stand in for Chromium (the agent user).
const HOOKS = 'resolve=bypass.test:127.0.0.1;a.wild.test:127.0.0.1;site.test:127.0.0.1,forwarder-uid=0';
const site = (path: string): string => `http://site.test:${origin.port}${path}`;
const viaOf = (body: string): string | null => (JSON.parse(body) as { via: string | null }).via;
const custom = (port: number, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  type: 'custom',
  protocol: 'http',
  config: { host: '127.0.0.1', port },
  ...extra,
});

before(async () => {
  origin = await startViaOrigin();
  A = await startHop('proxyA', origin.port);
  B = await startHop('proxyB', origin.port);
  closers.push(origin, A, B);
  d = await startDaemon({ stateDir, env: { BROWSERD_TEST_HOOKS: HOOKS } });
  fp = await forwarderPort(d);
  idA = await createProxy(d, custom(A.tiny.port, { name: 'A' }));
  idB = await createProxy(d, custom(B.tiny.port, { name: 'B' }));
});
after(async () => {
  await d?.cleanup();
  for (const c of closers.reverse()) await c.close();
  rmSync(stateDir, { recursive: true, force: true });
});

async function use(id: string | null | ''): Promise<Record<string, unknown>> {
  const r = await patchBrowser(d, { proxy_id: id });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  return r.json;
}

test('without an active proxy every request goes direct', async () => {
  const r = await viaProxy(fp, site('/via'));
  assert.equal(r.status, 200, r.body);
  assert.equal(viaOf(r.body), null);
  assert.equal((await patchBrowser(d, {})).json.proxy, null, 'an empty PATCH changes nothing and shows no proxy');
});

test('PATCH to A: absolute-form requests and CONNECT tunnels go through A', async () => {
  const body = await use(idA);
  assert.equal(body.proxy_id, idA);
  assert.deepEqual(body.proxy, { id: idA, last_error: null });
  const r = await viaProxy(fp, site('/via'));
  assert.match(viaOf(r.body) ?? '', /^1\.1 proxyA \(tinyproxy/);
  const tunnels = A.sink.seen.length;
  const t = await viaTunnel(fp, `site.test:${origin.port}`, '/via');
  assert.equal(t.status, 200, t.body);
  assert.equal(viaOf(t.body), null, 'a tunnel carries the bytes unchanged');
  assert.deepEqual(
    A.sink.seen.slice(tunnels).map((s) => [s.form, s.authority, /proxyA/.test(s.via ?? '')]),
    [['connect', `site.test:${origin.port}`, true]],
    'the CONNECT went through tinyproxy A',
  );
});

test('PATCH to B: the next request goes through B; a keep-alive connection of before cannot carry a request through A', async () => {
  await use(idA);
  const conn = await rawConnection(fp);
  const request = `GET ${site('/via')} HTTP/1.1\r\nHost: site.test:${origin.port}\r\nConnection: keep-alive\r\n\r\n`;
  conn.socket.write(request);
  await conn.waitFor('proxyA');
  const throughA = A.sink.seen.length;
  await use(idB);
  conn.socket.write(request); // the same connection, after the switch answered
  await conn.closed;
  assert.doesNotMatch(conn.received().slice(conn.received().indexOf('proxyA') + 6), /HTTP\/1\.1/, 'no second answer on that connection');
  assert.equal(A.sink.seen.length, throughA, 'nothing went through A after the switch');
  const r = await viaProxy(fp, site('/via'));
  assert.match(viaOf(r.body) ?? '', /^1\.1 proxyB /);
  assert.equal(A.sink.seen.length, throughA);
});

test('a switch closes open tunnels and answers a request still waiting with 502, never a hang', async () => {
  await use(idA);
  const held = viaProxy(fp, site('/hold'));
  await origin.arrived('/hold');
  const tunnelConn = await rawConnection(fp);
  tunnelConn.socket.write(`CONNECT site.test:${origin.port} HTTP/1.1\r\nHost: site.test:${origin.port}\r\n\r\n`);
  await tunnelConn.waitFor('200 Connection established');
  await use(idB);
  const r = await held;
  assert.equal(r.status, 502);
  assert.match(r.body, /proxy was switched/);
  await tunnelConn.closed;
  origin.release();
});

test('PATCH to the proxy that is already active changes nothing: an open tunnel stays open', async () => {
  await use(idA);
  const conn = await rawConnection(fp);
  conn.socket.write(`CONNECT site.test:${origin.port} HTTP/1.1\r\nHost: site.test:${origin.port}\r\n\r\n`);
  await conn.waitFor('200 Connection established');
  await use(idA);
  conn.socket.write(`GET /via HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n`);
  await conn.waitFor('"via":null');
  await conn.closed;
  assert.match(conn.received(), /HTTP\/1\.1 200 OK/, 'the tunnel carried a request after the second PATCH');
});

test('PATCH to "" or null: direct again', async () => {
  await use(idA);
  await use('');
  assert.equal(viaOf((await viaProxy(fp, site('/via'))).body), null);
  await use(idB);
  const body = await use(null);
  assert.equal(body.proxy, null);
  assert.equal(body.proxy_id, undefined);
  assert.equal(viaOf((await viaProxy(fp, site('/via'))).body), null);
});

test('bypass_hosts go direct, every other host through the proxy; a changed list applies at once', async () => {
  const id = await createProxy(d, custom(A.tiny.port, { bypass_hosts: ['BYPASS.test', '*.wild.test'] }));
  await use(id);
  const via = async (host: string): Promise<string | null> => viaOf((await viaProxy(fp, `http://${host}:${origin.port}/via`)).body);
  assert.equal(await via('bypass.test'), null);
  assert.equal(await via('a.wild.test'), null);
  assert.match((await via('site.test')) ?? '', /proxyA/);
  const tunnels = A.sink.seen.length;
  assert.equal((await viaTunnel(fp, `bypass.test:${origin.port}`, '/via')).status, 200);
  assert.equal(A.sink.seen.length, tunnels, 'the tunnel to a bypassed host went direct');
  const res = await d.fetch(`/proxies/${id}`, { method: 'PATCH', json: { bypass_hosts: [] } });
  assert.equal(res.status, 200, await res.clone().text());
  assert.equal(((await res.json()) as { bypass_hosts?: unknown }).bypass_hosts, undefined);
  assert.match((await via('bypass.test')) ?? '', /proxyA/, 'no longer bypassed');
  await use('');
  assert.equal((await d.fetch(`/proxies/${id}`, { method: 'DELETE' })).status, 204);
});

test('per-upstream connection and byte counters in /metrics', async () => {
  await use(idA);
  await viaProxy(fp, site('/via'));
  const text = await (await d.fetch('/metrics')).text();
  const value = (name: string, labels: string): number => Number(new RegExp(`${name}\\{${labels}\\} (\\d+)`).exec(text)?.[1] ?? 0);
  assert.ok(value('browserd_forwarder_connections_total', `upstream="${idA}",outcome="ok"`) >= 1, 'connections through A');
  assert.ok(value('browserd_forwarder_bytes_total', `upstream="${idA}",direction="received"`) > 0, 'bytes from A');
  assert.ok(value('browserd_forwarder_connections_total', 'upstream="direct",outcome="ok"') >= 1, 'direct connections');
});

test('the active proxy cannot be deleted (409); it survives a daemon restart', async () => {
  await use(idB);
  await expectError(await d.fetch(`/proxies/${idB}`, { method: 'DELETE' }), 409, 'proxy_in_use');
  await d.stop();
  d = await startDaemon({ stateDir, env: { BROWSERD_TEST_HOOKS: HOOKS } });
  fp = await forwarderPort(d);
  await d.waitLog((l) => l.event === 'proxy_active_restored' && l.proxy_id === idB);
  assert.match(viaOf((await viaProxy(fp, site('/via'))).body) ?? '', /proxyB/);
  assert.deepEqual((await patchBrowser(d, {})).json.proxy, { id: idB, last_error: null });
  await use('');
  assert.equal((await d.fetch(`/proxies/${idB}`, { method: 'DELETE' })).status, 204, 'deletable once no longer active');
});
