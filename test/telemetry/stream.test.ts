// @long
// The live event stream through the SDK (`kernel.browsers.telemetry.stream('local')`) against the
// real daemon and a real Chromium: a page's console.log, its fetch, its navigation and load; a
// Puppeteer client connecting and leaving; an exec (api_call, never its body); a renderer killed
// with SIGKILL; a Chromium restart (and the monitor following the new Chromium). Every event is
// checked against the SDK's declared shape (schemas.ts), and the whole stream is searched for the
// secrets the test set up (a token in a URL, an authorization header, a cookie, a proxy password).
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import puppeteer from 'puppeteer-core';
import { expectUploaded, indexed, upload } from '../helpers/extensions.js';
import { kernel } from '../helpers/fs.js';
import { collectTelemetry } from '../helpers/telemetry.js';
import { fixtureZip } from '../helpers/zip.js';
import { waitBrowser } from '../kit/browser.js';
import { TEST_TOKEN, startDaemon, type Daemon } from '../kit/daemon.js';
import { until } from '../kit/wait.js';
import { checkShape } from './schemas.js';
import { startOrigin, type Origin } from '../kit/origin.js';

interface Envelope {
  seq: number;
  event: { ts: number; type: string; category: string; source: { kind: string; event?: string; metadata?: Record<string, string> }; data?: Record<string, unknown>; truncated?: boolean };
}

const URL_TOKEN = 'urltoken-5d1c9e7a';
const AUTH_SECRET = 'authsecret-77f0a2b4';
const COOKIE_SECRET = 'cookievalue-3b8e61d0';
const PROXY_PASSWORD = 'proxypass-a41c07e9';
const EXEC_MARKER = 'exec-body-marker-90e1';
const headers = { authorization: `Bearer ${TEST_TOKEN}` };

let d: Daemon;
let origin: Origin;
let base: string;
const seen: Envelope[] = [];
let collector: AbortController;

before(async () => {
  origin = await startOrigin((req, res) => {
    if (req.url?.startsWith('/api')) {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
      return;
    }
    res
      .writeHead(200, { 'content-type': 'text/html', 'set-cookie': `sid=${COOKIE_SECRET}; Path=/` })
      .end(
        `<title>t</title><script>console.log('hello-telemetry', 42);` +
          `fetch('/api/data?token=${URL_TOKEN}', { headers: { authorization: 'Bearer ${AUTH_SECRET}' } }).then(() => console.info('fetched'));</script>`,
      );
  });
  base = origin.url;
  d = await startDaemon({ autostart: true });
  await waitBrowser(d, (s) => s.state === 'ready', 'ready');
  // The CDP categories are opt-in (the SDK's defaults).
  const cfg = await d.call<{ browser: Record<string, { enabled: boolean }> }>('/browsers/local/telemetry', { method: 'PATCH', json: { browser: { console: { enabled: true }, network: { enabled: true }, page: { enabled: true } } } });
  assert.equal(cfg.browser.console?.enabled, true);
  assert.equal(cfg.browser.control?.enabled, true, 'operational categories stay on');
  collector = await collectTelemetry(d, seen);
});
after(async () => {
  collector.abort();
  await d.cleanup();
  await origin.close();
});

function waitEvent(what: string, pred: (e: Envelope) => boolean, after = 0): Promise<Envelope> {
  return until(
    () => `${what}; seen: ${seen.slice(-15).map((e) => `${e.seq}:${e.event.type}`).join(' ')}`,
    () => seen.find((e) => e.seq > after && pred(e)),
    30_000,
  );
}

const lastSeq = (): number => seen[seen.length - 1]?.seq ?? 0;

