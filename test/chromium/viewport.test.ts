// The viewport through the HTTP API against the real daemon and Chromium: out of the box a tab a CDP
// client opens (Playwright connectOverCDP, its default context) and computer/screenshot are
// 1920×1080; PATCH /browsers/{id} {viewport} changes innerWidth/innerHeight of an open tab and of a
// new one with the same Chromium pid; the viewport survives a Chromium restart and a daemon
// restart; limits and the scope are checked.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { chromium, type Browser as PwBrowser, type Page } from 'playwright-core';
import { sdk } from '../helpers/computer.js';
import { decodePng } from '../helpers/png.js';
import { expectError } from '../helpers/http.js';
import { browser, daemonCdp, waitBrowser } from '../kit/browser.js';
import { until } from '../kit/wait.js';
import { tempDir } from '../kit/cleanup.js';
import { keysFile, startDaemon, TEST_TOKEN, type Daemon } from '../kit/daemon.js';

const stateDir = tempDir('browserd-viewport-');
const WRITE_ONLY = 'write-only-token-0123456789';
let d: Daemon;
const env = (): Record<string, string> => ({ BROWSERD_KEYS_FILE: keysFile([{ id: 'w', token: WRITE_ONLY, scopes: ['browser:write', 'browser:read'] }]) });

before(async () => {
  d = await startDaemon({ autostart: true, stateDir, env: { ...env(), BROWSERD_TOKEN: TEST_TOKEN } });
  await waitBrowser(d, (s) => s.state === 'ready');
});
after(async () => {
  await d.cleanup();
});

async function connect(): Promise<PwBrowser> {
  return chromium.connectOverCDP(`${d.url}/browsers/local/cdp`, { headers: { authorization: `Bearer ${TEST_TOKEN}` } });
}
const size = (p: Page): Promise<[number, number]> => p.evaluate(() => {
  const w = globalThis as unknown as { innerWidth: number; innerHeight: number };
  return [w.innerWidth, w.innerHeight] as [number, number];
});
const pidOf = async (): Promise<number | null> => (await browser(d)).chromium.pid;

test('out of the box: a CDP client\'s new tab and computer/screenshot are 1920×1080', async () => {
  const pw = await connect();
  try {
    const ctx = pw.contexts()[0]!;
    const page = await ctx.newPage();
    assert.deepEqual(await size(page), [1920, 1080]);
    const shot = await d.fetch('/browsers/local/computer/screenshot', { method: 'POST', json: {} });
    assert.equal(shot.status, 200);
    const img = decodePng(Buffer.from(await shot.arrayBuffer()));
    assert.deepEqual([img.width, img.height], [1920, 1080]);
    assert.deepEqual((await browser(d)).viewport, { width: 1920, height: 1080 });
    await page.close();
  } finally {
    await pw.close();
  }
});

test('PATCH viewport (SDK): live in an open tab and a new one, same pid; kept across a Chromium restart', async () => {
  const pid = await pidOf();
  const pw = await connect();
  try {
    const ctx = pw.contexts()[0]!;
    const open = await ctx.newPage();
    // Through the SDK (browsers.update), with its `force` (accepted: nothing here refuses a resize).
    const body = (await sdk(d).browsers.update('local', { viewport: { width: 1280, height: 720, refresh_rate: 30, force: true } })) as unknown as { viewport: unknown; chromium: { pid: number } };
    assert.deepEqual(body.viewport, { width: 1280, height: 720, refresh_rate: 30 });
    assert.equal(body.chromium.pid, pid, 'no restart');
    // The answer comes once every window is re-fitted; each renderer takes its new size a moment later.
    await until('the open tab at the new viewport', async () => (await size(open)).join('x') === '1280x720');
    const fresh = await ctx.newPage();
    assert.deepEqual(await size(fresh), [1280, 720]);
    // A new window (not a tab of the open one) is fitted when its target appears.
    const cdp = await daemonCdp(d);
    try {
      const { targetId } = await cdp.send('Target.createTarget', { url: 'about:blank', newWindow: true });
      const { sessionId } = await cdp.send('Target.attachToTarget', { targetId, flatten: true });
      const inner = async (): Promise<string> =>
        String((await cdp.send('Runtime.evaluate', { expression: '`${innerWidth}x${innerHeight}`', returnByValue: true }, { sessionId })).result.value);
      await until('the new window at the viewport', async () => (await inner()) === '1280x720');
      await cdp.send('Target.closeTarget', { targetId });
    } finally {
      cdp.close();
    }
    assert.equal(await pidOf(), pid);
  } finally {
    await pw.close();
  }
  await d.call('/browsers/local/restart', { method: 'POST' });
  assert.notEqual(await pidOf(), pid);
  const pw2 = await connect();
  try {
    assert.deepEqual(await size(await pw2.contexts()[0]!.newPage()), [1280, 720]);
  } finally {
    await pw2.close();
  }
});

test('PATCH viewport: limits named, scope browser:configure, nothing changed by a refused request', async () => {
  const bad = await expectError(await d.fetch('/browsers/local', { method: 'PATCH', json: { viewport: { width: 99, height: 5000 } } }), 400, 'bad_request');
  const messages = (bad.details as { message: string }[]).map((x) => x.message).join('\n');
  assert.match(messages, /viewport\.width: must be at least 100/);
  assert.match(messages, /viewport\.height: must be at most 4320/);
  await expectError(await d.fetch('/browsers/local', { method: 'PATCH', json: { viewport: { width: 800 } } }), 400, 'bad_request');
  const forbidden = await expectError(
    await d.fetch('/browsers/local', { method: 'PATCH', json: { viewport: { width: 800, height: 600 } }, headers: { authorization: `Bearer ${WRITE_ONLY}` } }),
    403,
    'forbidden',
  );
  assert.match(String(forbidden.message), /browser:configure/);
  assert.deepEqual((await browser(d)).viewport, { width: 1280, height: 720, refresh_rate: 30 });
});

test('the viewport survives a daemon restart', async () => {
  await d.stop();
  d = await startDaemon({ autostart: true, stateDir, env: env() });
  await waitBrowser(d, (s) => s.state === 'ready');
  assert.deepEqual((await browser(d)).viewport, { width: 1280, height: 720, refresh_rate: 30 });
  const pw = await connect();
  try {
    assert.deepEqual(await size(await pw.contexts()[0]!.newPage()), [1280, 720]);
  } finally {
    await pw.close();
  }
});
