// The browser's downloads through the files API: a click on a download link in a real page (served
// on loopback, through the forwarding proxy) saves the file in the downloads folder that GET
// /browsers/{id} names, set on every launch — a restart included — and read_file gives it back whole.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import puppeteer from 'puppeteer-core';
import { kernel } from '../helpers/fs.js';
import { waitBrowser } from '../kit/browser.js';
import { TEST_TOKEN, startDaemon, type Daemon } from '../kit/daemon.js';
import { until } from '../kit/wait.js';

const payload = randomBytes(300_000);
let d: Daemon;
let origin: http.Server;
let base: string;

before(async () => {
  origin = http.createServer((req, res) => {
    if (req.url?.startsWith('/file')) {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-disposition': `attachment; filename="${req.url.slice(1)}.bin"` }).end(payload);
      return;
    }
    const suffix = (req.url ?? '/').slice(1);
    res.writeHead(200, { 'content-type': 'text/html' }).end(`<a id="dl" href="/file${suffix}">download</a>`);
  });
  await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
  d = await startDaemon({ autostart: true });
  await waitBrowser(d, (s) => s.state === 'ready', 'ready');
});
after(async () => {
  await d.cleanup();
  await new Promise<void>((resolve) => origin.close(() => resolve()));
});

/** Clicks the page's link like a person (puppeteer through the daemon's CDP endpoint). */
async function clickDownload(suffix: string): Promise<void> {
  const b = await puppeteer.connect({ browserURL: `${d.url}/browsers/local/cdp`, headers: { authorization: `Bearer ${TEST_TOKEN}` } });
  try {
    const page = await b.newPage();
    await page.goto(`${base}/${suffix}`);
    await page.click('#dl');
  } finally {
    await b.disconnect();
  }
}

async function downloaded(dir: string, name: string): Promise<Buffer> {
  const sdk = kernel(d);
  let names: string[] = [];
  await until(() => `${name} downloaded; the folder has ${JSON.stringify(names)}`, async () => {
    names = (await sdk.browsers.fs.listFiles('local', { path: dir })).map((f) => f.name);
    // Chromium writes `<name>.crdownload` first and renames it when complete.
    return names.includes(name);
  }, 30_000, 100);
  const res = await d.fetch(`/browsers/local/fs/read_file?path=${encodeURIComponent(`${dir}/${name}`)}`);
  assert.equal(res.status, 200);
  return Buffer.from(await res.arrayBuffer());
}

test('a clicked download lands in the downloads folder GET /browsers/{id} names, and read_file gives it back', async () => {
  const s = (await (await d.fetch('/browsers/local')).json()) as { downloads_dir: string };
  assert.equal(s.downloads_dir, `${d.stateDir}-downloads`);
  await clickDownload('one');
  assert.deepEqual(await downloaded(s.downloads_dir, 'fileone.bin'), payload);
});

test('the download behaviour is set again at every launch', async () => {
  assert.equal((await d.fetch('/browsers/local/restart', { method: 'POST' })).status, 200);
  const s = (await (await d.fetch('/browsers/local')).json()) as { downloads_dir: string };
  await clickDownload('two');
  assert.deepEqual(await downloaded(s.downloads_dir, 'filetwo.bin'), payload);
});