test('a page: console.log, its fetch (request and response), navigation and load, the tab; a Puppeteer client connecting and leaving', async () => {
  const mark = lastSeq();
  const b = await puppeteer.connect({ browserURL: `${d.url}/browsers/local/cdp`, headers });
  const connect = await waitEvent('cdp_connect', (e) => e.event.type === 'cdp_connect', mark);
  assert.match(connect.event.source.metadata?.remote_address ?? '', /^(127\.0\.0\.1|::1|::ffff:127\.0\.0\.1):\d+$/);
  const page = await b.newPage();
  await page.goto(`${base}/`);
  const log = await waitEvent('console_log of the page', (e) => e.event.type === 'console_log' && e.event.data?.text === 'hello-telemetry', mark);
  assert.deepEqual(log.event.data?.args, ['hello-telemetry', '42']);
  assert.equal(log.event.data?.level, 'log');
  assert.equal(log.event.source.event, 'Runtime.consoleAPICalled');
  const req = await waitEvent('the fetch request', (e) => e.event.type === 'network_request' && String(e.event.data?.url).includes('/api/data'), mark);
  assert.equal(req.event.data?.method, 'GET');
  assert.equal(req.event.data?.resource_type, 'Fetch');
  const res = await waitEvent('its response', (e) => e.event.type === 'network_response' && e.event.data?.request_id === req.event.data?.request_id, mark);
  assert.equal(res.event.data?.status, 200);
  assert.equal(res.event.data?.mime_type, 'application/json');
  await waitEvent('page_navigation', (e) => e.event.type === 'page_navigation' && e.event.data?.url === `${base}/`, mark);
  await waitEvent('page_dom_content_loaded', (e) => e.event.type === 'page_dom_content_loaded', mark);
  const load = await waitEvent('page_load', (e) => e.event.type === 'page_load' && e.event.data?.url === `${base}/`, mark);
  assert.equal(load.event.data?.nav_seq, 1);
  await waitEvent('page_tab_opened', (e) => e.event.type === 'page_tab_opened', mark);
  await waitEvent('console_log after the fetch', (e) => e.event.type === 'console_log' && e.event.data?.text === 'fetched', mark);
  await page.evaluate(() => console.error('an-error'));
  await waitEvent('console_error', (e) => e.event.type === 'console_error' && e.event.data?.text === 'an-error', mark);
  await page.close();
  await waitEvent('page_tab_closed', (e) => e.event.type === 'page_tab_closed', mark);
  await b.disconnect();
  const gone = await waitEvent('cdp_disconnect', (e) => e.event.type === 'cdp_disconnect', mark);
  assert.equal(gone.event.data?.reason, 'client_close');
  assert.ok((gone.event.data?.message_count as number) > 0);
});

test('a page the computer controls act on is followed once: one page_tab_opened, one console_log per call (the controls\u2019 own session is not a second source)', async () => {
  const mark = lastSeq();
  const b = await puppeteer.connect({ browserURL: `${d.url}/browsers/local/cdp`, headers });
  const page = await b.newPage();
  await page.goto(`${base}/`);
  const session = await page.createCDPSession();
  const { targetInfo } = await session.send('Target.getTargetInfo');
  await session.detach();
  const targetId = targetInfo.targetId;
  await waitEvent('page_tab_opened of the new tab', (e) => e.event.type === 'page_tab_opened' && e.event.data?.target_id === targetId, mark);
  // The click attaches the computer controls' session to the page (its answer comes after Chromium
  // reported that session to the daemon's client, where the monitor sees it).
  const click = await d.fetch('/browsers/local/computer/click_mouse', { method: 'POST', json: { x: 5, y: 5 } });
  assert.equal(click.status, 204, await click.text());
  await page.evaluate(() => console.log('once-per-call'));
  await page.evaluate(() => console.log('after-it'));
  await waitEvent('the second console_log', (e) => e.event.type === 'console_log' && e.event.data?.text === 'after-it', mark);
  const opened = seen.filter((e) => e.seq > mark && e.event.type === 'page_tab_opened' && e.event.data?.target_id === targetId);
  assert.equal(opened.length, 1, 'one page_tab_opened');
  const logs = seen.filter((e) => e.seq > mark && e.event.type === 'console_log' && e.event.data?.text === 'once-per-call');
  assert.equal(logs.length, 1, 'one console_log');
  await page.close();
  await b.disconnect();
});

