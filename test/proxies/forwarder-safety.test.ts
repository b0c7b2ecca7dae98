// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The forwarding proxy is no relay and fails visibly: only the daemon's own uid is served, the
// daemon's own ports are never a target, a failing upstream gives the browser a proxy error and
// the API the cause, and PATCH /browsers/{id} takes only what it can honour. The daemon survives
// all of it (same pid).
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { PeerLookup, type Endpoint } from '../../daemon/proxies/forwarder/peer.js';
import { expectError } from '../helpers/http.js';
import { createProxy, type Closer } from '../helpers/proxies/servers.js';
import { forwarderPort, patchBrowser, startHop, startViaOrigin, viaProxy, viaTunnel, type Hop, type ViaOrigin } from '../helpers/proxies/forwarder.js';
import { tempDir } from '../kit/cleanup.js';
import { TEST_TOKEN, startDaemon, type Daemon } from '../kit/daemon.js';

const hex = (t: string): string => createHash('sha256').update(t).digest('hex');
const P1 = 'project1-token-bbbbbbbbbbbbbbbbbb';
const PROXIES_ONLY = 'proxies-token-cccccccccccccccccc';
const dir = tempDir();
const closers: Closer[] = [];
let d: Daemon;
let origin: ViaOrigin;
let authed: Hop;
let fp: number;
let apiPort: number;
let pid: number;

before(async () => {
  origin = await startViaOrigin();
  authed = await startHop('proxyC', origin.port, { user: 'user', pass: 'secret1' });
  closers.push(origin, authed);
  const keys = path.join(dir, 'keys.json');
  const all = ['browser:read', 'browser:write', 'proxies:read', 'proxies:write', 'proxies:check'];
  writeFileSync(
    keys,
    JSON.stringify([
      { id: 'admin', sha256: hex(TEST_TOKEN), scopes: all },
      { id: 'p1', sha256: hex(P1), scopes: all, project: 'p1' },
      { id: 'proxies-only', sha256: hex(PROXIES_ONLY), scopes: ['proxies:read', 'proxies:write'] },
    ]),
  );
  d = await startDaemon({ env: { BROWSERD_KEYS_FILE: keys, BROWSERD_TEST_HOOKS: 'resolve=site.test:127.0.0.1,forwarder-uid=0', BROWSERD_PROXY_DIAL_TIMEOUT_MS: '3000' } });
  fp = await forwarderPort(d);
  apiPort = Number(new URL(d.url).port);
  pid = d.pid;
});
after(async () => {
  await d?.cleanup();
  for (const c of closers.reverse()) await c.close();
  rmSync(dir, { recursive: true, force: true });
});

const custom = (port: number, extra: Record<string, unknown> = {}, protocol = 'http'): Record<string, unknown> => ({
  type: 'custom',
  protocol,
  config: { host: '127.0.0.1', port, ...extra },
});

