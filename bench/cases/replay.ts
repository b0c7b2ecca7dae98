// 18. Recording (replays): what one recording costs at 1280×720 and the default framerate (10 fps)
// while the page animates, against the same minutes without a recording.
// - CPU: the daemon's whole process tree (the daemon, Chromium's processes, ffmpeg) over a window
//   of WINDOW_MS with a page repainting continuously, as a share of one core; the peer is the same
//   tree and page, not recording.
// - A page load (navigation to its load event) while recording vs not, p50.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { CLOCK_TICKS_PER_SEC, listProcessesNow } from '../../daemon/core/process/proc.js';
import { openTab } from '../../test/helpers/computer.js';
import { daemonCdp, waitBrowser } from '../../test/kit/browser.js';
import { startDaemon } from '../daemon.js';
import { median, progress, type Bench, type Row } from '../lib.js';

const WINDOW_MS = 10_000;
const LOADS = 20;
const ANIMATED = `<!doctype html><body style="margin:0"><canvas id=c width=1280 height=720></canvas><script>
const x = document.getElementById('c').getContext('2d'); let i = 0;
(function f() { i++; x.fillStyle = 'hsl(' + (i % 360) + ',80%,50%)'; x.fillRect(0, 0, 1280, 720); x.fillStyle = '#fff'; x.font = '64px sans-serif'; x.fillText(String(i), 100, 200); requestAnimationFrame(f); })();
</script></body>`;
const PAGE = `<!doctype html><title>load</title><body>${'<p>paragraph of a page to load</p>'.repeat(500)}</body>`;

/** CPU seconds (user + system) of `root` and every process below it now. */
function treeCpu(root: number): number {
  const all = listProcessesNow();
  const below = new Set([root]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const p of all) {
      if (below.has(p.pid) || !below.has(p.ppid)) continue;
      below.add(p.pid);
      grew = true;
    }
  }
  return all.filter((p) => below.has(p.pid)).reduce((s, p) => s + p.utime + p.stime, 0) / CLOCK_TICKS_PER_SEC;
}

export const replayBench: Bench = {
  name: 'replay',
  what: 'a recording at 1280×720, 10 fps: CPU of the daemon tree and a page load while recording vs not',
  run: async (): Promise<Row[]> => {
    const origin = createServer((req, res) => void res.writeHead(200, { 'content-type': 'text/html', 'cache-control': 'no-store' }).end(req.url === '/animated' ? ANIMATED : PAGE));
    await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
    const d = await startDaemon({ autostart: true, env: { BROWSERD_VIEWPORT: '1280x720' } });
    try {
      await waitBrowser(d, (s) => s.state === 'ready', 'ready');
      const cdp = await daemonCdp(d);
      const tab = await openTab(cdp, `${base}/animated`);
      const cpuShare = async (): Promise<number> => {
        const c0 = treeCpu(d.pid);
        const t0 = performance.now();
        await new Promise((r) => setTimeout(r, WINDOW_MS));
        return (100 * (treeCpu(d.pid) - c0)) / ((performance.now() - t0) / 1000);
      };
      const start = async (): Promise<string> => {
        const res = await d.fetch('/browsers/local/replays', { method: 'POST', json: {} });
        if (res.status !== 201) throw new Error(`start: ${res.status} ${await res.text()}`);
        return ((await res.json()) as { replay_id: string }).replay_id;
      };
      const stop = async (id: string): Promise<void> => {
        const res = await d.fetch(`/browsers/local/replays/${id}/stop`, { method: 'POST' });
        if (res.status !== 200) throw new Error(`stop: ${res.status} ${await res.text()}`);
      };
      progress('replay: CPU without, then with a recording');
      const idle = await cpuShare();
      const id = await start();
      const recording = await cpuShare();
      await stop(id);
      progress('replay: page loads without and with a recording');
      const load = async (): Promise<number> => {
        const t0 = performance.now();
        await tab.navigate(`${base}/page?${Math.random()}`);
        return performance.now() - t0;
      };
      const plain: number[] = [];
      const recorded: number[] = [];
      for (let i = 0; i < LOADS; i++) plain.push(await load());
      const id2 = await start();
      for (let i = 0; i < LOADS; i++) recorded.push(await load());
      await stop(id2);
      cdp.close();
      return [
        { name: '18. recording CPU, daemon tree, 1280×720 @ 10 fps', unit: '% core', browserd: recording, peer: idle, peerName: 'the same tree and animating page, not recording', note: `${WINDOW_MS / 1000} s each; the page repaints every frame (the worst case for the encoder)` },
        { name: '18. page load while recording, p50', unit: 'ms', browserd: median(recorded), peer: median(plain), peerName: 'the same page load, not recording', note: `${LOADS} loads each (navigation to load event)` },
      ];
    } finally {
      await d.cleanup();
      await new Promise((resolve) => origin.close(resolve));
    }
  },
};
