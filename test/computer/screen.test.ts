// @long: one of the slowest files (10 s or more alone), started first by test/run.mjs.
// Computer controls, the screen and the browser around the input: screenshots of a page of known
// colours (decoded, pixel for pixel), the clipboard round trip with the page's own shortcuts, which
// page gets the input as tabs and windows come and go, no page (409), a restarting browser (503).
import assert from 'node:assert/strict';
import { chmodSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type Kernel from '@onkernel/sdk';
import { curl, openTab, post, sdk, startPageServer, type PageServer, type Rec, type Tab } from '../helpers/computer.js';
import { expectError } from '../helpers/http.js';
import { decodePng, hexAt, type Image } from '../helpers/png.js';
import { daemonCdp, waitBrowser, type CdpClient } from '../kit/browser.js';
import { agentTempDir } from '../kit/agent.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';

import { until } from '../kit/wait.js';
let d: Daemon;
let server: PageServer;
let cdp: CdpClient;
let k: Kernel;
/** BROWSERD_COMPUTER_TIMEOUT_MS of this file's daemon (short: one test waits it out). */
const TIMEOUT_MS = 3000;
/** While this file exists, the Chromium wrapper sleeps before starting Chromium (a slow restart). */
let slowFlag: string;

before(async () => {
  server = await startPageServer();
  const dir = agentTempDir('browserd-wrapper-'); // Chromium (the agent user) runs the wrapper from there
  slowFlag = path.join(dir, 'slow');
  const wrapper = path.join(dir, 'chromium');
  writeFileSync(wrapper, `#!/bin/sh\n[ -e '${slowFlag}' ] && sleep 3\nexec /usr/lib/chromium/chromium "$@"\n`);
  chmodSync(wrapper, 0o755);
  d = await startDaemon({ autostart: true, env: { BROWSERD_CHROMIUM: wrapper, BROWSERD_COMPUTER_TIMEOUT_MS: String(TIMEOUT_MS) } });
  await waitBrowser(d, (s) => s.state === 'ready', 'ready');
  cdp = await daemonCdp(d);
  k = sdk(d);
});
after(async () => {
  cdp?.close();
  await d?.cleanup();
  await server?.close();
});

/** Closes every page target and waits until Chromium lists none (closeTarget answers before the tab is gone). */
async function closeAllPages(): Promise<void> {
  const pages = async (): Promise<string[]> => (await cdp.send('Target.getTargets')).targetInfos.filter((i) => i.type === 'page').map((i) => i.targetId);
  for (const targetId of await pages()) await cdp.send('Target.closeTarget', { targetId }).catch(() => undefined); // one closing already is gone soon
  let open: string[] = [];
  await until(() => `every page closed; left open: ${open.join()}`, async () => (open = await pages()).length === 0, 30_000, 20);
}

async function shot(body?: unknown): Promise<Image> {
  const res = await post(d, 'screenshot', body);
  assert.equal(res.status, 200, res.status === 200 ? '' : await res.text());
  assert.equal(res.headers.get('content-type'), 'image/png');
  return decodePng(Buffer.from(await res.arrayBuffer()));
}

function quadrantsAt(img: Image, ox: number, oy: number): void {
  assert.equal(hexAt(img, ox + 0, oy + 0), '#ff0000');
  assert.equal(hexAt(img, ox + 199, oy + 149), '#ff0000');
  assert.equal(hexAt(img, ox + 200, oy + 149), '#00ff00');
  assert.equal(hexAt(img, ox + 399, oy + 0), '#00ff00');
  assert.equal(hexAt(img, ox + 199, oy + 150), '#0000ff');
  assert.equal(hexAt(img, ox + 0, oy + 299), '#0000ff');
  assert.equal(hexAt(img, ox + 200, oy + 150), '#ffff00');
  assert.equal(hexAt(img, ox + 399, oy + 299), '#ffff00');
}

test('screenshot: a PNG of the viewport, one pixel per CSS pixel, the known colours at their pixels (SDK); a region (plain HTTP)', async () => {
  const tab = await openTab(cdp, `${server.origin}/quadrants`);
  const [w, h] = await tab.eval<[number, number]>('[innerWidth, innerHeight]');
  const res = await k.browsers.computer.captureScreenshot('local');
  assert.equal(res.headers.get('content-type'), 'image/png');
  const img = decodePng(Buffer.from(await res.arrayBuffer()));
  assert.deepEqual([img.width, img.height], [w, h]);
  quadrantsAt(img, 0, 0);
  assert.equal(hexAt(img, 400, 300), '#ffffff');
  assert.equal(hexAt(img, w - 1, h - 1), '#ffffff');

  const viaCurl = await curl(d, 'screenshot', { region: { x: 190, y: 140, width: 20, height: 20 } });
  assert.deepEqual([viaCurl.status, viaCurl.type], [200, 'image/png']);
  const region = decodePng(viaCurl.body);
  assert.deepEqual([region.width, region.height], [20, 20]);
  assert.deepEqual([hexAt(region, 9, 9), hexAt(region, 10, 9), hexAt(region, 9, 10), hexAt(region, 10, 10)], ['#ff0000', '#00ff00', '#0000ff', '#ffff00']);
  const whole = await curl(d, 'screenshot');
  assert.deepEqual([decodePng(whole.body).width, decodePng(whole.body).height], [w, h]);

  const outside = await expectError(await post(d, 'screenshot', { region: { x: w - 10, y: 0, width: 20, height: 10 } }), 400, 'bad_request');
  assert.match(String(outside.message), new RegExp(`^region\\.width: x \\+ width = ${w + 10} reaches past the viewport's width ${w}`));
  await expectError(await post(d, 'screenshot', { region: { x: 0, y: 0, width: 0, height: 10 } }), 400, 'bad_request');
  await tab.close();
});

test('screenshot at device scale factor 2 and scrolled: still CSS pixels, of what is on screen', async () => {
  const tab = await openTab(cdp, `${server.origin}/quadrants`);
  await cdp.send('Emulation.setDeviceMetricsOverride', { width: 600, height: 400, deviceScaleFactor: 2, mobile: false }, { sessionId: tab.sessionId });
  await tab.eval('document.body.style.height = "3000px"; scrollTo(0, 500)');
  assert.deepEqual(await tab.eval('[innerWidth, innerHeight, devicePixelRatio, scrollY]'), [600, 400, 2, 500]);
  const img = await shot();
  assert.deepEqual([img.width, img.height], [600, 400]);
  quadrantsAt(img, 0, 0); // fixed blocks: on screen wherever the document is scrolled
  const region = await shot({ region: { x: 190, y: 140, width: 20, height: 20 } });
  assert.deepEqual([region.width, region.height], [20, 20]);
  assert.deepEqual([hexAt(region, 9, 9), hexAt(region, 10, 10)], ['#ff0000', '#ffff00']);
  await tab.close();
});

test('clipboard: written through the API and pasted with ctrl+v; copied with ctrl+c and read through the API; the permission is set back', async () => {
  const tab = await openTab(cdp, `${server.origin}/recorder`, { ready: 'window.__events' });
  const text = 'clip ✓ 你好 😀\nline 2';
  await k.browsers.computer.writeClipboard('local', { text });
  await k.browsers.computer.clickMouse('local', { x: 500, y: 50 });
  await k.browsers.computer.pressKey('local', { keys: ['ctrl+v'] });
  assert.equal(await tab.eval('document.getElementById("ta").value'), text);
  const pasted = (await tab.events()).filter((e) => e.type === 'paste' || e.type === 'input');
  assert.deepEqual(pasted.map((e) => e.type), ['paste', 'input']);
  assert.equal(pasted[1]?.inputType, 'insertFromPaste');

  await tab.eval('document.getElementById("ta").value = "copied by ctrl+c ✂"');
  await k.browsers.computer.pressKey('local', { keys: ['ctrl+a', 'ctrl+c'] });
  const res = await post(d, 'clipboard/read');
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { text: 'copied by ctrl+c ✂' });
  assert.deepEqual(await k.browsers.computer.readClipboard('local'), { text: 'copied by ctrl+c ✂' });
  const read = await curl(d, 'clipboard/read');
  assert.deepEqual([read.status, JSON.parse(read.body.toString())], [200, { text: 'copied by ctrl+c ✂' }]);
  const written = await curl(d, 'clipboard/write', { text: '' });
  assert.deepEqual([written.status, written.body.length], [204, 0]);
  assert.deepEqual(await k.browsers.computer.readClipboard('local'), { text: '' });

  // The page holds no clipboard permission afterwards and cannot read it by itself.
  assert.deepEqual(
    await tab.eval('Promise.all(["clipboard-read", "clipboard-write"].map((name) => navigator.permissions.query({ name }).then((s) => s.state)))'),
    ['prompt', 'granted'],
    'as before the calls: no read-write permission (Chromium grants the sanitized write by default)',
  );
  // about:blank has no clipboard (not a secure context).
  await tab.navigate('about:blank');
  const refused = await expectError(await post(d, 'clipboard/read'), 409, 'clipboard_unavailable');
  assert.match(String(refused.message), /opaque origin/);
  await expectError(await post(d, 'clipboard/write', { text: 'x' }), 409, 'clipboard_unavailable');
  await tab.close();
});

