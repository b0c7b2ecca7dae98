// 17. Live view latency. Paint → frame: the page's colour is changed (Runtime.evaluate) and the time
// runs until the next frame arrives on a live view WebSocket (/browsers/{id}/live/ws, a Node client:
// the daemon's path, not a viewer's JPEG decoding) vs the next Page.screencastFrame of a bare
// Page.startScreencast over a hand-started Chromium's own port. Click → event: a down + up message on
// the live socket until the page's click handler logs (Runtime.consoleAPICalled) vs the bare
// Input.dispatchMouseEvent press + release on the port until the same log. The same page in a tab
// opened with Target.createTarget on both, 1280 × 720 at scale 1; samples interleaved after a warm-up.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import WebSocket from 'ws';
import { CdpClient } from '../../daemon/cdp/client.js';
import { daemonCdp } from '../../test/kit/browser.js';
import { tempDir } from '../../test/kit/cleanup.js';
import { until } from '../../test/kit/wait.js';
import { daemonFlags, startChromium, type HandChromium } from '../chromium.js';
import { TEST_TOKEN } from '../daemon.js';
import { median, percentile, progress, readyDaemon, type Bench, type Row } from '../lib.js';

const N = 40;
const WARMUP = 3;
/** The longest one sample may wait for its frame or event. */
const WAIT_MS = 10_000;
const VIEWPORT = { width: 1280, height: 720, deviceScaleFactor: 1, mobile: false };
const PAGE = `<!doctype html><html><head><style>html,body{margin:0;height:100%}</style></head><body>
<button id="b" style="position:fixed;left:600px;top:320px;width:80px;height:80px">x</button>
<script>document.getElementById('b').addEventListener('click', () => console.log('clicked'));</script></body></html>`;

async function openPage(cdp: CdpClient, url: string): Promise<string> {
  const { targetId } = await cdp.send('Target.createTarget', { url });
  const { sessionId } = await cdp.send('Target.attachToTarget', { targetId, flatten: true });
  await cdp.send('Emulation.setDeviceMetricsOverride', VIEWPORT, { sessionId });
  await cdp.send('Runtime.enable', {}, { sessionId });
  const loaded = async (): Promise<boolean> => (await cdp.send('Runtime.evaluate', { expression: 'document.readyState', returnByValue: true }, { sessionId })).result.value === 'complete';
  await until(`${url} loaded`, loaded, 5000, 25);
  return sessionId;
}

/** A waiter: `wait` resolves (with the time) at the first `fire`. */
function nextEvent(): { wait: Promise<number>; fire: () => void } {
  let fire!: () => void;
  const wait = new Promise<number>((resolve) => (fire = () => resolve(performance.now())));
  return { wait, fire };
}

/** `p`, or an error naming `what` after WAIT_MS (a benchmark never hangs). */
async function bounded<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_r, reject) => (timer = setTimeout(() => reject(new Error(`no ${what} within ${WAIT_MS} ms`)), WAIT_MS)))]);
  } finally {
    clearTimeout(timer);
  }
}

