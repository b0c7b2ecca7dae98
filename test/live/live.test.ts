// The live view in a real browser: a second Chromium (playwright-core, every host but the daemon's
// blocked) opens GET /browsers/{id}/live with the token in its query and sees the daemon's
// Chromium on its canvas (pixels of a coloured block); clicks and typing on the canvas reach the
// remote page; two viewers see the same change; read-only and view-only viewers' input is ignored;
// a wrong token shows an HTML error page.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import WebSocket from 'ws';
import { openTab, type Tab } from '../helpers/computer.js';
import { daemonCdp, waitBrowser, type CdpClient } from '../kit/browser.js';
import { keysFile, startDaemon, TEST_TOKEN, type Daemon } from '../kit/daemon.js';
import { until, within } from '../kit/wait.js';
import { htmlPage, startOrigin, type Origin } from '../kit/origin.js';

const VIEW_TOKEN = 'live-view-only-token-0123456789';

// A green block at (0,0)–(200,150), a button at (300,20)–(420,80) that counts clicks, an input at (300,120)–(500,150).
const PAGE = `<!doctype html><html><head><meta charset="utf-8"><title>remote</title><style>
html, body { margin: 0; background: #ffffff }
#block { position: fixed; left: 0; top: 0; width: 200px; height: 150px; background: #00c000 }
#btn { position: fixed; left: 300px; top: 20px; width: 120px; height: 60px; margin: 0; border: 0; background: #0000ff }
#in { position: fixed; left: 300px; top: 120px; width: 200px; height: 30px; margin: 0; padding: 0; border: 0; font-size: 16px }
</style></head><body><div id="block"></div><button id="btn">go</button><input id="in">
<script>window.__clicks = 0; document.getElementById('btn').addEventListener('click', () => window.__clicks++);</script></body></html>`;

let d: Daemon;
let origin: Origin;
let base: string;
let cdp: CdpClient;
let tab: Tab;
let viewerBrowser: Browser;
let context: BrowserContext;
/** Requests the viewer's Chromium made to anything but the daemon (aborted). */
const blocked: string[] = [];

before(async () => {
  origin = await startOrigin(htmlPage(PAGE, { 'cache-control': 'no-store' }));
  base = origin.url;
  d = await startDaemon({
    autostart: true,
    env: { BROWSERD_KEYS_FILE: keysFile([{ id: 'viewer', token: VIEW_TOKEN, scopes: ['live:view'] }]) },
  });
  await waitBrowser(d, (s) => s.state === 'ready', 'ready');
  cdp = await daemonCdp(d);
  tab = await openTab(cdp, `${base}/`, { ready: 'window.__clicks === 0' });
  viewerBrowser = await chromium.launch({
    executablePath: '/usr/lib/chromium/chromium',
    // As root Chromium refuses to start with its sandbox (the test suite runs as root).
    args: process.getuid?.() === 0 ? ['--no-sandbox'] : [],
  });
  context = await viewerBrowser.newContext({ viewport: { width: 1000, height: 700 } });
  // No network but the daemon: the page must need nothing else.
  await context.route('**', (route) => {
    const url = route.request().url();
    if (url.startsWith(`${d.url}/`)) return route.continue();
    blocked.push(url);
    return route.abort();
  });
});

after(async () => {
  await viewerBrowser?.close();
  cdp?.close();
  await d?.cleanup();
  await origin.close();
});

/** Waits until `expression` holds in the viewer (Runtime.evaluate: the page's CSP forbids waitForFunction's eval). */
async function waitPage(page: Page, expression: string): Promise<void> {
  await until(expression, () => page.evaluate(expression).then((v) => v === true));
}

async function openViewer(query: string): Promise<Page> {
  const page = await context.newPage();
  const res = await page.goto(`${d.url}/browsers/local/live?${query}`);
  assert.equal(res?.status(), 200);
  await waitPage(page, 'window.__live !== undefined && window.__live.open && window.__live.frames > 0');
  return page;
}

