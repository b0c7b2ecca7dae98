// 8. Computer controls. A screenshot through the API (POST …/computer/screenshot until the last
// byte of the PNG) vs the bare Page.captureScreenshot over a hand-started Chromium's own port with
// the same parameters (PNG, optimizeForSpeed, the call until its answer, base64 decoded to bytes;
// Chromium's default encoder measured beside it, for the choice of optimizeForSpeed); and a click's round trip (POST …/click_mouse until
// its 204) vs the bare Input.dispatchMouseEvent press + release on that port. The same page (text,
// a gradient, a table, served on loopback) in a tab opened with Target.createTarget on both, both
// viewports set to 1280 × 720 at scale 1 by a client session; samples interleaved after a warm-up.
// And a computer-use step as an agent's loop does it (issue 43): screenshot + click + screenshot through
// the official SDK (@onkernel/sdk, its HTTP client, the PNG read to the end) vs the same three commands
// over raw CDP on the hand Chromium's page.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import Kernel from '@onkernel/sdk';
import { CdpClient } from '../../daemon/cdp/client.js';
import { daemonCdp } from '../../test/kit/browser.js';
import { tempDir } from '../../test/kit/cleanup.js';
import { until } from '../../test/kit/wait.js';
import { daemonFlags, startChromium, type HandChromium } from '../chromium.js';
import { TEST_TOKEN } from '../daemon.js';
import { median, percentile, progress, readyDaemon, roundSpread, samples, timed, type Bench, type Row } from '../lib.js';

const SHOT_N = samples(40);
const CLICK_N = samples(60);
const STEP_N = samples(30);
const WARMUP = samples(3, 1);
const VIEWPORT = { width: 1280, height: 720, deviceScaleFactor: 1, mobile: false };

const PAGE = `<!doctype html><html><head><meta charset="utf-8"><style>
body { margin: 0; font: 15px/1.4 sans-serif; background: linear-gradient(135deg, #fdfbfb, #c3cfe2) }
header { height: 80px; background: linear-gradient(90deg, #1e3c72, #2a5298); color: #fff; font-size: 28px; padding: 20px }
main { display: grid; grid-template-columns: 2fr 1fr; gap: 24px; padding: 24px }
td, th { border: 1px solid #999; padding: 4px 8px } table { border-collapse: collapse; background: #fff }
</style></head><body><header>A page to take pictures of</header><main><section>
${Array.from({ length: 8 }, (_, i) => `<p>Paragraph ${i}: the quick brown fox jumps over the lazy dog, 0123456789, éàü — ${'lorem ipsum dolor sit amet '.repeat(4)}</p>`).join('')}
</section><aside><table>${Array.from({ length: 14 }, (_, r) => `<tr>${Array.from({ length: 4 }, (_, c) => `<td>${r * 4 + c}</td>`).join('')}</tr>`).join('')}</table></aside></main></body></html>`;

async function openPage(cdp: CdpClient, url: string): Promise<string> {
  const { targetId } = await cdp.send('Target.createTarget', { url });
  const { sessionId } = await cdp.send('Target.attachToTarget', { targetId, flatten: true });
  await cdp.send('Emulation.setDeviceMetricsOverride', VIEWPORT, { sessionId });
  const loaded = async (): Promise<boolean> => (await cdp.send('Runtime.evaluate', { expression: 'document.readyState', returnByValue: true }, { sessionId })).result.value === 'complete';
  await until(`${url} loaded`, loaded, 5000, 25);
  return sessionId;
}

