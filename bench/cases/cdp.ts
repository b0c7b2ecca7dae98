// 8. CDP through the daemon's proxy vs straight to Chromium: the same client (the daemon's
// CdpClient over a WebSocket, no compression) on a page session of each side — browserd's
// authenticated /browsers/local/cdp (WebSocket → bridge → pipe multiplexer → --remote-debugging-pipe)
// and a hand-started Chromium's --remote-debugging-port with the same flags. Both Chromiums run at
// once and the samples interleave in blocks, alternating which side goes first.
// - round trip: Runtime.evaluate `1+1`, ROUND_TRIPS each, one at a time; p50 and p95 per round trip.
// - large messages: Page.captureScreenshot (PNG) of a page of random pixels served on loopback at a
//   viewport of SHOT_SIDE², an answer of ~10 MB (optimizeForSpeed: the fast PNG encoder, so that
//   encoding does not hide the transport); throughput of the answer's bytes per second.
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { CdpClient } from '../../daemon/cdp/client.js';
import { cdpConnect, cdpUrl } from '../../test/kit/browser.js';
import { tempDir } from '../../test/kit/cleanup.js';
import { daemonFlags, startChromium, type HandChromium } from '../chromium.js';

import { median, percentile, progress, readyDaemon, type Bench, type Row } from '../lib.js';

const ROUND_TRIPS = 2000;
/** Round trips per side before the other side takes its turn. */
const BLOCK = 100;
const SHOTS = 12;
/** Viewport side in CSS pixels: 1,600² random RGB pixels make a PNG of ~7.7 MB, ~10 MB of base64. */
const SHOT_SIDE = 1600;
const WARM_UP = 200;

/** A canvas of random opaque pixels filling the viewport (PNG cannot compress it). */
const NOISE_PAGE = `<!doctype html><html><body style="margin:0;overflow:hidden"><canvas id="c"></canvas><script>
const c = document.getElementById('c'); c.width = innerWidth; c.height = innerHeight;
const x = c.getContext('2d'); const img = x.createImageData(c.width, c.height); const d = img.data;
const seed = new Uint32Array(d.buffer); crypto.getRandomValues(seed.subarray(0, Math.min(seed.length, 16384)));
for (let i = 16384; i < seed.length; i++) seed[i] = (seed[i - 16384] * 1103515245 + 12345 + i) >>> 0;
for (let i = 3; i < d.length; i += 4) d[i] = 255;
x.putImageData(img, 0, 0); document.title = 'noise';
</script></body></html>`;

interface Side {
  name: 'browserd' | 'direct';
  cdp: CdpClient;
  session: string;
  rtt: number[];
  mbps: number[];
  shotBytes: number[];
}

