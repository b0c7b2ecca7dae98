// The CDP endpoint through the real daemon and the real Chromium: Browser.getVersion over the
// proxy, 401/403/404/400/503 in the error shape, the same URL across a restart and a crash (old
// sockets closed with 1012), the message size bound in both directions (1009), 1001 at shutdown.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { expectError } from '../helpers/http.js';
import { upgradeRefusal } from '../helpers/chromium.js';
import { cdpSocket, waitBrowser } from '../kit/browser.js';
import { keysFile, startDaemon, type Daemon } from '../kit/daemon.js';

const FULL = 'cdp-full-token-0123456789abcdef';
const READER = 'cdp-reader-token-0123456789abcdef';
const MAX_MESSAGE = 65_536;
let d: Daemon;
let idle: Daemon;
let cdpUrl: string;

before(async () => {
  const keys = keysFile([
    { id: 'full', token: FULL, scopes: ['browser:read', 'browser:write', 'cdp'] },
    { id: 'reader', token: READER, scopes: ['browser:read'] },
  ]);
  [d, idle] = await Promise.all([
    startDaemon({ autostart: true, token: FULL, env: { BROWSERD_KEYS_FILE: keys, BROWSERD_CDP_MAX_MESSAGE_BYTES: String(MAX_MESSAGE) } }),
    startDaemon(),
  ]);
  const s = await waitBrowser(d, (x) => x.state === 'ready', 'ready');
  cdpUrl = s.cdp_url;
});
after(() => Promise.all([d.cleanup(), idle.cleanup()]));

test('Browser.getVersion through the proxy, with the bearer token', async () => {
  const s = await waitBrowser(d, (x) => x.state === 'ready', 'ready');
  const c = await cdpSocket(cdpUrl, FULL);
  const v = await c.cdp.send('Browser.getVersion');
  assert.equal(v.product, s.chromium.version);
  assert.equal(v.protocolVersion, '1.3');
  c.cdp.close();
  assert.equal((await c.closed).code, 1005);
});

test('refused upgrades answer in the error shape: 401 without a token, 403 without the cdp scope, 404 for another session', async () => {
  const none = await upgradeRefusal(cdpUrl, {});
  assert.equal(none.status, 401);
  assert.equal(none.body.code, 'unauthorized');
  const reader = await upgradeRefusal(cdpUrl, { authorization: `Bearer ${READER}` });
  assert.equal(reader.status, 403);
  assert.deepEqual(reader.body.details, [{ code: 'missing_scope', message: 'cdp' }]);
  const other = await upgradeRefusal(cdpUrl.replace('/browsers/local/', '/browsers/other/'), { authorization: `Bearer ${FULL}` });
  assert.equal(other.status, 404);
  assert.equal(other.body.code, 'not_found');
});

test('a plain GET (no upgrade) is 400 invalid_request', async () => {
  await expectError(await d.fetch('/browsers/local/cdp'), 400, 'invalid_request');
});

test('a browser that is not started: 503 browser_unavailable at once', async () => {
  const s = await (await idle.fetch('/browsers/local')).json() as { state: string; cdp_url: string };
  assert.equal(s.state, 'stopped');
  const r = await upgradeRefusal(s.cdp_url, { authorization: `Bearer ${idle.token}` });
  assert.equal(r.status, 503);
  assert.equal(r.body.code, 'browser_unavailable');
  assert.match(String(r.body.message), /not started/);
});

