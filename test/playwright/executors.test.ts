// @long: starts real runners per executor (a minute on a busy machine), started first by test/run.mjs.
// Named Playwright executors against the real daemon, real Chromium and real runners: two
// executors keep their own globals and tabs and run at the same time; the listing; the limit
// (409 executor_limit listing them); a timeout replaces only its own runner and the replacement
// takes over the executor's tab; DELETE with close_tab=false leaves the tab open, and the default
// closes it; deleting `default` restarts its runner; a Chromium restart keeps the runner, which opens a new tab.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { expectError } from '../helpers/http.js';
import { daemonCdp, waitBrowser, type CdpClient } from '../kit/browser.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';
import { until } from '../kit/wait.js';

interface Answer {
  success: boolean;
  result?: unknown;
  error?: string;
  executor: string;
  tab: { target_id: string; created: boolean } | null;
}
interface Listing {
  executors: { name: string; busy: boolean; created_at: string; last_used_at: string | null; target_id: string | null; url: string | null }[];
}

let d: Daemon;
let site: Server;
let siteUrl = '';
let cdp: CdpClient;

const execute = (code: string, executor?: string, timeout_sec = 120): Promise<Answer> =>
  d.call<Answer>('/browsers/local/playwright/execute', { method: 'POST', json: { code, timeout_sec, ...(executor === undefined ? {} : { executor }) } });
const listing = (): Promise<Listing> => d.call<Listing>('/browsers/local/playwright/executors');
const pageIds = async (): Promise<string[]> => (await cdp.send('Target.getTargets')).targetInfos.filter((t) => t.type === 'page').map((t) => t.targetId);

