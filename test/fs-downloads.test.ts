// The browser's downloads through the files API: a click on a download link in a real page (served
// on loopback, through the forwarding proxy) saves the file in the downloads folder that GET
// /browsers/{id} names, set on every launch — a restart included — and read_file gives it back whole.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import puppeteer from 'puppeteer-core';
import { startDaemon, TEST_TOKEN, type Daemon } from './helpers/daemon.js';
import { waitBrowser } from './helpers/chromium.js';
import { kernel } from './helpers/fs.js';

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
  d = await startDaemon({ noBrowser: false });
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
  const deadline = Date.now() + 30_000;
  for (;;) {
    const files = await sdk.browsers.fs.listFiles('local', { path: dir });
    // Chromium writes `<name>.crdownload` first and renames it when complete.
    if (files.some((f) => f.name === name)) break;
    assert.ok(Date.now() < deadline, `not downloaded: ${JSON.stringify(files.map((f) => f.name))}`);
    await new Promise((r) => setTimeout(r, 100));
  }
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