function curlAs(uid: number | null, args: string[]): Promise<{ code: number; out: string; err: string }> {
  const [cmd, argv] = uid === null ? ['curl', args] : ['setpriv', [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', 'curl', ...args]];
  return new Promise((resolve) => execFile(cmd, argv, (e, out, err) => resolve({ code: typeof e?.code === 'number' ? e.code : 0, out, err })));
}

test('the peer uid lookup reads /proc/net/tcp{,6}: a fixture table', async () => {
  // 127.0.0.1:40000 → 127.0.0.1:8080, uid 1000 (IPv4), and the same pair IPv4-mapped in tcp6, uid 1001.
  const v4 = [
    '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode',
    '   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 100 1 0 100 0 0 10 0',
    '   1: 0100007F:9C40 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 101 1 0 20 4 30 10 -1',
  ].join('\n');
  const v6 = [
    '  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode',
    '   0: 0000000000000000FFFF00000100007F:9C41 0000000000000000FFFF00000100007F:1F90 01 00000000:00000000 00:00000000 00000000  1001        0 102 1 0 20 4 30 10 -1',
  ].join('\n');
  const tables = tempDir('browserd-peer-');
  writeFileSync(path.join(tables, 'tcp'), `${v4}\n`);
  writeFileSync(path.join(tables, 'tcp6'), `${v6}\n`);
  const fixture = new PeerLookup({ tables: [path.join(tables, 'tcp'), path.join(tables, 'tcp6')], owners: null });
  /** The uid of the socket whose local end is `peer` and remote end `us` (a connection accepted by `us` from `peer`). */
  const uidOf = (peer: Endpoint, us: Endpoint): Promise<number | null> =>
    fixture.uidOf({ remoteAddress: peer.address, remotePort: peer.port, localAddress: us.address, localPort: us.port } as net.Socket, 0);
  const server = { address: '127.0.0.1', port: 8080 };
  assert.equal(await uidOf({ address: '127.0.0.1', port: 40000 }, server), 1000);
  assert.equal(await uidOf({ address: '127.0.0.1', port: 40001 }, server), 1001, 'found in tcp6 (IPv4-mapped) when tcp has no entry');
  assert.equal(await uidOf({ address: '::ffff:127.0.0.1', port: 40001 }, { address: '::ffff:127.0.0.1', port: 8080 }), 1001);
  assert.equal(await uidOf({ address: '127.0.0.1', port: 40002 }, server), null, 'no such socket: no uid');
  assert.equal(await uidOf(server, { address: '127.0.0.1', port: 40000 }), null, 'the direction matters');
});

/** A connection to a new server on 127.0.0.1 from a node of uid `uid` (null: this process) over `host`; the accepted socket. */
async function connectionFrom(uid: number | null, host = '127.0.0.1'): Promise<{ socket: net.Socket; close(): void }> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as net.AddressInfo).port;
  const accepted = new Promise<net.Socket>((r) => srv.once('connection', r));
  let client: net.Socket | null = null;
  let child: ChildProcess | null = null;
  if (uid === null) {
    client = net.connect(port, host);
    client.on('error', () => undefined);
  } else {
    // Holds its connection open until its stdin closes.
    const code = `const c=require('net').connect(${port},${JSON.stringify(host)});c.on('error',()=>{});process.stdin.on('end',()=>process.exit(0)).resume()`;
    child = spawn('setpriv', [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', process.execPath, '-e', code], { stdio: ['pipe', 'ignore', 'inherit'] });
  }
  const socket = await accepted;
  return {
    socket,
    close: () => {
      client?.destroy();
      child?.stdin?.end();
      socket.destroy();
      srv.close();
    },
  };
}

test('the peer uid lookup, live: sock_diag (the native module is built) and the /proc tables agree, for this uid and another', async () => {
  const byDiag = new PeerLookup();
  assert.equal(byDiag.method, 'sock_diag', `sock_diag not used: ${byDiag.fallbackReason}`);
  const byProc = new PeerLookup({ owners: null });
  assert.equal(byProc.method, 'proc');
  const others = process.getuid?.() === 0 ? [65534] : []; // another uid needs root to run a client as
  for (const uid of [null, ...others]) {
    for (const host of ['127.0.0.1', '::ffff:127.0.0.1']) {
      const c = await connectionFrom(uid, host);
      try {
        const want = uid ?? process.getuid?.();
        assert.equal(await byDiag.uidOf(c.socket, performance.now()), want, `sock_diag, uid ${want} over ${host}`);
        assert.equal(await byProc.uidOf(c.socket, performance.now()), want, `/proc, uid ${want} over ${host}`);
      } finally {
        c.close();
      }
    }
  }
  // No such peer: a socket whose remote end is not the peer's (a port nobody connects from).
  const c = await connectionFrom(null);
  try {
    const ghost = { remoteAddress: '127.0.0.1', remotePort: 1, localAddress: c.socket.localAddress, localPort: c.socket.localPort } as net.Socket;
    assert.equal(await byDiag.uidOf(ghost, performance.now()), null);
    assert.equal(await byProc.uidOf(ghost, 0), null);
    // The direction matters: our own end is not the peer's.
    const reversed = { remoteAddress: c.socket.localAddress, remotePort: c.socket.localPort, localAddress: c.socket.remoteAddress, localPort: c.socket.remotePort } as net.Socket;
    assert.equal(await byDiag.uidOf(reversed, performance.now()), process.getuid?.(), 'the accepting socket is ours too');
  } finally {
    c.close();
  }
});

test('a sock_diag that fails at run time hands over to the /proc tables, once, and says so', async () => {
  const told: string[] = [];
  const failing = new PeerLookup({
    owners: {
      uidOf: () => {
        throw new Error('sock_diag request: Protocol not supported');
      },
    },
    onFallback: (why) => told.push(why),
  });
  assert.equal(failing.method, 'sock_diag');
  const c = await connectionFrom(null);
  try {
    assert.equal(await failing.uidOf(c.socket, performance.now()), process.getuid?.());
    assert.equal(await failing.uidOf(c.socket, performance.now()), process.getuid?.());
  } finally {
    c.close();
  }
  assert.equal(failing.method, 'proc');
  assert.deepEqual(told, ['sock_diag request: Protocol not supported']);
  // An address the module refuses (ERR_INVALID_ARG) is looked up in the tables once; sock_diag stays.
  const picky = new PeerLookup({
    owners: {
      uidOf: () => {
        throw Object.assign(new TypeError('uidOf: not two IP addresses of one family'), { code: 'ERR_INVALID_ARG' });
      },
    },
    onFallback: (why) => told.push(why),
  });
  const c2 = await connectionFrom(null);
  try {
    assert.equal(await picky.uidOf(c2.socket, performance.now()), process.getuid?.());
  } finally {
    c2.close();
  }
  assert.equal(picky.method, 'sock_diag');
  assert.equal(told.length, 1);
});

test('a connection of another uid is closed unanswered; the daemon uid is served', async () => {
  assert.equal((await d.waitLog((l) => l.event === 'forwarder_listening')).peer_check, 'sock_diag', 'the peer check asks sock_diag');
  assert.equal((await curlAs(null, ['-sS', '-x', `http://127.0.0.1:${fp}`, `http://site.test:${origin.port}/via`])).code, 0);
  // Not root: no other uid to run a client as; the lookup the refusal rests on is asserted by the test above.
  if (process.getuid?.() !== 0) return;
  const seen = origin.seen.length;
  for (const args of [['-x', `http://127.0.0.1:${fp}`, `http://site.test:${origin.port}/via`], ['-p', '-x', `http://127.0.0.1:${fp}`, `http://site.test:${origin.port}/via`]]) {
    const r = await curlAs(65534, ['-sS', '--max-time', '20', ...args]);
    assert.ok([52, 56].includes(r.code), `curl as nobody: exit ${r.code} ${r.err}`);
    assert.equal(r.out, '');
  }
  assert.equal(origin.seen.length, seen, 'nothing reached the origin');
  const line = await d.waitLog((l) => l.event === 'forwarder_refused' && l.reason === 'peer_uid');
  assert.equal(line.peer_uid, 65534);
  assert.match(await (await d.fetch('/metrics')).text(), /browserd_forwarder_refused_total\{reason="peer_uid"\} [1-9]/);
});

test("the daemon's own ports are refused in every spelling, with or without a proxy", async () => {
  const id = await createProxy(d, custom(authed.tiny.port, { username: 'user', password: 'secret1' }));
  for (const proxy of ['', id]) {
    assert.equal((await patchBrowser(d, { proxy_id: proxy })).status, 200);
    // site.test resolves to 127.0.0.1 here: judged after the lookup of a direct connection (through a proxy, the proxy resolves it).
    for (const host of ['127.0.0.1', 'localhost', '127.9.9.9', '0.0.0.0', '[::1]', '[::ffff:127.0.0.1]', ...(proxy === '' ? ['site.test'] : [])]) {
      for (const port of [apiPort, fp]) {
        const r = await viaProxy(fp, `http://${host}:${port}/healthz`);
        assert.equal(r.status, 403, `${host}:${port} ${r.body}`);
        assert.match(r.body, /port of browserd itself/);
        assert.equal((await viaTunnel(fp, `${host}:${port}`, '/healthz')).status, 403, `CONNECT ${host}:${port}`);
      }
    }
  }
  assert.equal((await patchBrowser(d, { proxy_id: '' })).status, 200);
});

test('a wrong password: the browser gets 502 naming the cause, the API and the log the cause', async () => {
  const id = await createProxy(d, custom(authed.tiny.port, { username: 'user', password: 'wrongpass' }));
  assert.equal((await patchBrowser(d, { proxy_id: id })).status, 200);
  const t = await viaTunnel(fp, `site.test:${origin.port}`, '/via');
  assert.equal(t.status, 502);
  assert.match(t.body, /proxy_auth_failed: the proxy refused the credentials: 401/);
  const status = (await patchBrowser(d, {})).json.proxy as { id: string; last_error: { code: string; message: string; at: string } };
  assert.equal(status.id, id);
  assert.equal(status.last_error.code, 'proxy_auth_failed');
  assert.ok(!Number.isNaN(Date.parse(status.last_error.at)));
  const line = await d.waitLog((l) => l.event === 'forwarder_upstream_failed' && l.proxy_id === id);
  assert.equal(line.cause, 'proxy_auth_failed');
  assert.match(await (await d.fetch('/metrics')).text(), new RegExp(`browserd_forwarder_connections_total\\{upstream="${id}",outcome="proxy_auth_failed"\\} [1-9]`));
  // No credentials at all: tinyproxy answers 407 to an absolute-form request, which is the proxy's error too.
  const none = await createProxy(d, custom(authed.tiny.port));
  assert.equal((await patchBrowser(d, { proxy_id: none })).status, 200);
  const r = await viaProxy(fp, `http://site.test:${origin.port}/via`);
  assert.equal(r.status, 502);
  assert.match(r.body, /proxy_auth_failed: the proxy needs credentials: 407/);
  assert.ok(!JSON.stringify(d.logs).includes('wrongpass'), 'no password is logged');
});

test('an https proxy that speaks plain HTTP: the cause suggests protocol: http', async () => {
  const id = await createProxy(d, custom(authed.tiny.port, { username: 'user', password: 'secret1' }, 'https'));
  assert.equal((await patchBrowser(d, { proxy_id: id })).status, 200);
  const t = await viaTunnel(fp, `site.test:${origin.port}`, '/via');
  assert.equal(t.status, 502);
  assert.match(t.body, /tls_failed: no TLS handshake with the proxy — is it a plain HTTP proxy\? set protocol: http/);
  const status = (await patchBrowser(d, { proxy_id: '' })).json;
  assert.equal(status.proxy, null);
});

test('PATCH /browsers/{id}: unsupported fields 422, unknown 400, scope browser:write, proxies of other projects 404', async () => {
  const mine = await createProxy(d, custom(authed.tiny.port));
  for (const field of ['name', 'tags']) {
    const err = await expectError(await d.fetch('/browsers/local', { method: 'PATCH', json: { [field]: field === 'name' ? 'x' : {} } }), 422, 'unsupported_field');
    assert.match(String(err.message), new RegExp(`^${field}: `));
    assert.equal((err.inner_error as { code: string }).code, field);
  }
  await expectError(await d.fetch('/browsers/local', { method: 'PATCH', json: { disable_default_proxy: false } }), 422, 'unsupported_field');
  // profile is the profiles module's (test/profiles): a reference without id or name is a bad request.
  await expectError(await d.fetch('/browsers/local', { method: 'PATCH', json: { profile: {} } }), 400, 'bad_request');
  // telemetry is the telemetry module's (test/telemetry/browser-update.test.ts): enabled false with categories is a bad request.
  await expectError(await d.fetch('/browsers/local', { method: 'PATCH', json: { telemetry: { enabled: false, browser: { console: { enabled: true } } } } }), 400, 'bad_request');
  await expectError(await d.fetch('/browsers/local', { method: 'PATCH', json: { proxy_id: mine, tags: {} } }), 422, 'unsupported_field');
  await expectError(await d.fetch('/browsers/local', { method: 'PATCH', json: { proxy_id: mine, viewport: {} } }), 400, 'bad_request');
  assert.equal((await patchBrowser(d, {})).json.proxy, null, 'a refused request changed nothing');
  assert.equal((await patchBrowser(d, { telemetry: {}, disable_default_proxy: true })).status, 200, 'the no-ops are accepted');
  const unknown = await expectError(await d.fetch('/browsers/local', { method: 'PATCH', json: { proxy: mine } }), 400, 'bad_request');
  assert.match(String(unknown.message), /proxy/);
  await expectError(await d.fetch('/browsers/local', { method: 'PATCH', json: { proxy_id: 5 } }), 400, 'bad_request');
  await expectError(await d.fetch('/browsers/local', { method: 'PATCH', json: { proxy_id: 'no-such-proxy' } }), 404, 'not_found');
  await expectError(await patchAs(PROXIES_ONLY, { proxy_id: mine }), 403, 'forbidden');
  await expectError(await patchAs(P1, { proxy_id: mine }), 404, 'not_found');
  const theirs = await createProxy({ fetch: (p, i) => d.fetch(p, { ...i, headers: { authorization: `Bearer ${P1}` } }) }, custom(authed.tiny.port));
  assert.equal((await patchAs(P1, { proxy_id: theirs })).status, 200, 'a project key uses its own proxy');
  assert.equal((await patchBrowser(d, { proxy_id: '' })).status, 200);
});

test('a managed type without a gateway: PATCH is 422; found active at start, it fails closed (502, nothing direct)', async () => {
  const dc = await createProxy(d, { type: 'datacenter' });
  const err = await expectError(await d.fetch('/browsers/local', { method: 'PATCH', json: { proxy_id: dc } }), 422, 'unsupported_field');
  assert.match(String(err.message), /^proxy_id: .*BROWSERD_PROXY_PROVIDERS_FILE/);
  assert.equal((await patchBrowser(d, {})).json.proxy, null);
  // A store written by a daemon that had the gateway: the active proxy is a datacenter one.
  const stateDir = tempDir();
  writeFileSync(
    path.join(stateDir, 'proxies.json'),
    JSON.stringify({ version: 1, proxies: [{ id: 'dc-1', type: 'datacenter', protocol: 'http', config: { country: 'US' }, project: null, created_at: '2026-01-01T00:00:00.000Z' }], active: 'dc-1' }),
    { mode: 0o600 },
  );
  const dl = await startDaemon({ stateDir, env: { BROWSERD_TEST_HOOKS: 'resolve=site.test:127.0.0.1,forwarder-uid=0' } });
  try {
    await dl.waitLog((l) => l.event === 'proxy_active_unusable' && l.proxy_id === 'dc-1');
    const port = await forwarderPort(dl);
    const seen = origin.seen.length;
    const r = await viaProxy(port, `http://site.test:${origin.port}/via`);
    assert.equal(r.status, 502);
    assert.match(r.body, /proxy dc-1: proxy_unreachable: .*no gateway/);
    assert.equal((await viaTunnel(port, `site.test:${origin.port}`, '/via')).status, 502);
    assert.equal(origin.seen.length, seen, 'nothing went direct instead');
    assert.equal(((await viaProxy(port, `http://127.0.0.1:${origin.port}/via`)).status), 200, 'loopback targets still go direct');
    const status = (await patchBrowser(dl, {})).json.proxy as { id: string; last_error: { code: string } };
    assert.deepEqual([status.id, status.last_error.code], ['dc-1', 'proxy_unreachable']);
  } finally {
    await dl.cleanup();
    rmSync(stateDir, { recursive: true, force: true });
  }
});

function patchAs(token: string, body: unknown): Promise<Response> {
  return d.fetch('/browsers/local', { method: 'PATCH', json: body, headers: { authorization: `Bearer ${token}` } });
}

test('the daemon survived all of it', async () => {
  const res = await fetch(`${d.url}/healthz`);
  assert.equal(res.status, 200);
  assert.equal(d.pid, pid);
  assert.equal(d.proc.exitCode, null);
  assert.ok(!d.logs.some((l) => l.event === 'crash' || l.event === 'internal_error'), 'no crash, no internal error');
});