export async function benchLiveView(): Promise<Row[]> {
  const server = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(PAGE));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  const d = await readyDaemon();
  let hand: HandChromium | null = null;
  let viaProxy: CdpClient | null = null;
  let bare: CdpClient | null = null;
  let ws: WebSocket | null = null;
  try {
    hand = await startChromium(daemonFlags(path.join(tempDir('browserd-bench-profile-'), 'profile')));
    viaProxy = await daemonCdp(d);
    bare = await CdpClient.overWebSocket(hand.wsUrl, { maxPayload: 256 * 1024 * 1024 });
    const liveSession = await openPage(viaProxy, url);
    const bareSession = await openPage(bare, url);
    const proxyClient = viaProxy;
    const bareClient = bare;

    // Frame and click listeners: each sample arms one waiter.
    let liveFrame = nextEvent();
    let bareFrame = nextEvent();
    let liveClick = nextEvent();
    let bareClick = nextEvent();
    const socket = new WebSocket(`${d.url.replace('http', 'ws')}/browsers/local/live/ws?token=${TEST_TOKEN}`);
    ws = socket;
    const opened = new Promise<void>((resolve, reject) => {
      socket.once('open', () => resolve());
      socket.once('error', reject);
    });
    socket.on('message', (_data, binary) => {
      if (binary) liveFrame.fire();
    });
    await opened;
    bareClient.on('Page.screencastFrame', (p, sid) => {
      if (sid !== bareSession) return;
      bareClient.send('Page.screencastFrameAck', { sessionId: p.sessionId }, { sessionId: bareSession }).catch(() => undefined);
      bareFrame.fire();
    });
    await bareClient.send('Page.startScreencast', { format: 'jpeg', quality: 80, maxWidth: 1280, maxHeight: 720, everyNthFrame: 1 }, { sessionId: bareSession });
    proxyClient.on('Runtime.consoleAPICalled', (_p, sid) => {
      if (sid === liveSession) liveClick.fire();
    });
    bareClient.on('Runtime.consoleAPICalled', (_p, sid) => {
      if (sid === bareSession) bareClick.fire();
    });

    // Each page alternates between two colours of its own: every paint changes what it shows.
    const colours = new Map<string, number>();
    const paint = async (client: CdpClient, sessionId: string, next: () => { wait: Promise<number> }): Promise<number> => {
      const armed = next();
      const t0 = performance.now();
      const colour = ((colours.get(sessionId) ?? 0) + 1) % 2;
      colours.set(sessionId, colour);
      await client.send('Runtime.evaluate', { expression: `document.body.style.background = '${colour === 0 ? '#ff0000' : '#0000ff'}'` }, { sessionId });
      return (await bounded(armed.wait, 'a frame after a paint')) - t0;
    };
    const paints = { live: [] as number[], bare: [] as number[] };
    // Both screencasts running: a frame of the first page shown may still come; settle with one paint each.
    await paint(proxyClient, liveSession, () => (liveFrame = nextEvent()));
    await paint(bareClient, bareSession, () => (bareFrame = nextEvent()));
    for (let i = 0; i < N + WARMUP; i++) {
      for (const step of i % 2 === 0 ? (['live', 'bare'] as const) : (['bare', 'live'] as const)) {
        const ms = step === 'live' ? await paint(proxyClient, liveSession, () => (liveFrame = nextEvent())) : await paint(bareClient, bareSession, () => (bareFrame = nextEvent()));
        if (i >= WARMUP) paints[step].push(ms);
      }
    }
    progress(`paint → frame: live view ${median(paints.live).toFixed(1)} ms, bare screencast ${median(paints.bare).toFixed(1)} ms`);

    const x = 640 / 1280;
    const y = 360 / 720;
    const clickLive = async (): Promise<number> => {
      liveClick = nextEvent();
      const t0 = performance.now();
      socket.send(JSON.stringify({ t: 'down', x, y, button: 'left', clicks: 1, mods: 0 }));
      socket.send(JSON.stringify({ t: 'up', x, y, button: 'left', clicks: 1, mods: 0 }));
      return (await bounded(liveClick.wait, 'the click through the live view')) - t0;
    };
    const clickBare = async (): Promise<number> => {
      bareClick = nextEvent();
      const t0 = performance.now();
      for (const type of ['mousePressed', 'mouseReleased'] as const) {
        await bareClient.send('Input.dispatchMouseEvent', { type, x: 640, y: 360, button: 'left', buttons: type === 'mousePressed' ? 1 : 0, clickCount: 1 }, { sessionId: bareSession });
      }
      return (await bounded(bareClick.wait, 'the bare click')) - t0;
    };
    const clicks = { live: [] as number[], bare: [] as number[] };
    for (let i = 0; i < N + WARMUP; i++) {
      for (const step of i % 2 === 0 ? (['live', 'bare'] as const) : (['bare', 'live'] as const)) {
        const ms = step === 'live' ? await clickLive() : await clickBare();
        if (i >= WARMUP) clicks[step].push(ms);
      }
    }
    progress(`click → event: live view ${median(clicks.live).toFixed(1)} ms, bare ${median(clicks.bare).toFixed(1)} ms`);
    return [
      {
        name: '17. live view paint → frame, p50',
        unit: 'ms',
        browserd: median(paints.live),
        peer: median(paints.bare),
        peerName: 'bare Page.startScreencast over a hand-started Chromium\u2019s port (next screencastFrame)',
        note: `N=${N} each, interleaved; p95 ${percentile(paints.live, 95).toFixed(1)} vs ${percentile(paints.bare, 95).toFixed(1)} ms; the frame's arrival at a Node WebSocket client (no JPEG decoding)`,
      },
      {
        name: '17. live view click → page event, p50',
        unit: 'ms',
        browserd: median(clicks.live),
        peer: median(clicks.bare),
        peerName: 'bare Input.dispatchMouseEvent pressed + released over the port, until the click handler logs',
        note: `N=${N} each, interleaved; p95 ${percentile(clicks.live, 95).toFixed(1)} vs ${percentile(clicks.bare, 95).toFixed(1)} ms; browserd also finds the current page per message (the computer controls' queue)`,
      },
    ];
  } finally {
    ws?.close();
    viaProxy?.close();
    bare?.close();
    await hand?.stop();
    await d.cleanup();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

export const liveViewBench: Bench = { name: 'live-view', what: '17. live view latency: paint → frame and click → event vs bare CDP on a port', run: benchLiveView };