test('an exec is an api_call: its route, status and request id, never its body', async () => {
  const mark = lastSeq();
  const r = await kernel(d).browsers.process.exec('local', { command: 'sh', args: ['-c', `echo ${EXEC_MARKER}`] });
  assert.equal(r.exit_code, 0);
  const call = await waitEvent('api_call of the exec', (e) => e.event.type === 'api_call' && String(e.event.data?.operation_id).endsWith('ProcessExec'), mark);
  assert.equal(call.event.data?.status, 200);
  assert.equal(typeof call.event.data?.request_id, 'string');
  assert.equal(call.event.source.metadata?.key_id !== undefined, true);
  assert.ok(!JSON.stringify(seen).includes(EXEC_MARKER), 'the exec body is in the stream');
});

test('a spawned process exiting is a process_exited event with its exit code', async () => {
  const mark = lastSeq();
  const p = await kernel(d).browsers.process.spawn('local', { command: 'sh', args: ['-c', 'exit 3'] });
  const exited = await waitEvent('process_exited', (e) => e.event.type === 'process_exited' && e.event.data?.process_id === p.process_id, mark);
  assert.equal(exited.event.data?.exit_code, 3);
  assert.equal(exited.event.data?.pid, p.pid);
});

test('an extension install is an extension_installed event', async () => {
  const mark = lastSeq();
  await expectUploaded(await upload(d, indexed([['telext', fixtureZip('content-script')]])));
  const e = await waitEvent('extension_installed', (x) => x.event.type === 'extension_installed' && x.event.data?.name === 'telext', mark);
  assert.equal(typeof e.event.data?.id, 'string');
});

