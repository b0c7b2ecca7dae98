// The daemon's own CDP consumers on one page at once, each on its own browser-level session (issue
// 39): telemetry follows the page the computer controls act on while /curl makes requests, and none
// touches another's domains — every console call of the page is reported once (the controls'
// and /curl's sessions are no second source), telemetry switching its console category off and on
// again (Runtime.disable / enable on its sessions) leaves the controls' own watch of the page in
// place (their lookups are kept again, not probed at every action), and /curl answers throughout.
// No CDP client is ever attached: the page is the launch tab of configure's start_url.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { collectTelemetry } from '../helpers/telemetry.js';
import { post } from '../helpers/computer.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';
import { until } from '../kit/wait.js';

interface Envelope {
  seq: number;
  event: { type: string; data?: Record<string, unknown> };
}

/** A page over the whole viewport that logs each click it receives as `click-<n>`, and `tick` every 200 ms (telemetry follows it once one is seen). */
const PAGE = `<!doctype html><html><head><title>consumers</title><style>html, body { margin: 0; height: 100% }</style></head>
<body><script>let n = 0; addEventListener('click', () => console.log('click-' + (++n))); setInterval(() => console.log('tick'), 200);</script></body></html>`;
/** 1 KiB of JSON. */
const API = JSON.stringify({ pad: 'x'.repeat(1010) });

let d: Daemon;
let origin: http.Server;
let base: string;
const seen: Envelope[] = [];
let collector: AbortController;

before(async () => {
  origin = http.createServer((req, res) => {
    if (req.url?.startsWith('/api')) res.writeHead(200, { 'content-type': 'application/json' }).end(API);
    else res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' }).end(PAGE);
  });
  await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
  // The first actions on a fresh Chromium are slow on a busy machine: a deadline that is not the subject here.
  d = await startDaemon({ autostart: true, env: { BROWSERD_COMPUTER_TIMEOUT_MS: '120000', BROWSERD_LOG_LEVEL: 'debug' } /* debug: the controls' computer_page_* lines explain a failure */ });
  await until('/readyz says ready', async () => (await fetch(`${d.url}/readyz`)).status === 200, 60_000, 20);
  await d.call('/browsers/local/telemetry', { method: 'PATCH', json: { browser: { console: { enabled: true }, network: { enabled: true }, page: { enabled: true } } } });
  collector = await collectTelemetry(d, seen);
});
after(async () => {
  collector?.abort();
  await d?.cleanup();
  await new Promise<void>((resolve) => origin?.close(() => resolve()));
});

function waitEvent(what: string, pred: (e: Envelope) => boolean): Promise<Envelope> {
  return until(() => `${what}; seen: ${seen.slice(-15).map((e) => `${e.seq}:${e.event.type}`).join(' ')}`, () => seen.find(pred), 60_000);
}

/** browserd_computer_page_lookups_total{how} of /metrics. */
function lookups(how: 'probed' | 'kept'): Promise<number> {
  return d.metric(`browserd_computer_page_lookups_total{how="${how}"}`);
}

async function click(): Promise<void> {
  const res = await post(d, 'click_mouse', { x: 100, y: 100 });
  assert.equal(res.status, 204, await res.text());
}

async function curl(i: number): Promise<void> {
  const r = await d.call<{ status: number; body: string }>('/browsers/local/curl', { method: 'POST', json: { url: `${base}/api?i=${i}` } });
  assert.equal(r.status, 200);
  assert.equal(r.body, API);
}

test('telemetry, the computer controls and /curl on the same page at once: each on its own session, no event twice, none turns off another\u2019s domains', async () => {
  const url = `${base}/page`;
  await d.call('/browsers/local/configure', { method: 'POST', json: { start_url: url } });
  // The start page loaded with the launch, before the monitor followed it: its ticks say it is followed now.
  const tick = await waitEvent('a tick of the start page', (e) => e.event.type === 'console_log' && e.event.data?.text === 'tick' && e.event.data?.url === url);
  const targetId = tick.event.data?.target_id;
  let clicks = 0;
  const clickOnce = async (): Promise<void> => {
    await click();
    clicks++;
  };

  // The controls come to watch the page: an action finds it without asking the pages again (the
  // first rounds of a new page may not: its world and listeners are set up by them).
  await until('a lookup of the page kept from the last round', async () => {
    const before = await lookups('kept');
    await clickOnce();
    return (await lookups('kept')) > before;
  }, 60_000, 0);

  // Telemetry switches its console category off and on (Runtime.disable, then enable, on its own
  // sessions): the controls' watch of the page stays (their lookups are kept, not probed each time).
  await d.call('/browsers/local/telemetry', { method: 'PATCH', json: { browser: { console: { enabled: false } } } });
  await d.call('/browsers/local/telemetry', { method: 'PATCH', json: { browser: { console: { enabled: true } } } });
  await clickOnce(); // a round after the switches (their commands moved the browser's count)
  const probed = await lookups('probed');
  const kept = await lookups('kept');
  await clickOnce();
  await clickOnce();
  const why = () => JSON.stringify(d.logs.filter((l) => l.event === 'computer_page_probe' || l.event === 'computer_page_not_kept').slice(-4));
  assert.equal(await lookups('probed'), probed, `the controls probed the pages again: their watch of the page was lost; ${why()}`);
  assert.equal(await lookups('kept'), kept + 2, 'the controls kept the current page');

  // All three at once: clicks through the computer controls, requests through /curl, telemetry streaming.
  const burst = (async () => {
    for (let i = 0; i < 6; i++) await clickOnce();
  })();
  await Promise.all([burst, ...[1, 2, 3, 4].map((i) => curl(i))]);
  await curl(5);
  for (let i = 1; i <= clicks; i++) await waitEvent(`console_log click-${i}`, (e) => e.event.type === 'console_log' && e.event.data?.text === `click-${i}`);
  // /curl handed its tabs back: one is kept warm, the others of the burst are closed. (Hidden tabs are
  // not in /json/list: the daemon's gauge says it.)
  await until('/curl has no tab in use and one idle', async () => (await d.metric('browserd_curl_tabs{state="in_use"}')) === 0 && (await d.metric('browserd_curl_tabs{state="idle"}')) === 1, 30_000, 20);

  // Each console call once, the page's tab once: neither the controls' session nor /curl's is a second source.
  for (let i = 1; i <= clicks; i++) {
    const reports = seen.filter((e) => e.event.type === 'console_log' && e.event.data?.text === `click-${i}`);
    assert.equal(reports.length, 1, `click-${i} reported ${reports.length} times: ${JSON.stringify(reports)}`);
  }
  const opened = seen.filter((e) => e.event.type === 'page_tab_opened' && e.event.data?.target_id === targetId);
  assert.ok(opened.length <= 1, `page_tab_opened of the start page ${opened.length} times`);
});
