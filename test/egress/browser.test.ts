// The egress policy against the real Chromium and a loopback "world" (127.0.0.2; names mapped there
// by the test build's resolve hook, which the forwarding proxy resolves with: Chromium sends every
// name to its proxy unresolved). Loopback is private: the world is reached only because the policy
// lists 127.0.0.2 in allow_private. The daemon runs in a mount namespace of its own where a folder
// of the test is bind-mounted over /etc/chromium: its Chromium reads the daemon's managed-policy
// file from the path it always reads, and no other Chromium of the machine sees it (no @serial).
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { chmodSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { CdpCallError } from '../../daemon/cdp/client.js';
import { expectError } from '../helpers/http.js';
import { browser, daemonCdp, waitBrowser, type CdpClient } from '../kit/browser.js';
import { tempDir } from '../kit/cleanup.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';
import { until } from '../kit/wait.js';

const POLICY = '/browsers/local/network/egress-policy';
let world: http.Server;
let wp: number;
let d: Daemon;
let cdp: CdpClient;
/** The folder the daemon's namespace sees as /etc/chromium. */
const etc = tempDir('browserd-egress-etc-');

before(async () => {
  world = http.createServer((req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(`<title>world</title><p>world ${req.headers.host ?? ''}</p>`));
  await new Promise<void>((resolve) => world.listen(0, '127.0.0.2', resolve));
  wp = (world.address() as AddressInfo).port;
  chmodSync(etc, 0o755); // Chromium runs as the agent user
  d = await startDaemon({
    autostart: true,
    // Its own mount namespace (unshare -m: mounts private), the test's folder as /etc/chromium.
    wrapper: ['unshare', '-m', 'sh', '-c', `mount --bind ${etc} /etc/chromium && exec "$@"`, 'sh'],
    env: {
      BROWSERD_TEST_HOOKS: 'resolve=allowed.test:127.0.0.2;other.test:127.0.0.2;private.test:127.0.0.3',
      BROWSERD_EGRESS_NFTABLES: 'false',
    },
  });
  await waitBrowser(d, (s) => s.state === 'ready');
  const res = await d.fetch(POLICY, { method: 'PUT', json: { filtered: true, allowed_hosts: ['allowed.test', 'private.test'], allow_private: ['127.0.0.2'] } });
  assert.equal(res.status, 200, await res.text());
  cdp = await daemonCdp(d);
});
after(async () => {
  cdp?.close();
  await d?.cleanup();
  await new Promise<void>((resolve) => world.close(() => resolve()));
});

/** A new tab at `url`: Page.navigate's errorText, and the page's text once it has some. */
async function open(url: string): Promise<{ error: string | undefined; text: () => Promise<string>; eval: (expr: string) => Promise<unknown>; close: () => Promise<void> }> {
  const { targetId } = await cdp.send('Target.createTarget', { url: 'about:blank' });
  const { sessionId } = await cdp.send('Target.attachToTarget', { targetId, flatten: true });
  const evaluate = async (expression: string): Promise<unknown> => (await cdp.send('Runtime.evaluate', { expression, awaitPromise: true, returnByValue: true }, { sessionId })).result.value;
  const { errorText } = await cdp.send('Page.navigate', { url }, { sessionId });
  return {
    error: errorText,
    eval: evaluate,
    text: () => until(`text in ${url}`, async () => ((await evaluate('document.body?.innerText ?? ""')) as string) || undefined),
    close: async () => void (await cdp.send('Target.closeTarget', { targetId }).catch(() => undefined)),
  };
}

test('an allowed host loads; a denied one shows the policy\'s 403 page (http) or fails its tunnel (https); a name resolving to a private address is refused', async () => {
  const ok = await open(`http://allowed.test:${wp}/`);
  assert.equal(ok.error, undefined);
  assert.match(await ok.text(), /world allowed\.test/);
  await ok.close();
  const denied = await open(`http://other.test:${wp}/`);
  assert.match(await denied.text(), /network_policy_denied \(not_allowed\): other\.test is not in allowed_hosts/);
  await denied.close();
  const tunnel = await open(`https://other.test:${wp}/`);
  assert.equal(tunnel.error, 'net::ERR_TUNNEL_CONNECTION_FAILED');
  await tunnel.close();
  const priv = await open(`http://private.test:${wp}/`);
  assert.match(await priv.text(), /network_policy_denied \(private_address\): private\.test \(127\.0\.0\.3\): 127\.0\.0\.3 is a private address \(loopback\)/);
  await priv.close();
  const loop = await open(`http://127.0.0.2:${wp}/`);
  assert.match(await loop.text(), /not_allowed/, 'an address not in allowed_hosts, though in allow_private');
  await loop.close();
});

test('/curl and /curl/raw obey the policy: allowed answers, denied is 422 fetch_failed network_policy_denied', async () => {
  const okRes = await d.fetch('/curl', { method: 'POST', json: { url: `http://allowed.test:${wp}/` } });
  assert.equal(okRes.status, 200, await okRes.clone().text());
  assert.match(JSON.stringify(await okRes.json()), /world allowed\.test/);
  const denied = await expectError(await d.fetch('/curl', { method: 'POST', json: { url: `http://other.test:${wp}/` } }), 422, 'fetch_failed');
  assert.equal((denied.inner_error as { code: string }).code, 'network_policy_denied');
  const raw = await expectError(await d.fetch(`/curl/raw?url=${encodeURIComponent(`http://private.test:${wp}/`)}`), 422, 'fetch_failed');
  assert.equal((raw.inner_error as { code: string }).code, 'network_policy_denied');
  assert.match(String(raw.message), /private_address/);
});

test('bypass attempts: a browser context with its own proxyServer is a CDP error; routing flags are 400 (not on the allowlist), DNS-over-HTTPS policies 422; WebRTC gathers no UDP candidate once the managed policy is read', async () => {
  await assert.rejects(cdp.send('Target.createBrowserContext', { proxyServer: 'direct://' }), (err: unknown) => err instanceof CdpCallError && /refused: the egress policy is filtered/.test(err.message));
  await assert.rejects(cdp.send('Target.createBrowserContext', { proxyBypassList: '*' }), CdpCallError);
  const { browserContextId } = await cdp.send('Target.createBrowserContext', {});
  await cdp.send('Target.disposeBrowserContext', { browserContextId });
  for (const flag of ['--host-resolver-rules=MAP * 127.0.0.2', '--host-rules=MAP * 127.0.0.2', '--proxy-server=direct://', '--no-proxy-server', '--proxy-pac-url=http://x/p.pac', '--proxy-bypass-list=*']) {
    const err = await expectError(await d.fetch('/browsers/local/chromium/flags', { method: 'PATCH', json: { flags: [flag] } }), 400, 'bad_request');
    assert.match(JSON.stringify(err), new RegExp(flag.split('=')[0] as string));
  }
  await expectError(await d.fetch('/browsers/local/chromium/policies', { method: 'PATCH', json: { policies: { DnsOverHttpsMode: 'secure', DnsOverHttpsTemplates: 'https://allowed.test/dns-query' } } }), 422, 'setting_refused');
  // WebRTC: its UDP goes around any HTTP proxy. Chromium 156 has no --force-webrtc-ip-handling-policy
  // switch any more: only the managed policy keeps it to proxied candidates. Chromium reads the file
  // the PUT wrote without a restart (its policy folder is watched): no candidate once it has.
  const file = JSON.parse(readFileSync(path.join(etc, 'policies', 'managed', 'browserd-egress.json'), 'utf8')) as Record<string, unknown>;
  assert.equal(file.WebRtcIPHandling, 'disable_non_proxied_udp');
  const page = await open(`http://allowed.test:${wp}/`);
  await page.text();
  const gather = `new Promise((resolve) => {
    const pc = new RTCPeerConnection();
    const seen = [];
    pc.onicecandidate = (e) => { if (e.candidate) seen.push(e.candidate.candidate); else { pc.close(); resolve(seen); } };
    pc.createDataChannel('x');
    pc.createOffer().then((o) => pc.setLocalDescription(o));
  })`;
  await until('no WebRTC candidate (the managed policy applied live)', async () => ((await page.eval(gather)) as string[]).length === 0, 90_000, 500);
  await page.close();
});

test('the policy survives a Chromium restart (the managed policy in force from the launch)', async () => {
  const pid = (await browser(d)).chromium.pid;
  const res = await d.fetch('/browsers/local/restart', { method: 'POST' });
  assert.equal(res.status, 200);
  assert.notEqual((await browser(d)).chromium.pid, pid);
  cdp.close();
  cdp = await daemonCdp(d);
  assert.equal((await d.call<{ filtered: boolean }>(POLICY)).filtered, true);
  const denied = await open(`http://other.test:${wp}/`);
  assert.match(await denied.text(), /network_policy_denied/);
  await denied.close();
  const page = await open(`http://allowed.test:${wp}/`);
  await page.text();
  // At launch the managed policy is there from the start.
  const candidates = await page.eval(`new Promise((resolve) => {
    const pc = new RTCPeerConnection();
    const seen = [];
    pc.onicecandidate = (e) => { if (e.candidate) seen.push(e.candidate.candidate); else resolve(seen); };
    pc.createDataChannel('x');
    pc.createOffer().then((o) => pc.setLocalDescription(o));
  })`);
  assert.deepEqual(candidates, []);
  await page.close();
});