test('the input goes to the tab a person would see: the last one shown (new tab, Page.bringToFront, Target.activateTarget, a new window); the pointer stays where it was', async () => {
  // Only this test's tabs: the tab Chromium shows when the current one closes is then one of them.
  await closeAllPages();
  const a = await openTab(cdp, `${server.origin}/recorder`, { ready: 'window.__events' });
  const b = await openTab(cdp, `${server.origin}/recorder`, { ready: 'window.__events' });
  const clicks = async (t: Tab): Promise<number> => (await t.events()).filter((e) => e.type === 'click').length;
  const clickAndCount = async (tabs: Tab[]): Promise<number[]> => {
    await k.browsers.computer.clickMouse('local', { x: 123, y: 45 });
    return Promise.all(tabs.map(clicks));
  };
  assert.deepEqual(await clickAndCount([a, b]), [0, 1], 'the newest foreground tab');
  await cdp.send('Page.bringToFront', {}, { sessionId: a.sessionId });
  assert.deepEqual(await k.browsers.computer.getMousePosition('local'), { x: 123, y: 45 }, 'the pointer stays across tab switches');
  assert.deepEqual(await clickAndCount([a, b]), [1, 0], 'brought to front');
  const c = await openTab(cdp, `${server.origin}/recorder`, { background: true, ready: 'window.__events' });
  assert.deepEqual(await clickAndCount([a, b, c]), [1, 0, 0], 'a background tab does not take the input');
  await cdp.send('Target.activateTarget', { targetId: c.targetId });
  assert.deepEqual(await clickAndCount([a, b, c]), [0, 0, 1], 'activated');
  const w = await openTab(cdp, `${server.origin}/recorder`, { newWindow: true, ready: 'window.__events' });
  assert.deepEqual(await clickAndCount([a, b, c, w]), [0, 0, 0, 1], 'a new window');
  await w.close();
  await c.close();
  // With the window and the active tab gone, the tab Chromium shows now (a or b, its choice; it
  // switches after closeTarget has answered) is the one that gets the input.
  const shown = await until('a or b visible', async () => {
    const states = await Promise.all([a, b].map((t) => t.eval<string>('document.visibilityState')));
    return states.includes('visible') ? states : undefined;
  }, 10_000, 20);
  assert.equal(shown.filter((s) => s === 'visible').length, 1, shown.join());
  assert.deepEqual(await clickAndCount([a, b]), shown.map((s) => (s === 'visible' ? 1 : 0)));
  await cdp.send('Page.bringToFront', {}, { sessionId: b.sessionId });
  assert.deepEqual(await clickAndCount([a, b]), [0, 1]);
  await a.close();
  await b.close();
});

