// 7. The daemon's own cost: start (spawn until its `listening` log line) and idle RSS
// (BROWSERD_BROWSER_AUTOSTART=false, VmRSS after settling) vs a bare `node -e` that listens on a
// port and prints one line. Interleaved, N starts each.
import { setTimeout as sleep } from 'node:timers/promises';
import { rssOf } from '../../test/kit/procs.js';
import { startDaemon, startPeerServer } from '../daemon.js';
import { median, progress, type Bench, type Row } from '../lib.js';

const N = 8;
const SETTLE_MS = 1500;
const MiB = 1024 * 1024;

const BARE = `require('node:http').createServer((q, s) => s.end('ok')).listen(0, '127.0.0.1', function () {
  process.stdout.write(JSON.stringify({ event: 'listening', port: this.address().port }) + '\\n');
});`;

/** Start time (ms to the `listening` line) and RSS (MiB after settling) of a bare node listener. */
async function bareNode(): Promise<{ startMs: number; rss: number }> {
  const peer = await startPeerServer(['-e', BARE]);
  try {
    await sleep(SETTLE_MS);
    return { startMs: peer.readyMs, rss: rssOf(peer.pid) / MiB };
  } finally {
    await peer.stop();
  }
}

async function daemon(): Promise<{ startMs: number; rss: number }> {
  const d = await startDaemon({ autostart: false });
  try {
    const startMs = d.listeningAt - d.spawnedAt;
    await sleep(SETTLE_MS);
    return { startMs, rss: rssOf(d.pid) / MiB };
  } finally {
    await d.cleanup();
  }
}

export async function benchDaemonCost(): Promise<Row[]> {
  const dStart: number[] = [];
  const dRss: number[] = [];
  const bStart: number[] = [];
  const bRss: number[] = [];
  for (let i = 0; i <= N; i++) {
    const a = await daemon();
    const b = await bareNode();
    if (i === 0) continue; // warm-up (page cache)
    dStart.push(a.startMs);
    dRss.push(a.rss);
    bStart.push(b.startMs);
    bRss.push(b.rss);
    progress(`daemon cost ${i}/${N}: start ${a.startMs.toFixed(0)} vs ${b.startMs.toFixed(0)} ms, RSS ${a.rss.toFixed(1)} vs ${b.rss.toFixed(1)} MiB`);
  }
  const peerName = 'bare `node -e` http server on 127.0.0.1:0';
  return [
    { name: '7. daemon start to `listening`, p50', unit: 'ms', browserd: median(dStart), peer: median(bStart), peerName, note: `N=${N} each, spawn until the log line` },
    { name: '7. daemon idle RSS (no Chromium), p50', unit: 'MiB', browserd: median(dRss), peer: median(bRss), peerName, note: `VmRSS ${SETTLE_MS} ms after listening` },
  ];
}

export const daemonBench: Bench = { name: 'daemon', what: "7. the daemon's start time and idle RSS vs a bare node server", run: benchDaemonCost };
