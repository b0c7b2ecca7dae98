// 7. The daemon's own cost: start (spawn until its `listening` log line) and idle RSS
// (BROWSERD_BROWSER_AUTOSTART=false, VmRSS after settling) vs a bare `node -e` that listens on a
// port and prints one line. Interleaved, N starts each.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { startDaemon } from './daemon.js';
import { checkRunning, exitOf, median, onCleanup, progress, type Row } from './lib.js';

const N = 8;
const SETTLE_MS = 1500;

const BARE = `require('node:http').createServer((q, s) => s.end('ok')).listen(0, '127.0.0.1', function () {
  process.stdout.write(JSON.stringify({ event: 'listening', port: this.address().port }) + '\\n');
});`;

export function rssMiB(pid: number): number {
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for ${pid}`);
  return Number(m[1]) / 1024;
}

/** Start time (ms to the `listening` line) and RSS (MiB after settling) of a bare node listener. */
async function bareNode(): Promise<{ startMs: number; rss: number }> {
  checkRunning();
  const t0 = performance.now();
  const proc = spawn(process.execPath, ['-e', BARE], { stdio: ['ignore', 'pipe', 'inherit'], detached: true });
  const exited = exitOf(proc);
  const stop = async (): Promise<void> => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
    await exited;
  };
  const unregister = onCleanup(stop);
  try {
    const startMs = await new Promise<number>((resolve, reject) => {
      let buf = '';
      proc.stdout?.setEncoding('utf8').on('data', (c: string) => {
        buf += c;
        if (buf.includes('"listening"')) resolve(performance.now() - t0);
      });
      void exited.then(() => reject(new Error('node -e exited before listening')));
    });
    await sleep(SETTLE_MS);
    return { startMs, rss: rssMiB(proc.pid as number) };
  } finally {
    unregister();
    await stop();
  }
}

async function daemon(): Promise<{ startMs: number; rss: number }> {
  const d = await startDaemon({ autostart: false });
  try {
    const line = await d.waitLog((l) => l.event === 'listening');
    const startMs = (line.at_ms as number) - d.spawnedAt;
    await sleep(SETTLE_MS);
    return { startMs, rss: rssMiB(d.pid) };
  } finally {
    await d.stop();
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
