// The browser's downloads, whichever client starts them: a click on a download link in a real page
// (served on loopback) through Puppeteer and Playwright (connectOverCDP) over the daemon's CDP
// endpoint, and through the daemon's own Playwright runner. The file lands where the daemon can
// serve it, GET …/fs/downloads lists it with its URL and suggested name, read_file gives it back
// whole; what a client set is undone when it leaves (Chromium itself would drop the behaviour back
// to its own default, a folder nothing serves), and a restart keeps it all.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { chromium } from 'playwright-core';
import puppeteer from 'puppeteer-core';
import { kernel } from '../helpers/fs.js';
import { waitBrowser } from '../kit/browser.js';
import { TEST_TOKEN, startDaemon, type Daemon } from '../kit/daemon.js';
import { until } from '../kit/wait.js';
import { startOrigin, type Origin } from '../kit/origin.js';

interface Listed {
  id: string;
  url: string;
  suggested_filename: string;
  state: string;
  received_bytes: number;
  total_bytes: number;
  path: string | null;
}

const payload = randomBytes(300_000);
const headers = { authorization: `Bearer ${TEST_TOKEN}` };
let d: Daemon;
let origin: Origin;
let base: string;
let downloadsDir: string;

before(async () => {
  origin = await startOrigin((req, res) => {
    if (req.url?.startsWith('/file')) {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-disposition': `attachment; filename="${req.url.slice(1).split('?')[0]}.bin"` }).end(payload);
      return;
    }
    const suffix = (req.url ?? '/').slice(1);
    res.writeHead(200, { 'content-type': 'text/html' }).end(`<a id="dl" href="/file${suffix}?q=secret-query">download</a>`);
  });
  base = origin.url;
  d = await startDaemon({ autostart: true });
  await waitBrowser(d, (s) => s.state === 'ready', 'ready');
  downloadsDir = ((await (await d.fetch('/browsers/local')).json()) as { downloads_dir: string }).downloads_dir;
});
after(async () => {
  await d.cleanup();
  await origin.close();
});

async function listing(): Promise<{ path: string; downloads: Listed[] }> {
  const res = await d.fetch('/browsers/local/fs/downloads');
  assert.equal(res.status, 200);
  return (await res.json()) as { path: string; downloads: Listed[] };
}

/** The completed download of `name` in the listing (waited for), its bytes read back with read_file. */
async function completed(name: string): Promise<{ entry: Listed; bytes: Buffer }> {
  let seen: Listed[] = [];
  await until(() => `${name} completed; listed: ${JSON.stringify(seen)}`, async () => {
    seen = (await listing()).downloads;
    return seen.some((e) => e.suggested_filename === name && e.state === 'completed');
  }, 30_000, 100);
  const entry = seen.find((e) => e.suggested_filename === name && e.state === 'completed') as Listed;
  assert.ok(entry.path !== null, 'a completed download names its file');
  const res = await d.fetch(`/browsers/local/fs/read_file?path=${encodeURIComponent(entry.path)}`);
  assert.equal(res.status, 200, `read_file ${entry.path}`);
  return { entry, bytes: Buffer.from(await res.arrayBuffer()) };
}

/** Clicks the page's link like a person (Puppeteer through the daemon's CDP endpoint). */
async function puppeteerDownload(suffix: string): Promise<void> {
  const b = await puppeteer.connect({ browserURL: `${d.url}/browsers/local/cdp`, headers });
  try {
    const page = await b.newPage();
    await page.goto(`${base}/${suffix}`);
    await page.click('#dl');
    await completed(`file${suffix}.bin`);
  } finally {
    await b.disconnect();
  }
}

test('a Puppeteer download lands in the downloads folder, is listed with its URL and name, and read_file gives it back', async () => {
  assert.equal((await listing()).path, `${d.stateDir}-downloads`);
  await puppeteerDownload('one');
  const { entry, bytes } = await completed('fileone.bin');
  assert.deepEqual(bytes, payload);
  assert.equal(path.dirname(entry.path ?? ''), downloadsDir);
  assert.equal(entry.url, `${base}/fileone?q=secret-query`);
  assert.equal(entry.received_bytes, payload.length);
  // The log names the URL without its query.
  const logged = d.logs.filter((l) => l.event === 'download_started' || l.event === 'download_finished');
  assert.ok(logged.length >= 2, 'download_started and download_finished are logged');
  assert.doesNotMatch(JSON.stringify(logged), /secret-query/);
});

