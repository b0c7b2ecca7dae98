// @long: one of the slowest files (10 s or more alone), started first by test/run.mjs.
// Real CDP clients through the daemon's endpoint, unchanged: puppeteer-core connects by browserURL
// (its /json/version discovery) and playwright-core by connectOverCDP('http://…'), both with the
// bearer token as a header, at the same time; each client is isolated from the other (its own
// discovery and auto-attach); per-target URLs of /json/list work; Browser.close from a client
// restarts Chromium afresh ten times in a row without ever counting as a crash.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import puppeteer from 'puppeteer-core';
import { chromium } from 'playwright-core';
import { cdpConnect, daemonCdp, waitBrowser } from '../kit/browser.js';
import { TEST_TOKEN, startDaemon, type Daemon } from '../kit/daemon.js';
import { until } from '../kit/wait.js';
import { htmlPage, startOrigin, type Origin } from '../kit/origin.js';

let d: Daemon;
let origin: Origin;
let page: string;
const headers = { authorization: `Bearer ${TEST_TOKEN}` };

before(async () => {
  d = await startDaemon({ autostart: true });
  origin = await startOrigin(htmlPage((req) => `<title>page ${req.url}</title><p id="p">hello</p>`));
  page = origin.url;
  await waitBrowser(d, (s) => s.state === 'ready', 'ready');
});
after(async () => {
  await d.cleanup();
  await origin.close();
});

const browserURL = (): string => `${d.url}/browsers/local/cdp`;

test('puppeteer (browserURL) and playwright (connectOverCDP over http) at the same time', async () => {
  const [pp, pw] = await Promise.all([puppeteer.connect({ browserURL: browserURL(), headers }), chromium.connectOverCDP(browserURL(), { headers })]);
  try {
    const p1 = await pp.newPage();
    await p1.goto(`${page}/one`);
    assert.equal(await p1.title(), 'page /one');
    assert.equal(await p1.$eval('#p', (e) => e.textContent), 'hello');
    const shot = await p1.screenshot();
    assert.equal(Buffer.from(shot).subarray(1, 4).toString(), 'PNG');

    const p2 = await pw.contexts()[0]!.newPage();
    await p2.goto(`${page}/two`);
    assert.equal(await p2.title(), 'page /two');
    assert.equal(await p2.locator('#p').textContent(), 'hello');
    assert.match(pp.wsEndpoint(), /\/browsers\/local\/cdp$/);
    await p1.close();
    await p2.close();
  } finally {
    await pw.close();
    await pp.disconnect();
  }
  assert.equal(((await (await d.fetch('/browsers/local')).json()) as { chromium: { restarts: number } }).chromium.restarts, 0, 'disconnecting closes no browser');
});

test("each client's discovery and auto-attach are its own: events never leak to another client", async () => {
  const [a, b] = await Promise.all([daemonCdp(d), daemonCdp(d)]);
  try {
    const seen = { a: [] as string[], b: [] as string[] };
    a.on('Target.targetCreated', (p) => seen.a.push(`created ${p.targetInfo.url}`));
    a.on('Target.attachedToTarget', (p) => seen.a.push(`attached ${p.targetInfo.url}`));
    b.on('Target.targetCreated', (p) => seen.b.push(`created ${p.targetInfo.url}`));
    b.on('Target.attachedToTarget', (p) => seen.b.push(`attached ${p.targetInfo.url}`));
    await a.send('Target.setDiscoverTargets', { discover: true });
    await a.send('Target.setAutoAttach', { autoAttach: true, waitForDebuggerOnStart: false, flatten: true });
    const { targetId } = await b.send('Target.createTarget', { url: `${page}/made-by-b` });
    // A discovers and auto-attaches the page B made; B, which asked for neither, hears of neither.
    await until(() => `A to see the page created and attached; A saw: ${seen.a.join(', ')}`, () => seen.a.some((x) => x.startsWith('created')) && seen.a.some((x) => x.startsWith('attached')), 10_000);
    assert.deepEqual(seen.b, []);
    // A session A attached is A's alone: B naming it is refused.
    const { sessionId } = await a.send('Target.attachToTarget', { targetId, flatten: true });
    assert.equal((await a.send('Runtime.evaluate', { expression: '6*7', returnByValue: true }, { sessionId })).result.value, 42);
    await assert.rejects(b.send('Runtime.evaluate', { expression: '1' }, { sessionId }), /Session with given id not found/);
    await b.send('Target.closeTarget', { targetId });
  } finally {
    a.close();
    b.close();
  }
});

test('/json/list gives per-target URLs under the daemon; a client of one target talks to it without a sessionId', async () => {
  const made = await daemonCdp(d);
  const { targetId } = await made.send('Target.createTarget', { url: `${page}/listed` });
  try {
    const entry = await until('the target listed at its URL', async () => {
      const list = (await (await d.fetch('/browsers/local/cdp/json/list')).json()) as { id: string; url: string; webSocketDebuggerUrl: string }[];
      return list.find((t) => t.id === targetId && t.url === `${page}/listed`);
    });
    assert.equal(entry.webSocketDebuggerUrl, `${browserURL().replace(/^http/, 'ws')}/devtools/page/${targetId}`);
    const one = await cdpConnect(entry.webSocketDebuggerUrl, TEST_TOKEN);
    // The list may show the URL while the navigation is still under way: the first document is then
    // the initial about:blank (complete, no title), and an evaluation in it may meet its end.
    const loaded = "location.pathname === '/listed' && document.readyState === 'complete' ? document.title : ''";
    const title = await until('the listed page loaded in the target', async () => {
      const r = await one.send('Runtime.evaluate', { expression: loaded, returnByValue: true }).catch(() => undefined);
      return typeof r?.result.value === 'string' && r.result.value !== '' ? (r.result.value as string) : undefined;
    });
    assert.equal(title, 'page /listed');
    one.close();
    const protocol = (await (await d.fetch('/browsers/local/cdp/json/protocol')).json()) as { domains: { domain: string }[] };
    assert.ok(protocol.domains.some((x) => x.domain === 'Target') && protocol.domains.some((x) => x.domain === 'Runtime'));
  } finally {
    await made.send('Target.closeTarget', { targetId }).catch(() => undefined);
    made.close();
  }
});

test("puppeteer's browser.close() ×10: each restarts Chromium afresh, never counted as a crash", { timeout: 120_000 }, async () => {
  const first = await waitBrowser(d, (s) => s.state === 'ready', 'ready');
  let pid = first.chromium.pid;
  for (let i = 0; i < 10; i++) {
    const b = await puppeteer.connect({ browserURL: browserURL(), headers });
    await b.close();
    const s = await waitBrowser(d, (x) => x.state === 'ready' && x.chromium.pid !== pid, `a new Chromium after close #${i + 1}`);
    pid = s.chromium.pid;
  }
  const s = await waitBrowser(d, (x) => x.state === 'ready', 'ready');
  assert.equal(s.reason, null);
  assert.equal(s.chromium.last_exit?.reason, 'restart: client_close');
  const metrics = await (await d.fetch('/metrics')).text();
  assert.ok(Number(/browserd_chromium_restarts_total\{reason="client_close"\} (\d+)/.exec(metrics)?.[1]) >= 10, metrics);
  assert.doesNotMatch(metrics, /browserd_chromium_restarts_total\{reason="crash"\}/);
});