test('POST /restart closes live sockets with 1012; a client connecting during the restart waits and gets the new browser on the same URL', async () => {
  const before = await waitBrowser(d, (x) => x.state === 'ready', 'ready');
  const old = await cdpSocket(cdpUrl, FULL);
  await old.cdp.send('Browser.getVersion');
  const logStart = d.logs.length;
  const since = (pred: (l: Record<string, unknown>) => boolean): number => d.logs.findIndex((l, i) => i >= logStart && pred(l));
  const restart = d.fetch('/browsers/local/restart', { method: 'POST' });
  assert.equal((await old.closed).code, 1012);
  // The old Chromium is gone from the proxy: from here until the new one is ready, the browser is restarting.
  const during = cdpSocket(cdpUrl, FULL);
  const res = await restart;
  assert.equal(res.status, 200);
  const after = (await res.json()) as { chromium: { pid: number } };
  assert.notEqual(after.chromium.pid, before.chromium.pid);
  const c = await during;
  assert.match((await c.cdp.send('Browser.getVersion')).product, /Chrome\//);
  // It arrived while the browser was restarting (it had to wait), and is connected to the new Chromium.
  const waited = since((l) => l.event === 'cdp_wait');
  const newReady = since((l) => l.event === 'chromium_ready' && l.chromium_pid === after.chromium.pid);
  const connected = since((l) => l.event === 'cdp_connected' && l.chromium_pid === after.chromium.pid);
  assert.ok(waited >= 0, 'the client waited for the restart');
  assert.ok(waited < newReady && newReady < connected, `waited at ${waited}, new Chromium ready at ${newReady}, connected at ${connected}`);
  assert.equal(d.logs.filter((l, i) => i >= logStart && l.event === 'cdp_connected').length, 1, 'one connection: this one, to the new pid');
  c.cdp.close();
  await c.closed;
});

test('a crash closes live sockets with 1012; a client connecting meanwhile waits for the restart', async () => {
  const s = await waitBrowser(d, (x) => x.state === 'ready', 'ready');
  const old = await cdpSocket(cdpUrl, FULL);
  process.kill(s.chromium.pid as number, 'SIGKILL');
  assert.equal((await old.closed).code, 1012);
  const next = await cdpSocket(cdpUrl, FULL); // connects while restarting, answered once ready
  assert.match((await next.cdp.send('Browser.getVersion')).product, /Chrome\//);
  const now = await waitBrowser(d, (x) => x.state === 'ready', 'ready');
  assert.notEqual(now.chromium.pid, s.chromium.pid);
  next.cdp.close();
});

test('messages are bounded both ways: a client message or a Chromium answer over the limit closes with 1009', async () => {
  const c = await cdpSocket(cdpUrl, FULL);
  const { targetId } = await c.cdp.send('Target.createTarget', { url: 'about:blank' });
  const { sessionId } = await c.cdp.send('Target.attachToTarget', { targetId, flatten: true });
  const small = await c.cdp.send('Runtime.evaluate', { expression: `'x'.repeat(${MAX_MESSAGE / 2})`, returnByValue: true }, { sessionId });
  assert.equal(small.result.value.length, MAX_MESSAGE / 2, 'below the limit passes');
  void c.cdp.send('Runtime.evaluate', { expression: `'x'.repeat(${MAX_MESSAGE * 2})`, returnByValue: true }, { sessionId }).catch(() => {});
  const fromChromium = await c.closed;
  assert.equal(fromChromium.code, 1009);
  assert.match(fromChromium.reason, /from Chromium \(\d+ bytes\) is over 65536 bytes/);

  const c2 = await cdpSocket(cdpUrl, FULL);
  c2.ws.send(JSON.stringify({ id: 1, method: 'Browser.getVersion', params: { pad: 'y'.repeat(MAX_MESSAGE) } }));
  assert.equal((await c2.closed).code, 1009);
  const c3 = await cdpSocket(cdpUrl, FULL);
  await c3.cdp.send('Target.closeTarget', { targetId });
  c3.cdp.close();
});

test('daemon shutdown closes live sockets with 1001 and exits 0', async () => {
  const c = await cdpSocket(cdpUrl, FULL);
  await c.cdp.send('Browser.getVersion');
  const exit = d.stop();
  assert.equal((await c.closed).code, 1001);
  assert.equal((await exit).code, 0);
});
