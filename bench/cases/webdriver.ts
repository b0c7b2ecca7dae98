// WebDriver through the daemon vs ChromeDriver direct: the same commands, one at a time, to
// browserd's /browsers/local/webdriver (HTTP → the daemon → its Unix socket → the relay in
// ChromeDriver's namespace → ChromeDriver → the daemon's DevTools endpoint → the pipe) and to a
// hand-started chromedriver on a loopback port attached to a hand-started Chromium's
// --remote-debugging-port (the same flags). Samples interleave in blocks, alternating which side goes first.
// - classic: Find Element (#go) + Element Click on a loopback page, one round trip each, as one sample;
// - BiDi: script.evaluate `1+1` over the session's webSocketUrl.
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import WebSocket from 'ws';
import { tempDir } from '../../test/kit/cleanup.js';
import { until } from '../../test/kit/wait.js';
import { daemonFlags, startChromium, type HandChromium } from '../chromium.js';
import { TEST_TOKEN } from '../daemon.js';
import { median, notInstalled, percentile, progress, readyDaemon, roundSpread, samples, skippedRow, which, type Bench, type Row } from '../lib.js';

const SAMPLES = samples(200, 4);
const BLOCK = samples(20);
const WARM_UP = samples(10);
/** A command that takes longer fails the benchmark (rather than hanging it). */
const COMMAND_TIMEOUT_MS = 30_000;
const PAGE = '<!doctype html><title>bench</title><button id="go" onclick="this.dataset.n = (+this.dataset.n || 0) + 1">go</button>';

interface Side {
  name: 'browserd' | 'direct';
  base: string;
  headers: Record<string, string>;
  session: string;
  element: string;
  bidi: WebSocket;
  nextId: number;
  click: number[];
  evaluate: number[];
  context: string;
}

async function command(side: Pick<Side, 'base' | 'headers'>, method: string, p: string, body?: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${side.base}${p}`, {
    method,
    headers: { ...side.headers, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(COMMAND_TIMEOUT_MS),
  });
  const json = (await res.json()) as { value: Record<string, unknown> };
  if (res.status !== 200) throw new Error(`${method} ${p}: ${res.status} ${JSON.stringify(json)}`);
  return json.value;
}

function bidiCall(side: Side, method: string, params: unknown): Promise<Record<string, unknown>> {
  const id = side.nextId++;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${side.name} ${method}: no answer within ${COMMAND_TIMEOUT_MS} ms`)), COMMAND_TIMEOUT_MS);
    const onMessage = (data: WebSocket.RawData): void => {
      const m = JSON.parse(data.toString()) as { id?: number; type: string; result?: Record<string, unknown> };
      if (m.id !== id) return;
      side.bidi.off('message', onMessage);
      clearTimeout(timer);
      if (m.type === 'success') resolve(m.result ?? {});
      else reject(new Error(`${side.name} ${method}: ${JSON.stringify(m)}`));
    };
    side.bidi.on('message', onMessage);
    side.bidi.send(JSON.stringify({ id, method, params }));
  });
}

async function open(name: Side['name'], base: string, headers: Record<string, string>, caps: Record<string, unknown>, page: string): Promise<Side> {
  const created = await command({ base, headers }, 'POST', '/session', { capabilities: { alwaysMatch: { webSocketUrl: true, ...caps } } });
  const session = created.sessionId as string;
  const side: Side = { name, base, headers, session, element: '', bidi: null as unknown as WebSocket, nextId: 1, click: [], evaluate: [], context: '' };
  await command(side, 'POST', `/session/${session}/url`, { url: page });
  side.context = (await command(side, 'GET', `/session/${session}/window`)) as unknown as string;
  const wsUrl = (created.capabilities as { webSocketUrl: string }).webSocketUrl;
  side.bidi = new WebSocket(wsUrl, { headers, perMessageDeflate: false });
  await new Promise((resolve, reject) => side.bidi.once('open', resolve).once('error', reject));
  return side;
}

async function clicks(side: Side, n: number, keep: boolean): Promise<void> {
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const el = await command(side, 'POST', `/session/${side.session}/element`, { using: 'css selector', value: '#go' });
    const id = Object.values(el)[0] as string;
    await command(side, 'POST', `/session/${side.session}/element/${id}/click`, {});
    if (keep) side.click.push(performance.now() - t0);
  }
}

async function evaluates(side: Side, n: number, keep: boolean): Promise<void> {
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const r = await bidiCall(side, 'script.evaluate', { expression: '1+1', target: { context: side.context }, awaitPromise: false });
    if ((r.result as { value?: unknown } | undefined)?.value !== 2) throw new Error(`${side.name}: 1+1 gave ${JSON.stringify(r)}`);
    if (keep) side.evaluate.push(performance.now() - t0);
  }
}