/** browserd_computer_page_lookups_total{how} of the daemon's /metrics. */
async function lookups(how: 'probed' | 'kept'): Promise<number> {
  const text = await (await d.fetch('/metrics')).text();
  const m = new RegExp(`^browserd_computer_page_lookups_total\\{how="${how}"\\} (\\d+)$`, 'm').exec(text);
  return m === null ? 0 : Number(m[1]);
}

test('the current page is kept between actions while nothing changes; a click that opened a tab, and another client\u2019s command, make the next action look again (and find the right tab)', async () => {
  await closeAllPages();
  const a = await openTab(cdp, `${server.origin}/recorder`, { ready: 'window.__events' });
  await a.eval(`document.getElementById('pad').addEventListener('click', () => window.open(location.href, 'second'), { once: true }), true`);
  const clicks = async (t: Tab): Promise<number[]> => (await t.events()).filter((e) => e.type === 'click').map((e) => e.x as number);
  await k.browsers.computer.clickMouse('local', { x: 5, y: 5 }); // opens the second tab, which is then shown
  const bId = await until('the second tab shows', async () => {
    const { targetInfos } = await cdp.send('Target.getTargets');
    const t = targetInfos.find((i) => i.type === 'page' && i.targetId !== a.targetId);
    if (t === undefined) return undefined;
    const { sessionId } = await cdp.send('Target.attachToTarget', { targetId: t.targetId, flatten: true });
    const r = await cdp.send('Runtime.evaluate', { expression: 'document.readyState === "complete" && !!window.__events && document.visibilityState', returnByValue: true }, { sessionId });
    await cdp.send('Target.detachFromTarget', { sessionId });
    return r.result.value === 'visible' ? t.targetId : undefined;
  }, 10_000, 20);
  const { sessionId: bSession } = await cdp.send('Target.attachToTarget', { targetId: bId, flatten: true });
  const b: Tab = {
    ...a,
    targetId: bId,
    sessionId: bSession,
    events: async () => JSON.parse((await cdp.send('Runtime.evaluate', { expression: 'JSON.stringify(window.__events.splice(0))', returnByValue: true }, { sessionId: bSession })).result.value as string) as Rec[],
  };
  await k.browsers.computer.clickMouse('local', { x: 6, y: 6 });
  assert.deepEqual([await clicks(a), await clicks(b)], [[5], [6]], 'the click that opened a tab went to the first; the next to the tab it opened');

  // Nothing else happens now: after at most a round or two (the first one sees the pages' documents
  // reported as Runtime is enabled), the page of the last round is kept.
  const kept0 = await lookups('kept');
  let sent = 0;
  await until('a lookup kept', async () => {
    await k.browsers.computer.clickMouse('local', { x: 7, y: 7 });
    sent++;
    return (await lookups('kept')) > kept0;
  }, 30_000, 0);
  const [probed1, kept1] = [await lookups('probed'), await lookups('kept')];
  await k.browsers.computer.clickMouse('local', { x: 8, y: 8 });
  assert.deepEqual([await lookups('probed'), await lookups('kept')], [probed1, kept1 + 1], 'kept: no page asked');
  assert.deepEqual(await clicks(b), [...Array<number>(sent).fill(7), 8]);

  // Another client's command (reading the events above was one too): the pages are asked again.
  await cdp.send('Page.bringToFront', {}, { sessionId: a.sessionId });
  const probed2 = await lookups('probed');
  await k.browsers.computer.clickMouse('local', { x: 9, y: 9 });
  assert.equal(await lookups('probed'), probed2 + 1, 'probed after another client\u2019s command');
  assert.deepEqual([await clicks(a), await clicks(b)], [[9], []], 'the tab brought to the front');
  await a.close();
  await cdp.send('Target.closeTarget', { targetId: bId });
});

