// Requests through the browser reuse one warm hidden tab (daemon/curl/tabs.ts, issue 43) and keep
// the isolation of a tab per request: consecutive requests go through the same tab, whose document
// is still the empty about:blank after each (nothing of a request commits in it); a request that ends badly (past
// timeout_ms, over the size limit, its answer never read) has its tab closed, and the next request
// gets a fresh one; a tab someone else closed is never used again; a tab Chromium opens after the
// request's deadline ended is closed (daemon/cdp/attach.ts).
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { expectError } from '../helpers/http.js';
import { daemonCdp, type CdpClient } from '../kit/browser.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';
import { until } from '../kit/wait.js';

const SMALL = JSON.stringify({ pad: 'x'.repeat(1010) });
/** BROWSERD_CURL_MAX_RESPONSE_BYTES of this daemon; /big is over it. */
const MAX_RESPONSE = 64 * 1024;

let d: Daemon;
let cdp: CdpClient;
let base: string;
const held: http.ServerResponse[] = [];
const origin = http.createServer((req, res) => {
  const path = (req.url ?? '').split('?')[0];
  if (path === '/small') res.writeHead(200, { 'content-type': 'application/json' }).end(SMALL);
  else if (path === '/big') res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(Buffer.alloc(MAX_RESPONSE * 2, 1));
  else if (path === '/hang') held.push(res);
  else res.writeHead(404).end();
});

before(async () => {
  await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
  d = await startDaemon({ autostart: true, env: { BROWSERD_CURL_MAX_RESPONSE_BYTES: String(MAX_RESPONSE) } });
  await until('/readyz says ready', async () => (await fetch(`${d.url}/readyz`)).status === 200, 60_000, 20);
  cdp = await daemonCdp(d);
  assert.equal((await targets('page')).length, 1, 'the launch tab alone');
  assert.equal((await curlTabs()).length, 0, 'no tab of /curl before its first request');
});
after(async () => {
  for (const res of held) res.destroy();
  cdp?.close();
  await d?.cleanup();
  await new Promise<void>((resolve) => origin.close(() => resolve()));
});

/** Chromium's targets of `type`, with their URL. */
async function targets(type: string): Promise<{ targetId: string; url: string }[]> {
  return (await cdp.send('Target.getTargets')).targetInfos.filter((t) => t.type === type).map((t) => ({ targetId: t.targetId, url: t.url }));
}

/** The tabs of /curl: hidden tabs are targets of type `other` (Chromium 156), not `page`. */
function curlTabs(): Promise<{ targetId: string; url: string }[]> {
  return targets('other');
}

async function small(): Promise<void> {
  const r = await d.call<{ status: number; body: string }>('/browsers/local/curl', { method: 'POST', json: { url: `${base}/small` } });
  assert.equal(r.status, 200);
  assert.equal(r.body, SMALL);
}

/** The document in a tab: its location and body, read over a session of the test's own. */
async function documentOf(targetId: string): Promise<string> {
  const { sessionId } = await cdp.send('Target.attachToTarget', { targetId, flatten: true });
  try {
    const r = await cdp.send('Runtime.evaluate', { expression: 'location.href + " " + document.body?.innerHTML', returnByValue: true }, { sessionId });
    return r.result.value as string;
  } finally {
    await cdp.send('Target.detachFromTarget', { sessionId });
  }
}

/**
 * Waits until exactly one /curl tab is open and it is idle, and returns it. A tab is handed back in the
 * background after the answer (once Chromium confirms nothing of the request committed), so "open"
 * is not "idle": a request sent before the hand-back opens a tab of its own (browserd_curl_tabs says which).
 */
async function warmTab(): Promise<{ targetId: string; url: string }> {
  let tabs: { targetId: string; url: string }[] = [];
  let counts = { inUse: -1, idle: -1 };
  await until(
    () => `one /curl tab, idle; open: ${JSON.stringify(tabs)}, browserd_curl_tabs: ${JSON.stringify(counts)}`,
    async () => {
      counts = { inUse: await d.metric('browserd_curl_tabs{state="in_use"}'), idle: await d.metric('browserd_curl_tabs{state="idle"}') };
      return counts.inUse === 0 && counts.idle === 1 && (tabs = await curlTabs()).length === 1;
    },
    30_000,
    20,
  );
  return tabs[0] as { targetId: string; url: string };
}

test('consecutive requests go through one warm tab, still on about:blank after each; it is no page of the computer controls', async () => {
  await small();
  const first = await warmTab();
  assert.equal(await documentOf(first.targetId), 'about:blank ');
  for (let i = 0; i < 3; i++) {
    await small();
    const tab = await warmTab();
    assert.equal(tab.targetId, first.targetId, 'the same tab');
    assert.equal(await documentOf(tab.targetId), 'about:blank ', 'nothing of the request committed in it');
  }
  assert.equal((await targets('page')).length, 1, 'the launch tab alone is a page');
});

test('a request that ends badly closes its tab; the next request gets a fresh one', async () => {
  const before = (await warmTab()).targetId;
  // Past timeout_ms: the request is still paused in its tab when the deadline ends.
  await expectError(await d.fetch('/browsers/local/curl', { method: 'POST', json: { url: `${base}/hang`, timeout_ms: 500 } }), 504, 'timeout');
  await until('the timed-out request\u2019s tab closed', async () => !(await curlTabs()).some((t) => t.targetId === before), 30_000, 20);
  await small();
  const fresh = await warmTab();
  assert.notEqual(fresh.targetId, before);
  // Over the size limit: the body is cut, the tab closed.
  await expectError(await d.fetch('/browsers/local/curl', { method: 'POST', json: { url: `${base}/big` } }), 413, 'payload_too_large');
  await until('the cut request\u2019s tab closed', async () => !(await curlTabs()).some((t) => t.targetId === fresh.targetId), 30_000, 20);
  await small();
  assert.equal(await documentOf((await warmTab()).targetId), 'about:blank ');
});

test('a warm tab closed by a CDP client is not used again', async () => {
  const tab = await warmTab();
  await cdp.send('Target.closeTarget', { targetId: tab.targetId });
  await until('the tab gone', async () => !(await curlTabs()).some((t) => t.targetId === tab.targetId), 30_000, 20);
  await small();
  const next = await warmTab();
  assert.notEqual(next.targetId, tab.targetId);
});

test('a tab Chromium opens after the request\u2019s deadline ended is closed, not left behind', async () => {
  // No idle tab: the request must open one, and timeout_ms 1 ends before Chromium can answer Target.createTarget.
  const tab = await warmTab();
  await cdp.send('Target.closeTarget', { targetId: tab.targetId });
  await until('the warm tab gone', async () => (await curlTabs()).length === 0 && (await d.metric('browserd_curl_tabs{state="in_use"}')) === 0, 30_000, 20);
  await expectError(await d.fetch('/browsers/local/curl', { method: 'POST', json: { url: `${base}/small`, timeout_ms: 1 } }), 504, 'timeout');
  // The tab Chromium made for it shows up in its targets, then goes; nothing else opens one meanwhile.
  let open: { targetId: string; url: string }[] = [];
  await until(() => `no /curl tab left; open: ${JSON.stringify(open)}`, async () => (open = await curlTabs()).length === 0 && (await d.metric('browserd_curl_tabs{state="in_use"}')) === 0, 30_000, 20);
  await small();
  await warmTab();
});