/** The colour the viewer's canvas shows at the remote page's CSS point (x, y). */
async function pixel(page: Page, x: number, y: number): Promise<[number, number, number]> {
  const [w, h] = await tab.eval<[number, number]>('[innerWidth, innerHeight]');
  const fx = x / w;
  const fy = y / h;
  return page.evaluate(`(() => {
    const c = document.getElementById('screen');
    const data = c.getContext('2d').getImageData(Math.floor(${fx} * c.width), Math.floor(${fy} * c.height), 1, 1).data;
    return [data[0], data[1], data[2]];
  })()`);
}

/** Waits until the viewer's canvas shows about `rgb` at the remote point (x, y). */
async function waitColour(page: Page, x: number, y: number, rgb: [number, number, number], what: string): Promise<void> {
  let last: number[] = [];
  await until(
    () => `${what}: ${JSON.stringify(rgb)} at (${x}, ${y}), last ${JSON.stringify(last)}`,
    async () => {
      last = await pixel(page, x, y);
      return last.every((v, i) => Math.abs(v - (rgb[i] as number)) <= 40);
    },
  );
}

/** Where the remote CSS point (x, y) is in the viewer's window. */
async function onCanvas(page: Page, x: number, y: number): Promise<{ x: number; y: number }> {
  const [w, h] = await tab.eval<[number, number]>('[innerWidth, innerHeight]');
  const box = await page.locator('#screen').boundingBox();
  assert.ok(box !== null);
  return { x: box.x + ((x + 0.5) / w) * box.width, y: box.y + ((y + 0.5) / h) * box.height };
}

test('the viewer shows the remote page on its canvas, scaled to its window', async () => {
  const page = await openViewer(`token=${TEST_TOKEN}`);
  await waitColour(page, 100, 75, [0, 192, 0], 'the green block');
  await waitColour(page, 600, 400, [255, 255, 255], 'the white page around it');
  const box = await page.locator('#screen').boundingBox();
  assert.ok(box !== null && box.width <= 1000 && box.height <= 700, `the canvas fits the window: ${JSON.stringify(box)}`);
  // The tab strip and the address bar show the remote tab.
  await waitPage(page, `document.getElementById('url').value === ${JSON.stringify(`${base}/`)}`);
  await page.close();
});

test('a click on the canvas runs the remote click handler; typing fills the remote input, in any language', async () => {
  const page = await openViewer(`token=${TEST_TOKEN}`);
  const btn = await onCanvas(page, 360, 50);
  await page.mouse.click(btn.x, btn.y);
  await until('the remote click', () => tab.eval<number>('window.__clicks').then((n) => n === 1));
  const input = await onCanvas(page, 400, 135);
  await page.mouse.click(input.x, input.y);
  await until('the remote input focused', () => tab.eval<boolean>("document.activeElement === document.getElementById('in')"));
  await page.keyboard.type('Hello, é');
  await page.keyboard.insertText(' 你好');
  await until('the typed text in the remote input', () => tab.eval<string>("document.getElementById('in').value").then((v) => v === 'Hello, é 你好'));
  await tab.eval("document.getElementById('in').value = ''; document.activeElement.blur(); window.__clicks = 0");
  await page.close();
});

test('two viewers see the same frames', async () => {
  const [a, b] = [await openViewer(`token=${TEST_TOKEN}`), await openViewer(`token=${TEST_TOKEN}`)];
  await tab.eval("document.getElementById('block').style.background = '#ff0000'");
  await Promise.all([waitColour(a, 100, 75, [255, 0, 0], 'viewer a'), waitColour(b, 100, 75, [255, 0, 0], 'viewer b')]);
  await tab.eval("document.getElementById('block').style.background = '#00c000'");
  await Promise.all([waitColour(a, 100, 75, [0, 192, 0], 'viewer a'), waitColour(b, 100, 75, [0, 192, 0], 'viewer b')]);
  await Promise.all([a.close(), b.close()]);
});