test('Playwright (connectOverCDP) gets its download event; after it leaves, a Puppeteer download still lands', async () => {
  const pw = await chromium.connectOverCDP(`${d.url}/browsers/local/cdp`, { headers });
  const page = await pw.contexts()[0]!.newPage();
  await page.goto(`${base}/pw`);
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#dl')]);
  assert.equal(download.suggestedFilename(), 'filepw.bin');
  const { entry, bytes } = await completed('filepw.bin');
  assert.deepEqual(bytes, payload);
  // Playwright named a folder of its own (allowAndName): on this machine it exists, so it was honoured.
  assert.equal(path.basename(entry.path ?? ''), entry.id);
  await page.close();
  await pw.close();
  // Chromium dropped what Playwright set when its session went: the daemon's behaviour is back.
  await puppeteerDownload('after');
  const after = await completed('fileafter.bin');
  assert.equal(after.entry.path, path.join(downloadsDir, 'fileafter.bin'));
  assert.deepEqual(after.bytes, payload);
});

test('a download path that does not exist on this VM (a client elsewhere) becomes the downloads folder', async () => {
  const b = await puppeteer.connect({ browserURL: `${d.url}/browsers/local/cdp`, headers });
  try {
    const session = await b.target().createCDPSession();
    // A folder of the client's own machine: no such path here (unique, so that no earlier run made it).
    const far = path.join(`${d.stateDir}-elsewhere`, 'client', 'artifacts');
    await session.send('Browser.setDownloadBehavior', { behavior: 'allowAndName', downloadPath: far, eventsEnabled: true });
    const began = new Promise<{ guid: string; suggestedFilename: string }>((resolve) => session.on('Browser.downloadWillBegin', resolve));
    const page = await b.newPage();
    await page.goto(`${base}/far`);
    await page.click('#dl');
    const event = await began;
    assert.equal(event.suggestedFilename, 'filefar.bin');
    const { entry, bytes } = await completed('filefar.bin');
    assert.equal(entry.path, path.join(downloadsDir, event.guid));
    assert.deepEqual(bytes, payload);
    assert.equal(existsSync(far), false);
    await page.close();
  } finally {
    await b.disconnect();
    rmSync(`${d.stateDir}-elsewhere`, { recursive: true, force: true });
  }
});

test('two Playwright clients downloading at once each get their own event, and both files are listed', async () => {
  const [a, b] = await Promise.all([chromium.connectOverCDP(`${d.url}/browsers/local/cdp`, { headers }), chromium.connectOverCDP(`${d.url}/browsers/local/cdp`, { headers })]);
  try {
    const [pa, pb] = await Promise.all([a.contexts()[0]!.newPage(), b.contexts()[0]!.newPage()]);
    await Promise.all([pa.goto(`${base}/ta`), pb.goto(`${base}/tb`)]);
    const [da, db] = await Promise.all([pa.waitForEvent('download'), pb.waitForEvent('download'), pa.click('#dl'), pb.click('#dl')]);
    assert.equal(da.suggestedFilename(), 'fileta.bin');
    assert.equal(db.suggestedFilename(), 'filetb.bin');
    for (const name of ['fileta.bin', 'filetb.bin']) assert.deepEqual((await completed(name)).bytes, payload);
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});

test("the daemon's own Playwright runner (a client on the VM) saves a download with saveAs; the download is listed in the downloads folder", async () => {
  const target = path.join(`${d.stateDir}-downloads`, 'saved-by-runner.bin');
  const code = [
    `await page.goto(${JSON.stringify(`${base}/runner`)});`,
    `const [download] = await Promise.all([page.waitForEvent('download'), page.click('#dl')]);`,
    `await download.saveAs(${JSON.stringify(target)});`,
    `const fs = await import('node:fs');`,
    `return { name: download.suggestedFilename(), size: fs.statSync(${JSON.stringify(target)}).size };`,
  ].join('\n');
  const r = await kernel(d).browsers.playwright.execute('local', { code, timeout_sec: 60 });
  assert.equal(r.success, true, `${r.error ?? ''} ${r.stderr ?? ''}`);
  assert.deepEqual(r.result, { name: 'filerunner.bin', size: payload.length });
  const { entry, bytes } = await completed('filerunner.bin');
  assert.equal(entry.path, path.join(downloadsDir, entry.id));
  assert.deepEqual(bytes, payload);
});

test('a restart keeps the behaviour: a download after it lands in the downloads folder', async () => {
  assert.equal((await d.fetch('/browsers/local/restart', { method: 'POST' })).status, 200);
  await puppeteerDownload('two');
  const { entry, bytes } = await completed('filetwo.bin');
  // The runner of the test before reconnected after the restart: its Playwright set allowAndName
  // into the downloads folder, so the file has its GUID for a name while the runner is connected.
  assert.equal(path.dirname(entry.path ?? ''), downloadsDir);
  assert.deepEqual(bytes, payload);
});
