// 1. Restart to ready: POST /browsers/local/restart until it answers (the old tree stopped, the new
// Chromium's DevTools answering) vs the same by hand (as the agent user, sandboxed, as the daemon runs it): SIGTERM to the old Chromium's group until it
// is gone, then the same binary with the same flags and profile until its DevTools line and a
// Browser.getVersion answer. Interleaved, one warm-up each, N samples each.
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { agentTempDir } from '../../test/kit/agent.js';
import { daemonFlags, startChromium, type HandChromium } from '../chromium.js';
import type { LogLine } from '../daemon.js';
import { median, percentile, progress, readyDaemon, timed, type Bench, type Row } from '../lib.js';

const N = 15;
/** Idle time before each sample. */
const SETTLE_MS = 1000;

function pct(a: number, b: number): string {
  const p = (a / b - 1) * 100;
  return `${p >= 0 ? '+' : '−'}${Math.abs(p).toFixed(0)}%`;
}

/** The `*_ms` fields of the daemon's chromium_stop_phases, chromium_launch_phases (run.ts) and chromium_ready lines, each line once. */
function collectPhases(lines: LogLine[], into: Record<string, number[]>, seen: Set<LogLine>): void {
  for (const l of lines) {
    if (!['chromium_stop_phases', 'chromium_launch_phases', 'chromium_ready'].includes(String(l.event)) || seen.has(l)) continue;
    seen.add(l);
    for (const [k, v] of Object.entries(l)) if (k.endsWith('_ms') && typeof v === 'number') (into[k] ??= []).push(v);
  }
}

export async function benchRestart(): Promise<Row[]> {
  const d = await readyDaemon();
  let hand: HandChromium | null = null;
  try {
    // The peer does the same work as the daemon: Chromium as the agent user, sandboxed (docs/security.md).
    const profile = path.join(agentTempDir('browserd-bench-profile-'), 'profile');
    const args = daemonFlags(profile, { asAgent: true });
    hand = await startChromium(args, undefined, { asAgent: true });

    const phases: Record<string, number[]> = {};
    const phaseSeen = new Set<LogLine>();
    const daemonTotal: number[] = [];
    const daemonLaunch: number[] = [];
    const handTotal: number[] = [];
    const handLaunch: number[] = [];
    const viaDaemon = async (): Promise<void> => {
      const seen = d.logs.length;
      const r = await timed(() => d.call<{ state: string }>('/browsers/local/restart', { method: 'POST' }));
      if (r.value.state !== 'ready') throw new Error(`restart answered state ${r.value.state}`);
      const ready = d.logs.slice(seen).find((l: LogLine) => l.event === 'chromium_ready');
      daemonTotal.push(r.ms);
      if (typeof ready?.ms === 'number') daemonLaunch.push(ready.ms);
    };
    const byHand = async (): Promise<void> => {
      const prev = hand as HandChromium;
      hand = null;
      const h = await timed(async () => {
        await prev.stop();
        return startChromium(args, undefined, { asAgent: true });
      });
      hand = h.value;
      handTotal.push(h.ms);
      handLaunch.push(h.value.readyMs);
    };
    for (let i = 0; i <= N; i++) {
      // Each sample starts on a settled machine (a fresh Chromium keeps both cores busy for a
      // while after DevTools answers), and the order alternates.
      for (const step of i % 2 === 0 ? [viaDaemon, byHand] : [byHand, viaDaemon]) {
        await sleep(SETTLE_MS);
        await step();
      }
      if (i === 0) {
        for (const a of [daemonTotal, daemonLaunch, handTotal, handLaunch]) a.length = 0; // warm-up
        continue;
      }
      collectPhases(d.logs.slice(-60), phases, phaseSeen);
      progress(`restart ${i}/${N}: browserd ${daemonTotal.at(-1)?.toFixed(0)} ms, by hand ${handTotal.at(-1)?.toFixed(0)} ms`);
    }
    progress(`browserd phases, p50 ms: ${Object.entries(phases).map(([k, v]) => `${k} ${median(v).toFixed(1)}`).join(', ')}; ready ${median(daemonLaunch).toFixed(0)}`);
    return [
      {
        name: '1. restart to ready, p50',
        unit: 'ms',
        browserd: median(daemonTotal),
        peer: median(handTotal),
        peerName: 'by hand, as the agent user with the sandbox (as the daemon runs it): SIGTERM the group until gone, spawn the same binary and flags through setpriv, DevTools line + Browser.getVersion',
        note:
          `N=${N} each, interleaved (alternating order, ${SETTLE_MS} ms idle before each); p95 ${percentile(daemonTotal, 95).toFixed(0)} vs ${percentile(handTotal, 95).toFixed(0)} ms; goal: overhead under 10%. ` +
          `Against a spawn alone (no old Chromium to stop, the row below) the restart takes ${pct(median(daemonTotal), median(handLaunch))}`,
      },
      {
        name: '1. launch to ready (part of the restart), p50',
        unit: 'ms',
        browserd: daemonLaunch.length > 0 ? median(daemonLaunch) : null,
        peer: median(handLaunch),
        peerName: 'by hand, as the agent user with the sandbox: spawn until DevTools line + Browser.getVersion',
        note: "browserd's figure is the `ms` of its chromium_ready log line (spawn to ready)",
      },
    ];
  } finally {
    await hand?.stop();
    await d.cleanup();
  }
}

export const restartBench: Bench = { name: 'restart', what: '1. restart to ready vs Chromium by hand', run: benchRestart };
