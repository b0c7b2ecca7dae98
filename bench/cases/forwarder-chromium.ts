// 8. The forwarding proxy with Chromium itself as the client: browserd's Chromium (the daemon's
// flags, --proxy-server at the daemon's forwarder, tinyproxy the active stored proxy, made active by
// PATCH) vs a hand Chromium with the same flags and --proxy-server straight at the same tinyproxy
// (plus --proxy-bypass-list=<-loopback>, as the daemon passes). The same CDP client code on both:
// the daemon's CDP proxy for browserd, the hand Chromium's port for the peer. Interleaved,
// alternating which side goes first.
// - page load: Page.navigate to an HTML page with SUBRESOURCES scripts until Page.loadEventFired.
// - 50 MB download in the page: fetch() of a 50 MB body read to its end, timed with performance.now().
// - switch latency: PATCH /browsers/local {proxy_id} to tinyproxy B and back to A, time to the
//   answer; no peer (a hand Chromium cannot switch its proxy live).
// The origin is `bench.test` (tinyproxy's own /etc/hosts, see forwarder.ts): a loopback name would
// go straight past the proxy in the forwarder. The daemon's proxy checks go to a loopback server.
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { CdpClient } from '../../daemon/cdp/client.js';
import { sendBytes } from '../../test/helpers/proxies/forwarder.js';
import { startTinyproxy, type Tinyproxy } from '../../test/helpers/proxies/servers.js';
import { cdpConnect, cdpUrl } from '../../test/kit/browser.js';
import { onCleanup, tempDir } from '../../test/kit/cleanup.js';
import { daemonFlags, startChromium, type HandChromium } from '../chromium.js';
import type { Daemon } from '../daemon.js';
import { median, notInstalled, percentile, progress, readyDaemon, skippedRow, which, type Bench, type Row } from '../lib.js';
import { privateTinyproxy } from './forwarder.js';

const MB50 = 50 * 1024 * 1024;
const LOADS = 30;
const DOWNLOADS = 7;
const SWITCHES = 30;
const SUBRESOURCES = 10;
const PEER = 'hand Chromium (same flags), --proxy-server straight at tinyproxy';

/** `/page` → HTML with SUBRESOURCES scripts; `/r/<i>.js`; `/bytes/<n>`; `/ip` → 127.0.0.1 (proxy checks). */
function startOrigin(): Promise<Origin> {
  const server = createServer((req, res) => {
    const url = req.url ?? '';
    const bytes = /^\/bytes\/(\d+)/.exec(url);
    const nostore = { 'cache-control': 'no-store' };
    if (url.startsWith('/page')) {
      const scripts = Array.from({ length: SUBRESOURCES }, (_, i) => `<script src="/r/${i}.js"></script>`).join('');
      res.writeHead(200, { ...nostore, 'content-type': 'text/html' }).end(`<!doctype html><title>p</title>${scripts}<p>${'x'.repeat(20_000)}</p>`);
    } else if (url.startsWith('/r/')) res.writeHead(200, { ...nostore, 'content-type': 'text/javascript' }).end(`window.n=(window.n||0)+1;/*${'y'.repeat(8000)}*/`);
    else if (url === '/ip') res.writeHead(200, { 'content-type': 'text/plain' }).end('127.0.0.1');
    else if (bytes) sendBytes(res, Number(bytes[1]), nostore, 256 * 1024);
    else res.writeHead(404).end();
  });
  const origin = { server, port: 0, connections: 0 };
  server.on('connection', () => origin.connections++);
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ ...origin, port: (server.address() as AddressInfo).port, get connections() { return origin.connections; } })));
}

interface Origin {
  server: Server;
  port: number;
  /** Connections accepted so far (tinyproxy opens one per connection of its client). */
  readonly connections: number;
}

interface Side {
  name: 'browserd' | 'hand';
  cdp: CdpClient;
  session: string;
  loads: number[];
  downloads: { ms: number; mbps: number }[];
  conns: number;
}

async function openPage(name: Side['name'], cdp: CdpClient): Promise<Side> {
  const { targetId } = await cdp.send('Target.createTarget', { url: 'about:blank' });
  const { sessionId } = await cdp.send('Target.attachToTarget', { targetId, flatten: true });
  await cdp.send('Page.enable', {}, { sessionId });
  return { name, cdp, session: sessionId, loads: [], downloads: [], conns: 0 };
}

