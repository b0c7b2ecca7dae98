// GET /docs: the OpenAPI document as a page, opened in a real browser. Not the daemon's own
// Chromium: its forwarding proxy never lets a page reach the daemon's API (403), and a person opens
// the page in a browser of their own. So a second, sandboxed Chromium (/usr/lib/chromium/chromium)
// as the agent user (through setpriv, as the daemon starts its own), driven by Puppeteer. The page
// loads without any request but its own (on loopback), and shows a known route with its scope,
// parameters and source file.
import assert from 'node:assert/strict';
import { chmodSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import puppeteer, { type Browser } from 'puppeteer-core';
import { agentIds, agentTempDir } from '../kit/agent.js';
import { tempDir } from '../kit/cleanup.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';

let d: Daemon;
let browser: Browser;

before(async () => {
  d = await startDaemon();
  const { uid, gid } = agentIds();
  const home = agentTempDir('docs-chromium-');
  // Chromium refuses to run as root with its sandbox: it runs as the agent user, sandboxed.
  const wrapper = path.join(tempDir('docs-wrapper-'), 'chromium');
  writeFileSync(wrapper, `#!/bin/sh\nexec setpriv --reuid=${uid} --regid=${gid} --clear-groups /usr/lib/chromium/chromium "$@"\n`);
  chmodSync(wrapper, 0o755);
  browser = await puppeteer.launch({
    executablePath: wrapper,
    userDataDir: path.join(home, 'profile'),
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, TMPDIR: home },
    headless: true,
  });
});
after(async () => {
  await browser?.close();
  await d.cleanup();
});

test('GET /docs is public HTML whose Content-Security-Policy forbids the page any request', async () => {
  const res = await fetch(`${d.url}/docs`);
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'text/html; charset=utf-8');
  assert.match(res.headers.get('content-security-policy') ?? '', /^default-src 'none'; style-src 'unsafe-inline';/);
  const html = await res.text();
  assert.doesNotMatch(html, /<script|<link|<img|@import|url\(/i);
});

test('in a browser the page loads with no request leaving loopback and shows a known route', async () => {
  const page = await browser.newPage();
  try {
    const requested: string[] = [];
    const blocked: string[] = [];
    page.on('request', (r) => requested.push(r.url()));
    page.on('requestfailed', (r) => blocked.push(r.url()));
    page.on('console', (m) => blocked.push(`console: ${m.text()}`));
    const res = await page.goto(`${d.url}/docs`, { waitUntil: 'load' });
    assert.equal(res?.status(), 200);
    assert.deepEqual(requested, [`${d.url}/docs`], 'the page asked for nothing but itself');
    assert.deepEqual(blocked, [], 'nothing failed or was refused by the policy');
    assert.match(new URL(d.url).hostname, /^127\./);
    const op = await page.$eval('#getBrowsersIdFsReadFile', (el) => (el as unknown as { innerText: string }).innerText);
    assert.match(op, /GET\s+\/browsers\/\{id\}\/fs\/read_file/);
    assert.match(op, /Scope: fs:read/);
    assert.match(op, /daemon\/fs\/routes\.ts/);
    assert.match(op, /path\s+required\s+query/);
    const families = await page.$$eval('nav a', (as) => as.map((a) => (a as unknown as { textContent: string }).textContent));
    assert.ok(families.some((f) => f.startsWith('fs (')), families.join(', '));
    assert.equal(await page.title(), `browserd ${(await (await fetch(`${d.url}/openapi.json`)).json() as { info: { version: string } }).info.version}: API reference`);
  } finally {
    await page.close();
  }
});