test('a hung tab in the background does not stop the input to the current one; a hung current tab is 504 at the deadline, and the next tab works', async () => {
  const tab = await openTab(cdp, `${server.origin}/recorder`, { ready: 'window.__events' });
  const { targetId } = await cdp.send('Target.createTarget', { url: 'data:text/html,<script>for (;;) {}</script>', background: true });
  try {
    for (let i = 0; i < 3; i++) await k.browsers.computer.clickMouse('local', { x: 20 + i, y: 20 });
    assert.deepEqual((await tab.events()).filter((e) => e.type === 'click').map((e) => e.x), [20, 21, 22]);
    await tab.eval('setTimeout(() => { for (;;) {} }, 0), true');
    const res = await post(d, 'click_mouse', { x: 30, y: 30, hold_keys: ['shift'] });
    const body = await expectError(res, 504, 'timeout');
    assert.match(String(body.message), new RegExp(`deadline of ${TIMEOUT_MS} ms`));
  } finally {
    await cdp.send('Target.closeTarget', { targetId });
    await cdp.send('Target.closeTarget', { targetId: tab.targetId });
  }
  const next = await openTab(cdp, `${server.origin}/recorder`, { ready: 'window.__events' });
  await k.browsers.computer.clickMouse('local', { x: 40, y: 40 });
  assert.deepEqual((await next.events()).filter((e) => e.type === 'click').map((e) => e.x), [40]);
  await next.close();
});

