// 23. Configure (issue 43): POST /browsers/local/configure with a flag, a policy and a viewport until its
// answer (the settings checked and written, the policy file in the managed folder, one restart, Chromium
// ready with them) vs a hand restart with the same files: the same policy written to a file of its own
// in the same folder, SIGTERM to the old Chromium's group until gone, then the same binary (as the agent
// user, sandboxed) with the same flag and viewport flags until its DevTools line and Browser.getVersion.
// Each round changes all three values (two sets, alternating), so every sample applies a change. The
// daemon's bare POST …/restart is measured in the same rounds: configure's own cost over a restart.
// Interleaved (the order rotates), one warm-up round. The managed policy folder is machine-global:
// both files exist only while the case runs (a smoke run beside tests: flock /tmp/browserd-serial.lock).
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { viewportFlags } from '../../daemon/chromium/settings/viewport.js';
import { POLICIES_FILE } from '../../daemon/chromium/settings/policies.js';
import { agentTempDir } from '../../test/kit/agent.js';
import { onCleanup } from '../../test/kit/cleanup.js';
import { daemonFlags, startChromium, type HandChromium } from '../chromium.js';
import { startDaemon, type Daemon } from '../daemon.js';
import { median, percentile, progress, roundSpread, samples, timed, type Bench, type Row } from '../lib.js';

const N = samples(8);
/** Idle time before each sample (a fresh Chromium keeps the cores busy for a while). */
const SETTLE_MS = 1000;
const POLICY_DIR = '/etc/chromium/policies/managed';

/** The two sets of settings the rounds alternate between. */
const SETS = [
  { flag: '--accept-lang=de-DE,de', policies: { BookmarkBarEnabled: false }, viewport: { width: 1280, height: 720 } },
  { flag: '--accept-lang=fr-FR,fr', policies: { BookmarkBarEnabled: true }, viewport: { width: 1440, height: 900 } },
] as const;

interface ConfigureAnswer {
  chromium: { restarted: boolean; ready_ms: number };
}

export async function benchConfigure(): Promise<Row[]> {
  const handFile = path.join(POLICY_DIR, `browserd-bench-configure-${process.pid}.json`);
  const daemonFile = path.join(POLICY_DIR, POLICIES_FILE);
  const unregister = onCleanup(() => {
    rmSync(handFile, { force: true });
    rmSync(daemonFile, { force: true });
  });
  const profile = path.join(agentTempDir('browserd-bench-profile-'), 'profile');
  const handArgs = (set: (typeof SETS)[number]): string[] => [...daemonFlags(profile, { asAgent: true, extraFlags: [set.flag] }), ...viewportFlags(set.viewport, true)];
  let d: Daemon | null = null;
  let hand: HandChromium | null = null;
  try {
    d = await startDaemon({ autostart: true });
    const daemon = d;
    await daemon.waitLog((l) => l.event === 'chromium_ready', 60_000);
    writeFileSync(handFile, JSON.stringify(SETS[1].policies));
    hand = await startChromium(handArgs(SETS[1]), undefined, { asAgent: true });

    const configure: number[] = [];
    const readyMs: number[] = [];
    const restart: number[] = [];
    const byHand: number[] = [];
    let set: (typeof SETS)[number] = SETS[0];
    const viaConfigure = async (): Promise<void> => {
      const r = await timed(() => daemon.call<ConfigureAnswer>('/browsers/local/configure', { method: 'POST', json: { flags: [set.flag], policies: set.policies, viewport: set.viewport } }));
      if (!r.value.chromium.restarted) throw new Error('configure answered without a restart');
      configure.push(r.ms);
      readyMs.push(r.value.chromium.ready_ms);
    };
    const viaRestart = async (): Promise<void> => {
      restart.push((await timed(() => daemon.call('/browsers/local/restart', { method: 'POST' }))).ms);
    };
    const handRestart = async (): Promise<void> => {
      const prev = hand as HandChromium;
      hand = null;
      const h = await timed(async () => {
        await prev.stop();
        writeFileSync(handFile, JSON.stringify(set.policies));
        return startChromium(handArgs(set), undefined, { asAgent: true });
      });
      hand = h.value;
      byHand.push(h.ms);
    };
    const steps = [viaConfigure, handRestart, viaRestart];
    for (let i = 0; i <= N; i++) {
      set = SETS[i % 2] as (typeof SETS)[number];
      for (let k = 0; k < steps.length; k++) {
        await sleep(SETTLE_MS);
        await (steps[(i + k) % steps.length] as () => Promise<void>)();
      }
      if (i === 0) {
        for (const a of [configure, readyMs, restart, byHand]) a.length = 0; // warm-up
        continue;
      }
      progress(`configure ${i}/${N}: ${configure.at(-1)?.toFixed(0)} ms, by hand ${byHand.at(-1)?.toFixed(0)} ms, the daemon's bare restart ${restart.at(-1)?.toFixed(0)} ms`);
    }
    return [
      {
        name: '23. configure (flag + policy + viewport), one restart, p50',
        unit: 'ms',
        browserd: median(configure),
        peer: median(byHand),
        peerName: 'by hand, as the agent user with the sandbox: the same policy in a file of the managed folder, SIGTERM the group until gone, the same flags + the flag + the viewport flags, DevTools line + Browser.getVersion',
        note:
          `N=${N} each, interleaved (the order rotates, ${SETTLE_MS} ms idle before each), every round changes all three values; ${roundSpread(configure, byHand)}; ` +
          `p95 ${percentile(configure, 95).toFixed(0)} vs ${percentile(byHand, 95).toFixed(0)} ms; target ≤ 1.3×; the daemon's chromium.ready_ms p50 ${median(readyMs).toFixed(0)} ms; ` +
          `its bare POST …/restart in the same rounds p50 ${median(restart).toFixed(0)} ms (configure over a restart: ${(median(configure) / median(restart)).toFixed(2)}×)`,
      },
    ];
  } finally {
    await hand?.stop();
    await d?.cleanup();
    rmSync(handFile, { force: true });
    rmSync(daemonFile, { force: true });
    unregister();
  }
}

export const configureBench: Bench = { name: 'configure', what: '23. configure (flag + policy + viewport, one restart) vs a hand restart with the same files', run: benchConfigure };