/** Page.navigate → Page.loadEventFired of this session, in ms; checks that every script ran. */
async function load(side: Side, url: string): Promise<number> {
  const s = { sessionId: side.session };
  let off = (): void => undefined;
  const loaded = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${side.name}: no load event for ${url}`)), 30_000);
    off = side.cdp.on('Page.loadEventFired', (_p, sid) => {
      if (sid !== side.session) return;
      clearTimeout(timer);
      resolve();
    });
  });
  const t0 = performance.now();
  try {
    const nav = await side.cdp.send('Page.navigate', { url }, s);
    if (nav.errorText !== undefined) throw new Error(`${side.name}: ${url}: ${nav.errorText}`);
    await loaded;
  } finally {
    off();
  }
  const ms = performance.now() - t0;
  const n = await side.cdp.send('Runtime.evaluate', { expression: 'window.n', returnByValue: true }, s);
  if (n.result.value !== SUBRESOURCES) throw new Error(`${side.name}: ${String(n.result.value)} of ${SUBRESOURCES} scripts ran`);
  return ms;
}

/** fetch() of MB50 bytes in the page, read to the end; the page's own time. */
async function download(side: Side): Promise<{ ms: number; mbps: number }> {
  const expression = `(async () => {
    const t0 = performance.now();
    const r = await fetch('/bytes/${MB50}?' + Math.random(), { cache: 'no-store' });
    const reader = r.body.getReader(); let n = 0;
    for (;;) { const { done, value } = await reader.read(); if (done) break; n += value.length; }
    return [r.status, n, performance.now() - t0];
  })()`;
  const r = await side.cdp.send('Runtime.evaluate', { expression, awaitPromise: true, returnByValue: true }, { sessionId: side.session, timeoutMs: 120_000 });
  const [status, n, ms] = r.result.value as [number, number, number];
  if (status !== 200 || n !== MB50) throw new Error(`${side.name}: download ${status}, ${n} bytes`);
  return { ms, mbps: MB50 / 1e6 / (ms / 1000) };
}

async function patchMs(d: Daemon, proxyId: string): Promise<number> {
  const t0 = performance.now();
  await d.call('/browsers/local', { method: 'PATCH', json: { proxy_id: proxyId } });
  return performance.now() - t0;
}

/** CPU time (user + system) of process `pid` so far, in ms (clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

const ratio = (a: number, b: number): string => `${(a / b).toFixed(3)}×`;

export async function benchForwarderChromium(): Promise<Row[]> {
  const name = '8. Chromium page load through the forwarder';
  if (which('tinyproxy') === null) return [skippedRow(name, 'ms', PEER, notInstalled('tinyproxy'))];
  if (which('unshare') === null || process.getuid?.() !== 0) return [skippedRow(name, 'ms', PEER, 'needs root and unshare (tinyproxy in its own mount namespace)')];

  let origin: Origin | null = null;
  let tinyA: { port: number; close: () => Promise<void> } | null = null;
  let tinyB: Tinyproxy | null = null;
  let d: Daemon | null = null;
  let hand: HandChromium | null = null;
  const clients: CdpClient[] = [];
  const close = async (): Promise<void> => {
    for (const c of clients) c.close();
    await hand?.stop();
    await tinyA?.close();
    await tinyB?.close();
    origin?.server.closeAllConnections();
    origin?.server.close();
  };
  const unregister = onCleanup(close);
  try {
    origin = await startOrigin();
    tinyA = await privateTinyproxy(origin.port);
    tinyB = await startTinyproxy({ connectPorts: [origin.port] });
    d = await readyDaemon({ BROWSERD_PROXY_CHECK_URLS: `http://127.0.0.1:${origin.port}/ip` });
    const proxy = (port: number): unknown => ({ type: 'custom', protocol: 'http', config: { host: '127.0.0.1', port } });
    const a = (await d.call<{ id: string }>('/proxies', { method: 'POST', json: proxy(tinyA.port) }, 201)).id;
    const b = (await d.call<{ id: string }>('/proxies', { method: 'POST', json: proxy(tinyB.port) }, 201)).id;
    await d.call('/browsers/local', { method: 'PATCH', json: { proxy_id: a } });
    const flags = [`--proxy-server=http://127.0.0.1:${tinyA.port}`, '--proxy-bypass-list=<-loopback>'];
    hand = await startChromium(daemonFlags(path.join(tempDir('browserd-bench-fwdc-'), 'profile'), { extraFlags: flags }));
    const viaDaemon = await cdpConnect(cdpUrl(d), d.token);
    clients.push(viaDaemon);
    const direct = await CdpClient.overWebSocket(hand.wsUrl, { maxPayload: 512 * 1024 * 1024 });
    clients.push(direct);
    const sides = [await openPage('browserd', viaDaemon), await openPage('hand', direct)] as [Side, Side];
    const [ours, theirs] = sides;
    const page = `http://bench.test:${origin.port}/page`;

    for (let i = -3; i < LOADS; i++) {
      for (const s of i % 2 === 0 ? sides : [...sides].reverse()) {
        const c0 = origin.connections;
        const ms = await load(s, `${page}?${i}`);
        if (i < 0) continue;
        s.loads.push(ms);
        s.conns += origin.connections - c0;
      }
    }
    progress(`forwarder-chromium page load: ${median(ours.loads).toFixed(1)} ms vs ${median(theirs.loads).toFixed(1)} ms straight (${ratio(median(ours.loads), median(theirs.loads))})`);
    const daemonCpu: number[] = [];
    for (let i = -1; i < DOWNLOADS; i++) {
      for (const s of i % 2 === 0 ? sides : [...sides].reverse()) {
        const cpu0 = cpuMs(d.pid);
        const r = await download(s);
        if (i < 0) continue;
        s.downloads.push(r);
        if (s === ours) daemonCpu.push(cpuMs(d.pid) - cpu0);
      }
    }
    const bMs = median(ours.downloads.map((x) => x.ms));
    const pMs = median(theirs.downloads.map((x) => x.ms));
    const bT = median(ours.downloads.map((x) => x.mbps));
    const pT = median(theirs.downloads.map((x) => x.mbps));
    progress(`forwarder-chromium 50 MB fetch: ${bMs.toFixed(0)} ms vs ${pMs.toFixed(0)} ms straight (${ratio(bMs, pMs)}); daemon CPU ${median(daemonCpu).toFixed(0)} ms per download`);

    const switches: number[] = [];
    const same: number[] = [];
    for (let i = -2; i < SWITCHES; i++) {
      const toB = await patchMs(d, b);
      const toA = await patchMs(d, a);
      const again = await patchMs(d, a);
      if (i < 0) continue;
      switches.push(toB, toA);
      same.push(again);
    }
    progress(`forwarder-chromium switch: p50 ${median(switches).toFixed(2)} ms`);

    const loadNote = `Page.navigate → Page.loadEventFired, an HTML page + ${SUBRESOURCES} scripts from a loopback origin through tinyproxy, N=${LOADS} each, interleaved; p95 ${percentile(ours.loads, 95).toFixed(1)} vs ${percentile(theirs.loads, 95).toFixed(1)} ms; ratio ${ratio(median(ours.loads), median(theirs.loads))} (target ≤ 1.05×); origin connections (= tinyproxy's) per load: ${(ours.conns / LOADS).toFixed(1)} vs ${(theirs.conns / LOADS).toFixed(1)}`;
    const dlNote = `fetch() of 50 MB in the page, read to the end, timed with performance.now(), N=${DOWNLOADS} each, interleaved`;
    return [
      { name: '8. Chromium page load, p50', unit: 'ms', browserd: median(ours.loads), peer: median(theirs.loads), peerName: PEER, note: loadNote },
      { name: '8. Chromium 50 MB fetch: time, p50', unit: 'ms', browserd: bMs, peer: pMs, peerName: PEER, note: `${dlNote}; ratio ${ratio(bMs, pMs)} (target ≤ 1.05×); the daemon's CPU per download p50 ${median(daemonCpu).toFixed(0)} ms (${os.cpus().length} cores, load ${os.loadavg()[0]?.toFixed(1)})` },
      { name: '8. Chromium 50 MB fetch: throughput, p50', unit: 'MB/s', browserd: bT, peer: pT, peerName: PEER, higherIsBetter: true, note: `the same downloads; ratio ${ratio(bT, pT)} (target ≥ 0.9×)` },
      {
        name: '8. proxy switch (PATCH proxy_id), p50',
        unit: 'ms',
        browserd: median(switches),
        peer: null,
        peerName: 'none (a hand Chromium cannot switch its proxy live)',
        note: `PATCH /browsers/local {proxy_id} A → B → A to the answer, ${SWITCHES * 2} switches; p95 ${percentile(switches, 95).toFixed(2)} ms; a PATCH naming the proxy already active: p50 ${median(same).toFixed(2)} ms`,
      },
    ];
  } finally {
    await d?.cleanup();
    await close();
    unregister();
  }
}

export const forwarderChromiumBench: Bench = { name: 'forwarder-chromium', what: "8. the forwarding proxy with Chromium as the client: page load, 50 MB fetch, proxy switch", run: benchForwarderChromium };