test('no page open: 409 no_page for the actions and the screenshot (SDK and plain HTTP); the mouse position still answers', async () => {
  await closeAllPages();
  await expectError(await post(d, 'click_mouse', { x: 1, y: 1 }), 409, 'no_page');
  await expectError(await post(d, 'screenshot'), 409, 'no_page');
  await assert.rejects(k.browsers.computer.typeText('local', { text: 'x' }), (err: { status?: number; error?: { code?: string } }) => {
    assert.equal(err.status, 409);
    assert.equal(err.error?.code, 'no_page');
    return true;
  });
  assert.equal((await post(d, 'get_mouse_position')).status, 200);
  const tab = await openTab(cdp, `${server.origin}/quadrants`);
  assert.equal((await shot()).width, await tab.eval<number>('innerWidth'));
});

test('a restarting browser: 503 browser_unavailable at once, with Retry-After; acts again once ready', async () => {
  writeFileSync(slowFlag, '');
  const restart = d.fetch('/browsers/local/restart', { method: 'POST' });
  try {
    await waitBrowser(d, (s) => s.state === 'restarting', 'restarting');
    const res = await post(d, 'click_mouse', { x: 1, y: 1 });
    await expectError(res, 503, 'browser_unavailable');
    assert.equal((await curl(d, 'type', { text: 'x' })).status, 503);
    assert.equal(res.headers.get('x-should-retry'), 'true');
    assert.ok(Number(res.headers.get('retry-after')) >= 1, 'Retry-After');
    await expectError(await post(d, 'screenshot'), 503, 'browser_unavailable');
  } finally {
    rmSync(slowFlag, { force: true });
    assert.equal((await restart).status, 200);
  }
  cdp.close();
  cdp = await daemonCdp(d);
  const tab = await openTab(cdp, `${server.origin}/recorder`, { ready: 'window.__events' });
  assert.deepEqual(await k.browsers.computer.getMousePosition('local'), { x: 0, y: 0 }, 'a new Chromium, a new pointer');
  await k.browsers.computer.clickMouse('local', { x: 10, y: 10 });
  assert.equal((await tab.events()).filter((e) => e.type === 'click').length, 1);
});