export async function benchComputer(): Promise<Row[]> {
  const server = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(PAGE));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  const d = await readyDaemon();
  let hand: HandChromium | null = null;
  let viaProxy: CdpClient | null = null;
  let bare: CdpClient | null = null;
  try {
    hand = await startChromium(daemonFlags(path.join(tempDir('browserd-bench-profile-'), 'profile')));
    viaProxy = await daemonCdp(d);
    bare = await CdpClient.overWebSocket(hand.wsUrl, { maxPayload: 256 * 1024 * 1024 });
    await openPage(viaProxy, url);
    const bareSession = await openPage(bare, url);
    const bareClient = bare;

    const apiShot = async (): Promise<number> => {
      const res = await d.fetch('/browsers/local/computer/screenshot', { method: 'POST' });
      const png = Buffer.from(await res.arrayBuffer());
      if (res.status !== 200) throw new Error(`screenshot: ${res.status} ${png.toString()}`);
      return png.length;
    };
    const bareShot = async (optimizeForSpeed = true): Promise<number> => {
      const r = await bareClient.send('Page.captureScreenshot', { format: 'png', captureBeyondViewport: false, optimizeForSpeed }, { sessionId: bareSession });
      return Buffer.from(r.data, 'base64').length;
    };
    const apiClick = async (): Promise<void> => {
      const res = await d.fetch('/browsers/local/computer/click_mouse', { method: 'POST', json: { x: 640, y: 600 } });
      if (res.status !== 204) throw new Error(`click: ${res.status} ${await res.text()}`);
    };
    const bareClick = async (): Promise<void> => {
      for (const type of ['mousePressed', 'mouseReleased'] as const) {
        await bareClient.send('Input.dispatchMouseEvent', { type, x: 640, y: 600, button: 'left', buttons: type === 'mousePressed' ? 1 : 0, clickCount: 1 }, { sessionId: bareSession });
      }
    };

    const shots = { api: [] as number[], bare: [] as number[], plain: [] as number[], apiBytes: 0, bareBytes: 0, plainBytes: 0 };
    for (let i = 0; i < SHOT_N + WARMUP; i++) {
      for (const step of i % 2 === 0 ? (['api', 'bare', 'plain'] as const) : (['plain', 'bare', 'api'] as const)) {
        const r = await timed(() => (step === 'api' ? apiShot() : bareShot(step === 'bare')));
        if (i < WARMUP) continue;
        shots[step].push(r.ms);
        shots[`${step}Bytes`] = r.value;
      }
    }
    progress(`screenshot: browserd ${median(shots.api).toFixed(1)} ms, bare ${median(shots.bare).toFixed(1)} ms, bare with the default encoder ${median(shots.plain).toFixed(1)} ms`);
    // The HTTP floor: a computer route that does not touch Chromium (the answer is the daemon's state).
    const position = async (): Promise<void> => {
      const res = await d.fetch('/browsers/local/computer/get_mouse_position', { method: 'POST' });
      await res.arrayBuffer();
    };
    const clicks = { api: [] as number[], bare: [] as number[], floor: [] as number[] };
    const lookups = async (): Promise<Record<string, number>> => {
      const text = await (await d.fetch('/metrics')).text();
      return Object.fromEntries([...text.matchAll(/^browserd_computer_page_lookups_total\{how="(\w+)"\} (\d+)$/gm)].map((m) => [m[1], Number(m[2])]));
    };
    const before = await lookups();
    await apiClick(); // the pointer is there from now on: each sample is press + release
    for (let i = 0; i < CLICK_N + WARMUP; i++) {
      for (const step of i % 2 === 0 ? (['api', 'bare', 'floor'] as const) : (['floor', 'bare', 'api'] as const)) {
        const r = await timed(step === 'api' ? apiClick : step === 'bare' ? bareClick : position);
        if (i >= WARMUP) clicks[step].push(r.ms);
      }
    }
    const after = await lookups();
    const kept = (after.kept ?? 0) - (before.kept ?? 0);
    const probed = (after.probed ?? 0) - (before.probed ?? 0);
    progress(`click: browserd ${median(clicks.api).toFixed(1)} ms, bare ${median(clicks.bare).toFixed(1)} ms, HTTP floor ${median(clicks.floor).toFixed(1)} ms`);

    // A computer-use step: screenshot + click + screenshot, through the SDK vs raw CDP.
    const sdk = new Kernel({ apiKey: TEST_TOKEN, baseURL: d.url });
    const sdkShot = async (): Promise<number> => (await (await sdk.browsers.computer.captureScreenshot('local')).arrayBuffer()).byteLength;
    const sdkStep = async (): Promise<void> => {
      await sdkShot();
      await sdk.browsers.computer.clickMouse('local', { x: 640, y: 600 });
      await sdkShot();
    };
    const bareStep = async (): Promise<void> => {
      await bareShot();
      await bareClick();
      await bareShot();
    };
    const steps = { sdk: [] as number[], bare: [] as number[] };
    for (let i = 0; i < STEP_N + WARMUP; i++) {
      for (const step of i % 2 === 0 ? (['sdk', 'bare'] as const) : (['bare', 'sdk'] as const)) {
        const r = await timed(step === 'sdk' ? sdkStep : bareStep);
        if (i >= WARMUP) steps[step].push(r.ms);
      }
    }
    progress(`computer-use step: SDK ${median(steps.sdk).toFixed(1)} ms, raw CDP ${median(steps.bare).toFixed(1)} ms`);
    return [
      {
        name: '9. screenshot 1280×720 PNG, p50',
        unit: 'ms',
        browserd: median(shots.api),
        peer: median(shots.bare),
        peerName: 'bare Page.captureScreenshot over a hand-started Chromium\u2019s port (answer decoded to bytes)',
        note:
          `N=${SHOT_N} each, interleaved; p95 ${percentile(shots.api, 95).toFixed(1)} vs ${percentile(shots.bare, 95).toFixed(1)} ms; ${shots.apiBytes} vs ${shots.bareBytes} bytes; goal ≤ 1.1×. ` +
          `Chromium's default PNG encoder (no optimizeForSpeed): ${median(shots.plain).toFixed(1)} ms p50, ${shots.plainBytes} bytes`,
      },
      {
        name: '9. click round trip, p50',
        unit: 'ms',
        browserd: median(clicks.api),
        peer: median(clicks.bare),
        peerName: 'bare Input.dispatchMouseEvent pressed + released over the port',
        note:
          `N=${CLICK_N} each, interleaved; p95 ${percentile(clicks.api, 95).toFixed(1)} vs ${percentile(clicks.bare, 95).toFixed(1)} ms; browserd also finds the current page ` +
          `(kept from the last probe round in ${kept} of ${kept + probed} clicks, 2 pages open); the HTTP floor (get_mouse_position, no Chromium) is ${median(clicks.floor).toFixed(1)} ms p50`,
      },
      {
        name: '9. a computer-use step (screenshot + click + screenshot) via the SDK, p50',
        unit: 'ms',
        browserd: median(steps.sdk),
        peer: median(steps.bare),
        peerName: 'the same three over raw CDP on one page of a hand-started Chromium: Page.captureScreenshot, Input.dispatchMouseEvent pressed + released, Page.captureScreenshot',
        note:
          `N=${STEP_N} each, interleaved; @onkernel/sdk captureScreenshot (the PNG read to the end), clickMouse, captureScreenshot; ${roundSpread(steps.sdk, steps.bare)}; ` +
          `p95 ${percentile(steps.sdk, 95).toFixed(1)} vs ${percentile(steps.bare, 95).toFixed(1)} ms; target ≤ 1.25×`,
      },
    ];
  } finally {
    viaProxy?.close();
    bare?.close();
    await hand?.stop();
    await d.cleanup();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

export const computerBench: Bench = { name: 'computer', what: '9. screenshot and click through the computer API vs bare CDP on a port', run: benchComputer };