/** A raw live WebSocket: its hello, and the next text message after sending `msg`. */
async function rawSocket(query: string): Promise<{ hello: { control: boolean }; ask(msg: unknown): Promise<{ t: string; message?: string }>; close(): void }> {
  const ws = new WebSocket(`${d.url.replace('http', 'ws')}/browsers/local/live/ws?${query}`);
  const texts: { t: string; message?: string; control?: boolean }[] = [];
  const waiters: (() => void)[] = [];
  ws.on('message', (data, binary) => {
    if (binary) return;
    texts.push(JSON.parse(String(data)) as { t: string });
    for (const w of waiters.splice(0)) w();
  });
  const next = async (pred: (m: { t: string }) => boolean): Promise<{ t: string; message?: string; control?: boolean }> => {
    for (;;) {
      const i = texts.findIndex(pred);
      if (i >= 0) return texts.splice(i, 1)[0] as { t: string };
      await new Promise<void>((resolve) => waiters.push(resolve));
    }
  };
  const hello = await next((m) => m.t === 'hello');
  return {
    hello: { control: hello.control === true },
    ask: async (msg) => {
      ws.send(JSON.stringify(msg));
      return next((m) => m.t === 'error');
    },
    close: () => ws.close(),
  };
}

test('read-only and view-only viewers: their input is ignored', async () => {
  const page = await openViewer(`token=${TEST_TOKEN}&readOnly=true`);
  assert.equal(await page.evaluate('window.__live.control'), false);
  await page.close();
  for (const query of [`token=${TEST_TOKEN}&readOnly=true`, `token=${VIEW_TOKEN}`]) {
    const s = await rawSocket(query);
    assert.equal(s.hello.control, false, query);
    for (const t of ['down', 'up']) {
      const reply = s.ask({ t, x: 360 / 800, y: 50 / 600, button: 'left', clicks: 1, mods: 0 });
      assert.ok(await within(reply, 30_000), `${query}: the ${t} is answered`);
      assert.match((await reply).message ?? '', /view only/);
    }
    s.close();
  }
  // A controlling socket's click after them is the first the page counts.
  const c = await rawSocket(`token=${TEST_TOKEN}`);
  assert.equal(c.hello.control, true);
  const [w, h] = await tab.eval<[number, number]>('[innerWidth, innerHeight]');
  c.ask({ t: 'down', x: 360 / w, y: 50 / h, button: 'left', clicks: 1, mods: 0 }).catch(() => undefined);
  c.ask({ t: 'up', x: 360 / w, y: 50 / h, button: 'left', clicks: 1, mods: 0 }).catch(() => undefined);
  await until('the controlling click', () => tab.eval<number>('window.__clicks').then((n) => n >= 1));
  assert.equal(await tab.eval<number>('window.__clicks'), 1);
  c.close();
});

test('a wrong token shows an HTML error page; the API still answers JSON', async () => {
  const page = await context.newPage();
  const res = await page.goto(`${d.url}/browsers/local/live?token=wrong-token`);
  assert.equal(res?.status(), 401);
  assert.match(res?.headers()['content-type'] ?? '', /^text\/html/);
  assert.match(await page.locator('#error').innerText(), /not valid/);
  await page.close();
  const json = await fetch(`${d.url}/browsers/local/live?token=wrong-token`);
  assert.equal(json.status, 401);
  assert.equal(((await json.json()) as { code: string }).code, 'unauthorized');
});

test('GET /browsers/{id} names the live view URL with a short-lived token: the link alone opens the page, and its socket', async () => {
  const body = (await (await d.fetch('/browsers/local')).json()) as { browser_live_view_url: string };
  assert.ok(body.browser_live_view_url.startsWith(`${d.url}/browsers/local/live?jwt=`), body.browser_live_view_url);
  const page = await context.newPage();
  const res = await page.goto(body.browser_live_view_url);
  assert.equal(res?.status(), 200);
  await page.waitForSelector('canvas');
  await page.close();
  // A wrong token in the same place shows the error page.
  const bad = await fetch(body.browser_live_view_url.replace(/jwt=.*/, 'jwt=not.a.token'), { headers: { accept: 'text/html' } });
  assert.equal(bad.status, 401);
  assert.match(bad.headers.get('content-type') ?? '', /^text\/html/);
  await bad.text();
});

test('the viewer needed nothing beyond the daemon', () => {
  assert.deepEqual(blocked, []);
});
