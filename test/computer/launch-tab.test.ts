// The tab Chromium opens at launch is the current page of the computer controls from the moment
// /readyz says ready, with no CDP client ever attached (issue 37): a fresh daemon whose very first
// request is a screenshot, then a click; the same right after POST /restart, and after configure
// with a start_url. Nothing here opens a tab or connects to the CDP endpoint.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { decodePng, hexAt } from '../helpers/png.js';
import { post, sdk, startPageServer, type PageServer } from '../helpers/computer.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';
import { until } from '../kit/wait.js';

let d: Daemon;
let server: PageServer;

before(async () => {
  server = await startPageServer();
  // The first actions on a fresh Chromium are slow on a busy machine: a deadline that is not the subject here.
  d = await startDaemon({ autostart: true, env: { BROWSERD_COMPUTER_TIMEOUT_MS: '120000' } });
});
after(async () => {
  await d?.cleanup();
  await server?.close();
});

/** Waits until /readyz answers 200 (nothing else is asked of the daemon before). */
async function readyz(): Promise<void> {
  await until('/readyz says ready', async () => (await fetch(`${d.url}/readyz`)).status === 200, 60_000, 20);
}

/** The first screenshot and a click on a browser no CDP client has touched; returns the screenshot. */
async function firstSteps(what: string): Promise<ReturnType<typeof decodePng>> {
  const res = await sdk(d).browsers.computer.captureScreenshot('local');
  assert.equal(res.status, 200, `${what}: the first screenshot`);
  const img = decodePng(Buffer.from(await res.arrayBuffer()));
  assert.ok(img.width > 0 && img.height > 0, what);
  const click = await post(d, 'click_mouse', { x: 10, y: 10 });
  assert.equal(click.status, 204, `${what}: the click: ${await click.text()}`);
  return img;
}

test('a fresh daemon: the first request is a screenshot of the launch tab, then a click', async () => {
  await readyz();
  await firstSteps('fresh daemon');
  assert.equal(d.logs.filter((l) => l.event === 'cdp_connected').length, 0, 'no CDP client attached');
});

test('right after POST /restart: the new launch tab is the current page', async () => {
  for (let i = 0; i < 2; i++) {
    await d.call('/browsers/local/restart', { method: 'POST' });
    await firstSteps(`restart ${i + 1}`);
  }
});

test('after configure with a start_url: its page is the current page (the screenshot shows it)', async () => {
  await d.call('/browsers/local/configure', { method: 'POST', json: { start_url: `${server.origin}/quadrants` } });
  // The start page may still be loading when configure answers: the screenshot is of the launch
  // tab whatever it shows; wait for the page's own colours to be sure it is that tab.
  let img = await firstSteps('configure with start_url');
  await until('the start page shows in the screenshot', async () => {
    const res = await post(d, 'screenshot');
    assert.equal(res.status, 200, res.status === 200 ? '' : await res.text());
    img = decodePng(Buffer.from(await res.arrayBuffer()));
    return hexAt(img, 10, 10) === '#ff0000';
  }, 30_000, 50);
  assert.equal(hexAt(img, 210, 10), '#00ff00');
});