function servePage(): Promise<{ server: Server; url: string }> {
  const tag = randomBytes(4).toString('hex');
  const server = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html', 'cache-control': 'no-store' });
    res.end(NOISE_PAGE.replace('noise', `noise-${tag}`));
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/` })));
}

/** A new page of the side's browser at the noise page's URL, with a flat session attached. */
async function openPage(name: Side['name'], cdp: CdpClient, url: string): Promise<Side> {
  const { targetId } = await cdp.send('Target.createTarget', { url: 'about:blank' });
  const { sessionId } = await cdp.send('Target.attachToTarget', { targetId, flatten: true });
  const s = { sessionId };
  await cdp.send('Page.enable', {}, s);
  await cdp.send('Emulation.setDeviceMetricsOverride', { width: SHOT_SIDE, height: SHOT_SIDE, deviceScaleFactor: 1, mobile: false }, s);
  await cdp.send('Page.navigate', { url }, s);
  for (let i = 0; i < 200; i++) {
    const r = await cdp.send('Runtime.evaluate', { expression: 'document.title', returnByValue: true }, s);
    if (String(r.result.value).startsWith('noise-')) break;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return { name, cdp, session: sessionId, rtt: [], mbps: [], shotBytes: [] };
}

async function roundTrips(side: Side, n: number, keep: boolean): Promise<void> {
  const s = { sessionId: side.session };
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const r = await side.cdp.send('Runtime.evaluate', { expression: '1+1', returnByValue: true }, s);
    const ms = performance.now() - t0;
    if (r.result.value !== 2) throw new Error(`${side.name}: 1+1 evaluated to ${String(r.result.value)}`);
    if (keep) side.rtt.push(ms);
  }
}

async function screenshot(side: Side, keep: boolean): Promise<void> {
  const t0 = performance.now();
  const { data } = await side.cdp.send('Page.captureScreenshot', { format: 'png', optimizeForSpeed: true }, { sessionId: side.session, timeoutMs: 60_000 });
  const ms = performance.now() - t0;
  if (data.length < 1_000_000) throw new Error(`${side.name}: the screenshot is only ${data.length} bytes (the noise page did not render?)`);
  if (!keep) return;
  side.shotBytes.push(data.length);
  side.mbps.push(data.length / 1e6 / (ms / 1000));
}

export async function benchCdp(): Promise<Row[]> {
  const d = await readyDaemon();
  let hand: HandChromium | null = null;
  const page = await servePage();
  const clients: CdpClient[] = [];
  try {
    hand = await startChromium(daemonFlags(path.join(tempDir('browserd-bench-cdp-'), 'profile')));
    const viaDaemon = await cdpConnect(cdpUrl(d), d.token);
    clients.push(viaDaemon);
    const direct = await CdpClient.overWebSocket(hand.wsUrl, { maxPayload: 512 * 1024 * 1024 });
    clients.push(direct);
    const sides = [await openPage('browserd', viaDaemon, page.url), await openPage('direct', direct, page.url)];
    for (const s of sides) {
      await roundTrips(s, WARM_UP, false);
      await screenshot(s, false);
    }
    for (let b = 0; b < ROUND_TRIPS / BLOCK; b++) {
      for (const s of b % 2 === 0 ? sides : [...sides].reverse()) await roundTrips(s, BLOCK, true);
    }
    progress(`cdp round trips: browserd p50 ${median(sides[0]!.rtt).toFixed(3)} ms, direct p50 ${median(sides[1]!.rtt).toFixed(3)} ms`);
    for (let i = 0; i < SHOTS; i++) {
      for (const s of i % 2 === 0 ? sides : [...sides].reverse()) await screenshot(s, true);
    }
    const [ours, theirs] = sides as [Side, Side];
    progress(`cdp screenshots: browserd p50 ${median(ours.mbps).toFixed(0)} MB/s, direct p50 ${median(theirs.mbps).toFixed(0)} MB/s`);
    const peerName = "a hand-started Chromium's --remote-debugging-port (same flags), the same client";
    const p50Delta = median(ours.rtt) - median(theirs.rtt);
    return [
      {
        name: '13. CDP round trip, p50',
        unit: 'ms',
        browserd: median(ours.rtt),
        peer: median(theirs.rtt),
        peerName,
        note: `Runtime.evaluate 1+1 on a page session, ${ROUND_TRIPS} each one at a time, interleaved in blocks of ${BLOCK}; p50 delta ${p50Delta >= 0 ? '+' : ''}${(p50Delta * 1000).toFixed(0)} µs (goal: at most +100 µs)`,
      },
      { name: '13. CDP round trip, p95', unit: 'ms', browserd: percentile(ours.rtt, 95), peer: percentile(theirs.rtt, 95), peerName, note: 'the same samples' },
      {
        name: '13. CDP screenshot ~10 MB, p50',
        unit: 'MB/s',
        higherIsBetter: true,
        browserd: median(ours.mbps),
        peer: median(theirs.mbps),
        peerName,
        note: `Page.captureScreenshot PNG of ${SHOT_SIDE}² random pixels served on loopback (answer ${(median(ours.shotBytes) / 1e6).toFixed(1)} MB of base64), ${SHOTS} each, alternating; goal: at least 0.9× the direct throughput`,
      },
    ];
  } finally {
    for (const c of clients) c.close();
    page.server.close();
    await hand?.stop();
    await d.cleanup();
  }
}

export const cdpBench: Bench = { name: 'cdp', what: '13. CDP round trip and large messages through the proxy vs straight to Chromium', run: benchCdp };