/** The pids of Chromium's renderers: processes under the Chromium pid whose command line says --type=renderer. */
function renderers(chromiumPid: number): number[] {
  const parent = new Map<number, number>();
  const renderer = new Set<number>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      parent.set(Number(name), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
      if (readFileSync(`/proc/${name}/cmdline`, 'utf8').includes('--type=renderer')) renderer.add(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  const under = (pid: number): boolean => {
    for (let p = parent.get(pid), n = 0; p !== undefined && n < 64; p = parent.get(p), n++) if (p === chromiumPid) return true;
    return false;
  };
  return [...renderer].filter(under);
}

test('kill -9 of a renderer is a page_crashed event', async () => {
  const b = await puppeteer.connect({ browserURL: `${d.url}/browsers/local/cdp`, headers });
  try {
    const page = await b.newPage();
    await page.goto(`${base}/`);
    const mark = lastSeq();
    const snap = await waitBrowser(d, (s) => s.state === 'ready', 'ready');
    const pids = renderers(snap.chromium.pid as number);
    assert.ok(pids.length > 0, 'no renderer found under the Chromium pid');
    for (const pid of pids) process.kill(pid, 'SIGKILL');
    const crash = await waitEvent('page_crashed', (e) => e.event.type === 'page_crashed', mark);
    assert.equal(crash.event.category, 'system');
    assert.equal(crash.event.source.event, 'Target.targetCrashed');
  } finally {
    await b.disconnect();
  }
});

test('a Chromium restart: its exit and start, and the monitor follows the new Chromium', async () => {
  const before = await waitBrowser(d, (s) => s.state === 'ready', 'ready');
  const mark = lastSeq();
  await d.call('/browsers/local/restart', { method: 'POST' });
  const exited = await waitEvent('chromium_exited', (e) => e.event.type === 'chromium_exited', mark);
  assert.equal(exited.event.data?.pid, before.chromium.pid);
  const started = await waitEvent('chromium_started', (e) => e.event.type === 'chromium_started', mark);
  assert.notEqual(started.event.data?.pid, before.chromium.pid);
  await waitEvent('monitor_disconnected', (e) => e.event.type === 'monitor_disconnected', mark);
  const b = await puppeteer.connect({ browserURL: `${d.url}/browsers/local/cdp`, headers });
  try {
    const page = await b.newPage();
    await page.goto(`${base}/`);
    await waitEvent('console_log of a page of the new Chromium', (e) => e.event.type === 'console_log' && e.event.data?.text === 'hello-telemetry', started.seq);
    await waitEvent('page_load of the new Chromium', (e) => e.event.type === 'page_load', started.seq);
  } finally {
    await b.disconnect();
  }
});

test('Last-Event-ID resumes with exactly the missed events, in order; every event has the SDK shape; no secret is in the stream', async () => {
  // Its own events (it runs alone as well as after the others): a page with secrets in its fetch and cookie, seen by a Puppeteer client.
  const mark = lastSeq();
  const b = await puppeteer.connect({ browserURL: `${d.url}/browsers/local/cdp`, headers });
  try {
    const tab = await b.newPage();
    await tab.goto(`${base}/`);
    await waitEvent('the fetch response', (e) => e.event.type === 'network_response' && String(e.event.data?.url).includes('/api/data'), mark);
    await waitEvent('console_log of the page', (e) => e.event.type === 'console_log' && e.event.data?.text === 'hello-telemetry', mark);
    await tab.close();
  } finally {
    await b.disconnect();
  }
  await waitEvent('cdp_disconnect', (e) => e.event.type === 'cdp_disconnect', mark);
  // A proxy with a password (the api_call of its creation carries no body).
  const proxy = await d.call<{ id: string }>('/proxies', { method: 'POST', json: { type: 'custom', name: 'tel', protocol: 'http', config: { host: '127.0.0.1', port: 9, username: 'u', password: PROXY_PASSWORD } } }, 201);
  assert.ok(proxy.id);
  await d.call('/browsers/local', { method: 'PATCH', json: { proxy_id: proxy.id } });
  const sw = await waitEvent('proxy_switched', (e) => e.event.type === 'proxy_switched' && e.event.data?.proxy_id === proxy.id);
  assert.equal(sw.event.data?.previous, null);
  await d.call('/browsers/local', { method: 'PATCH', json: { proxy_id: null } });
  await waitEvent('proxy_switched back', (e) => e.event.type === 'proxy_switched' && e.event.data?.proxy_id === null, sw.seq);
  await d.call('/telemetry/events', { method: 'POST', json: { type: 'test.marker', data: { n: 1 } } }, 201);
  const marker = await waitEvent('the custom event', (e) => e.event.type === 'test.marker');
  const resumeAfter = seen[Math.max(0, seen.length - 30)] as Envelope;
  const expected = seen.filter((e) => e.seq > resumeAfter.seq && e.seq <= marker.seq);
  const ctl = new AbortController();
  const got: Envelope[] = [];
  const stream = await kernel(d).browsers.telemetry.stream('local', { 'Last-Event-ID': String(resumeAfter.seq) }, { signal: ctl.signal });
  try {
    for await (const e of stream) {
      got.push(e as unknown as Envelope);
      if ((e as unknown as Envelope).seq >= marker.seq) break;
    }
  } finally {
    ctl.abort();
  }
  assert.deepEqual(got, expected);
  for (let i = 1; i < seen.length; i++) assert.equal((seen[i] as Envelope).seq, (seen[i - 1] as Envelope).seq + 1, 'seqs are consecutive');
  // Every event seen (this test's, and those of the tests before it when they ran), against the SDK's shapes.
  for (const e of seen) checkShape(e);
  const types = new Set(seen.filter((e) => e.seq > mark).map((e) => e.event.type));
  for (const t of ['api_call', 'cdp_connect', 'cdp_disconnect', 'console_log', 'network_request', 'network_response', 'page_navigation', 'page_load', 'page_tab_opened', 'proxy_switched']) {
    assert.ok(types.has(t), `no ${t} event of this test was seen`);
  }
  // The secrets, in the parsed events and in the raw text of the paged list and the stream.
  const page = await d.fetch('/browsers/local/telemetry/events?offset=1&limit=1000');
  assert.equal(page.status, 200);
  const raw = `${JSON.stringify(seen)}${await page.text()}`;
  assert.ok(raw.includes('/api/data'), 'the fetch is in the stream');
  for (const secret of [URL_TOKEN, AUTH_SECRET, COOKIE_SECRET, PROXY_PASSWORD, TEST_TOKEN]) assert.ok(!raw.includes(secret), `${secret} leaked into the telemetry`);
  assert.ok(raw.includes('[redacted]'), 'the cookie and authorization headers are shown redacted');
});
