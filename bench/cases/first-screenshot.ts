// 21. The first screenshot, on a browser no CDP client has touched (issue 37's journey, issue 43's
// rows): cold, the daemon's spawn → /readyz 200 → POST …/computer/screenshot until the last byte of
// the PNG of the launch tab, vs Chromium by hand (as the agent user, sandboxed, the daemon's flags and
// viewport) → DevTools answering → a session on its launch tab → Page.captureScreenshot (PNG,
// optimizeForSpeed, as the daemon asks) decoded to bytes; and after a restart, POST …/restart → the
// screenshot vs stopping the hand Chromium, starting it again, and the same capture. The hand peer
// speaks DevTools over the pipe as the daemon does (bench/chromium.ts pipeFlags): ready when
// Browser.getVersion answers there, no port, no WebSocket. Interleaved, one warm-up.
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { viewportFlags } from '../../daemon/chromium/settings/viewport.js';
import { agentTempDir } from '../../test/kit/agent.js';
import { until } from '../../test/kit/wait.js';
import { daemonFlags, pipeFlags, startChromium, type HandChromium } from '../chromium.js';
import { startDaemon, type Daemon } from '../daemon.js';
import { median, percentile, progress, roundSpread, samples, timed, type Bench, type Row } from '../lib.js';

const N = samples(8);
/** Idle time before each sample (a fresh Chromium keeps the cores busy for a while). */
const SETTLE_MS = 1000;
const VIEWPORT = { width: 1280, height: 720 };

/** The daemon's screenshot of the current page (the launch tab), as bytes. */
async function daemonShot(d: Daemon): Promise<number> {
  const res = await d.fetch('/browsers/local/computer/screenshot', { method: 'POST' });
  const png = Buffer.from(await res.arrayBuffer());
  if (res.status !== 200) throw new Error(`screenshot answered ${res.status}: ${png.toString().slice(0, 200)}`);
  return png.length;
}

/** By hand, over its DevTools pipe: a session on the launch tab of `hand` and Page.captureScreenshot, as bytes. */
async function handShot(hand: HandChromium): Promise<number> {
  const cdp = hand.pipe;
  if (cdp === null) throw new Error('the hand Chromium was started without its pipe');
  const launchTab = async (): Promise<string | undefined> => (await cdp.send('Target.getTargets')).targetInfos.find((t) => t.type === 'page')?.targetId;
  const targetId = await until('the hand Chromium\'s launch tab', launchTab, 30_000, 5);
  const { sessionId } = await cdp.send('Target.attachToTarget', { targetId, flatten: true });
  const shot = await cdp.send('Page.captureScreenshot', { format: 'png', captureBeyondViewport: false, optimizeForSpeed: true }, { sessionId });
  return Buffer.from(shot.data, 'base64').length;
}

export async function benchFirstScreenshot(): Promise<Row[]> {
  const profile = path.join(agentTempDir('browserd-bench-profile-'), 'profile');
  const args = pipeFlags([...daemonFlags(profile, { asAgent: true }), ...viewportFlags(VIEWPORT, true)]);
  const env = { BROWSERD_VIEWPORT: `${VIEWPORT.width}x${VIEWPORT.height}` };
  const cold = { daemon: [] as number[], hand: [] as number[] };
  const restart = { daemon: [] as number[], hand: [] as number[] };
  let d: Daemon | null = null;
  let hand: HandChromium | null = null;
  try {
    const coldDaemon = async (): Promise<void> => {
      const r = await timed(async () => {
        d = await startDaemon({ autostart: true, env });
        const dd = d;
        await until('/readyz says ready', async () => (await fetch(`${dd.url}/readyz`)).status === 200, 60_000, 5);
        return daemonShot(dd);
      });
      cold.daemon.push(r.ms);
    };
    const coldHand = async (): Promise<void> => {
      const r = await timed(async () => {
        hand = await startChromium(args, undefined, { asAgent: true });
        return handShot(hand);
      });
      cold.hand.push(r.ms);
    };
    const restartDaemon = async (): Promise<void> => {
      const dd = d as unknown as Daemon;
      restart.daemon.push((await timed(async () => {
        await dd.call('/browsers/local/restart', { method: 'POST' });
        return daemonShot(dd);
      })).ms);
    };
    const restartHand = async (): Promise<void> => {
      const prev = hand as unknown as HandChromium;
      restart.hand.push((await timed(async () => {
        await prev.stop();
        hand = await startChromium(args, undefined, { asAgent: true });
        return handShot(hand);
      })).ms);
    };
    for (let i = 0; i <= N; i++) {
      for (const step of i % 2 === 0 ? [coldDaemon, coldHand] : [coldHand, coldDaemon]) {
        await sleep(SETTLE_MS);
        await step();
      }
      for (const step of i % 2 === 0 ? [restartDaemon, restartHand] : [restartHand, restartDaemon]) {
        await sleep(SETTLE_MS);
        await step();
      }
      await (d as unknown as Daemon | null)?.cleanup();
      await (hand as unknown as HandChromium | null)?.stop();
      d = null;
      hand = null;
      if (i === 0) {
        for (const a of [cold.daemon, cold.hand, restart.daemon, restart.hand]) a.length = 0; // warm-up
        continue;
      }
      progress(`first screenshot ${i}/${N}: cold ${cold.daemon.at(-1)?.toFixed(0)} vs ${cold.hand.at(-1)?.toFixed(0)} ms, after a restart ${restart.daemon.at(-1)?.toFixed(0)} vs ${restart.hand.at(-1)?.toFixed(0)} ms`);
    }
    const p95 = (a: number[], b: number[]): string => `p95 ${percentile(a, 95).toFixed(0)} vs ${percentile(b, 95).toFixed(0)} ms`;
    return [
      {
        name: '21. daemon start → /readyz → first screenshot (cold, no CDP client), p50',
        unit: 'ms',
        browserd: median(cold.daemon),
        peer: median(cold.hand),
        peerName: 'Chromium by hand (agent user, sandbox, the same flags and viewport, DevTools over the pipe) until Browser.getVersion answers, a session on its launch tab, Page.captureScreenshot',
        note: `N=${N} each, interleaved, ${VIEWPORT.width}×${VIEWPORT.height}; ${roundSpread(cold.daemon, cold.hand)}; ${p95(cold.daemon, cold.hand)}; target ≤ 1.15×; the daemon's figure includes its own start (node, the bundle) and the /readyz polling (every 5 ms)`,
      },
      {
        name: '21. restart → first screenshot, p50',
        unit: 'ms',
        browserd: median(restart.daemon),
        peer: median(restart.hand),
        peerName: 'by hand: SIGTERM the group until gone, the same start (over the pipe), a session on the launch tab, Page.captureScreenshot',
        note: `N=${N} each, interleaved; ${roundSpread(restart.daemon, restart.hand)}; ${p95(restart.daemon, restart.hand)}; target ≤ 1.15×`,
      },
    ];
  } finally {
    await (d as unknown as Daemon | null)?.cleanup();
    await (hand as unknown as HandChromium | null)?.stop();
  }
}

export const firstScreenshotBench: Bench = { name: 'first-screenshot', what: '21. daemon start and restart to the first screenshot vs Chromium by hand', run: benchFirstScreenshot };