function servePage(): Promise<{ server: Server; url: string }> {
  const server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(PAGE));
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/` })));
}

export async function benchWebDriver(): Promise<Row[]> {
  const peerName = 'chromedriver on a loopback port, attached to a hand-started Chromium (--remote-debugging-port, same flags)';
  const chromedriver = which('chromedriver');
  if (chromedriver === null) {
    const why = notInstalled('chromedriver');
    return [skippedRow('41. WebDriver findElement + click, p50', 'ms', peerName, why), skippedRow('41. WebDriver BiDi script.evaluate, p50', 'ms', peerName, why)];
  }
  const d = await readyDaemon();
  const page = await servePage();
  let hand: HandChromium | null = null;
  const driverPort = 9515 + Math.floor(Math.random() * 1000);
  const driver = spawn(chromedriver, [`--port=${driverPort}`], { stdio: 'ignore', detached: true });
  const sides: Side[] = [];
  try {
    hand = await startChromium(daemonFlags(path.join(tempDir('browserd-bench-webdriver-'), 'profile')));
    const debuggerAddress = new URL(hand.wsUrl).host;
    const directBase = `http://127.0.0.1:${driverPort}`;
    await until('chromedriver ready', async () => ((await fetch(`${directBase}/status`).catch(() => null))?.ok === true ? true : undefined));
    progress('webdriver: opening the sessions');
    sides.push(await open('browserd', `${d.url}/browsers/local/webdriver`, { authorization: `Bearer ${TEST_TOKEN}` }, {}, page.url));
    sides.push(await open('direct', directBase, {}, { 'goog:chromeOptions': { debuggerAddress } }, page.url));
    progress('webdriver: sessions open, warming up');
    for (const s of sides) {
      await clicks(s, WARM_UP, false);
      await evaluates(s, WARM_UP, false);
    }
    for (let b = 0; b < SAMPLES / BLOCK; b++) {
      for (const s of b % 2 === 0 ? sides : [...sides].reverse()) {
        await clicks(s, BLOCK, true);
        await evaluates(s, BLOCK, true);
      }
    }
    const [ours, theirs] = sides as [Side, Side];
    progress(`webdriver: click p50 browserd ${median(ours.click).toFixed(2)} ms, direct ${median(theirs.click).toFixed(2)} ms; evaluate p50 ${median(ours.evaluate).toFixed(2)} / ${median(theirs.evaluate).toFixed(2)} ms`);
    /** The medians of each block of BLOCK samples: a block of one side and the same block of the other ran back to back. */
    const blocks = (xs: number[]): number[] => Array.from({ length: Math.floor(xs.length / BLOCK) }, (_, b) => median(xs.slice(b * BLOCK, (b + 1) * BLOCK)));
    const note = `${SAMPLES} each, one at a time, interleaved in blocks of ${BLOCK}; target ≤ 1.2×`;
    return [
      { name: '41. WebDriver findElement + click, p50', unit: 'ms', browserd: median(ours.click), peer: median(theirs.click), peerName, note: `Find Element (css #go) then Element Click, two HTTP round trips per sample; ${note}; per block of ${BLOCK}: ${roundSpread(blocks(ours.click), blocks(theirs.click))}` },
      { name: '41. WebDriver findElement + click, p95', unit: 'ms', browserd: percentile(ours.click, 95), peer: percentile(theirs.click, 95), peerName, note: 'the same samples' },
      { name: '41. WebDriver BiDi script.evaluate, p50', unit: 'ms', browserd: median(ours.evaluate), peer: median(theirs.evaluate), peerName, note: `script.evaluate 1+1 over the session's webSocketUrl; ${note}; per block of ${BLOCK}: ${roundSpread(blocks(ours.evaluate), blocks(theirs.evaluate))}` },
      { name: '41. WebDriver BiDi script.evaluate, p95', unit: 'ms', browserd: percentile(ours.evaluate, 95), peer: percentile(theirs.evaluate, 95), peerName, note: 'the same samples' },
    ];
  } finally {
    for (const s of sides) {
      s.bidi.close();
      await command(s, 'DELETE', `/session/${s.session}`).catch(() => undefined);
    }
    try {
      process.kill(-(driver.pid as number), 'SIGTERM');
    } catch {
      // gone already
    }
    page.server.close();
    await hand?.stop();
    await d.cleanup();
  }
}

export const webdriverBench: Bench = { name: 'webdriver', what: '41. WebDriver classic and BiDi through the daemon vs ChromeDriver direct', run: benchWebDriver };