before(async () => {
  site = createServer((req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(`<!doctype html><title>page ${req.url}</title>`));
  await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
  siteUrl = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
  d = await startDaemon({ autostart: true, env: { BROWSERD_PLAYWRIGHT_EXECUTORS: '3', BROWSERD_PLAYWRIGHT_MAX_HEAP_MB: '128' } });
  await waitBrowser(d, (s) => s.state === 'ready', 'ready');
  cdp = await daemonCdp(d);
});
after(async () => {
  cdp.close();
  await d.cleanup();
  await new Promise<void>((resolve) => site.close(() => resolve()));
});

test('two executors keep their own globals and tabs, and run at the same time', async () => {
  const a1 = await execute(`globalThis.mine = 'a'; await page.goto('${siteUrl}/a'); return process.pid`, 'a');
  const b1 = await execute(`globalThis.mine = 'b'; await page.goto('${siteUrl}/b'); return process.pid`, 'b');
  assert.equal(a1.success, true, a1.error);
  assert.equal(b1.success, true, b1.error);
  assert.notEqual(a1.result, b1.result, 'a runner each');
  assert.equal(a1.executor, 'a');
  assert.ok(a1.tab !== null && b1.tab !== null);
  assert.equal(a1.tab.created, true);
  assert.notEqual(a1.tab.target_id, b1.tab.target_id, 'a tab each');
  const a2 = await execute('return [globalThis.mine, page.url(), process.pid]', 'a');
  const b2 = await execute('return [globalThis.mine, page.url(), process.pid]', 'b');
  assert.deepEqual(a2.result, ['a', `${siteUrl}/a`, a1.result]);
  assert.deepEqual(b2.result, ['b', `${siteUrl}/b`, b1.result]);
  assert.deepEqual(a2.tab, { target_id: a1.tab.target_id, created: false });
  // At once: each waits until the other has started, meeting in a's tab (both runners see every tab;
  // the order of context.pages() is each runner's own, so the tab is found by its address).
  const both = await Promise.all(
    ['a', 'b'].map((name) =>
      execute(
        `const other = '${name === 'a' ? 'b' : 'a'}';
         const meet = context.pages().find((p) => p.url() === '${siteUrl}/a');
         if (meet === undefined) return 'no tab at ${siteUrl}/a';
         await meet.evaluate((n) => { (window as any).started = ((window as any).started ?? []).concat(n); }, '${name}');
         // Until the other has started (a deadline far past a busy machine's delays, not a proof by time).
         for (const end = Date.now() + 150_000; Date.now() < end; ) {
           const started = await meet.evaluate(() => (window as any).started ?? []);
           if (started.includes(other)) return 'saw ' + other;
           await new Promise((r) => setTimeout(r, 50));
         }
         return 'alone';`,
        name,
        300,
      ),
    ),
  );
  assert.deepEqual(both.map((r) => r.result ?? r.error), ['saw b', 'saw a']);
  const list = await listing();
  assert.deepEqual(list.executors.map((e) => e.name), ['default', 'a', 'b']);
  const a = list.executors[1];
  assert.equal(a?.target_id, a1.tab.target_id);
  assert.equal(a?.url, `${siteUrl}/a`);
  assert.equal(a?.busy, false);
  assert.ok(a?.last_used_at !== null && a?.created_at !== undefined);
});

test('past BROWSERD_PLAYWRIGHT_EXECUTORS a new name is 409 executor_limit listing the executors', async () => {
  assert.equal((await execute('return 1', 'c')).success, true);
  const res = await d.fetch('/browsers/local/playwright/execute', { method: 'POST', json: { code: 'return 1', executor: 'd' } });
  const body = await expectError(res, 409, 'executor_limit');
  assert.match(String(body.message), /BROWSERD_PLAYWRIGHT_EXECUTORS=3.*default, a, b, c/);
  // An existing one still runs; a bad name is 400.
  assert.equal((await execute('return 2', 'c')).result, 2);
  await expectError(await d.fetch('/browsers/local/playwright/execute', { method: 'POST', json: { code: 'return 1', executor: 'no spaces' } }), 400, 'bad_request');
});

test('a timeout replaces only its own runner; the new runner takes over the tab', async () => {
  const before = (await execute('return [process.pid, globalThis.mine]', 'a')).result as [number, string];
  const other = (await execute('return [process.pid, globalThis.mine]', 'b')).result as [number, string];
  const tab = (await execute('return 0', 'a')).tab;
  const slow = await execute('await new Promise(() => {})', 'a', 1);
  assert.equal(slow.success, false);
  assert.match(slow.error ?? '', /timed out/);
  const after = await execute('return [process.pid, globalThis.mine ?? null, page.url()]', 'a');
  const [pid, mine, url] = after.result as [number, string | null, string];
  assert.notEqual(pid, before[0], 'a new runner');
  assert.equal(mine, null, 'its globals are new');
  assert.equal(url, `${siteUrl}/a`, 'the same tab');
  assert.deepEqual(after.tab, { target_id: tab?.target_id, created: false });
  assert.deepEqual((await execute('return [process.pid, globalThis.mine]', 'b')).result, other, 'the other executor is untouched');
});

test('DELETE with close_tab=false leaves the tab open; by default it is closed; default restarts', async () => {
  const b = (await listing()).executors.find((e) => e.name === 'b');
  const c = (await listing()).executors.find((e) => e.name === 'c');
  const cTab = c?.target_id;
  assert.ok(b?.target_id && cTab);
  assert.deepEqual(await d.call('/browsers/local/playwright/executors/b?close_tab=false', { method: 'DELETE' }), { name: 'b', closed_tab: false });
  assert.ok((await pageIds()).includes(b.target_id), 'its tab stays');
  assert.deepEqual(await d.call('/browsers/local/playwright/executors/c', { method: 'DELETE' }), { name: 'c', closed_tab: true });
  await until('the tab of c to close', async () => !(await pageIds()).includes(cTab));
  assert.deepEqual((await listing()).executors.map((e) => e.name), ['default', 'a']);
  await expectError(await d.fetch('/browsers/local/playwright/executors/c', { method: 'DELETE' }), 404, 'not_found');
  // Room again for a new one.
  assert.equal((await execute('return 3', 'd')).result, 3);
  const pid = (await execute('return process.pid')).result;
  assert.deepEqual(await d.call('/browsers/local/playwright/executors/default', { method: 'DELETE' }), { name: 'default', closed_tab: false });
  const again = await execute('return process.pid');
  assert.equal(again.success, true, again.error);
  assert.notEqual(again.result, pid, 'default was restarted');
});

test('a Chromium restart: the executor keeps its runner and globals, reconnects, and opens a new tab', async () => {
  const before = await execute('globalThis.kept = "still"; return process.pid', 'a');
  assert.equal(before.success, true, before.error);
  const res = await d.fetch('/browsers/local/restart', { method: 'POST' });
  assert.equal(res.status, 200, await res.text());
  await waitBrowser(d, (s) => s.state === 'ready', 'ready');
  const after = await execute(`await page.goto('${siteUrl}/again'); return [process.pid, globalThis.kept, await page.title()]`, 'a');
  assert.equal(after.success, true, after.error);
  assert.deepEqual(after.result, [before.result, 'still', 'page /again']);
  assert.equal(after.tab?.created, true, 'its old tab went with the old Chromium');
  assert.notEqual(after.tab?.target_id, before.tab?.target_id);
});
