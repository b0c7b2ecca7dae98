// 2. Live activation: an upload of the small MV3 fixture (fixtures/extensions/mv3-worker, zipped
// in memory) until the answer, vs the bare Extensions.loadUnpacked on a hand-started Chromium
// until the extension's service worker target appears (Target.setDiscoverTargets events on one
// open connection). Each sample installs a fresh extension (a new name, a new folder by hand) and
// removes it afterwards, untimed, so every sample starts from the same set. A second peer has the
// daemon's guarantee (the worker's top-level script has run, so its listeners are in place): on its
// own connection to the same hand Chromium, auto-attach to service workers (not paused), then
// loadUnpacked, and in the worker's session one Runtime.evaluate that answers once the worker is
// past `parsed` — the most direct way found to learn that from outside (see bench/ANALYSIS.md).
// 3. Restart and policy activation, end to end (upload until the answer): the restart path forced
// by the test hook fail-live-activation, and the policy path forced by a managed policy file
// `ExtensionInstallBlocklist: ["*"]` (present only while it runs). Their floor: a hand restart of
// Chromium with --load-extension until the service worker target appears.
import { cpSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { CdpClient } from '../../daemon/cdp/client.js';
import { fixtureZip } from '../../test/helpers/zip.js';
import { TargetWatch } from '../../test/kit/browser.js';
import { onCleanup, tempDir } from '../../test/kit/cleanup.js';
import { fixtures } from '../../test/kit/daemon.js';
import { until } from '../../test/kit/wait.js';
import { daemonFlags, startChromium, type HandChromium } from '../chromium.js';
import { startDaemon, type Daemon } from '../daemon.js';
import { median, percentile, progress, readyDaemon, timed, type Bench, type Row } from '../lib.js';

const LIVE_N = 50;
/** Idle time before each sample (the removal of the previous extension settles). */
const LIVE_SETTLE_MS = 200;
/** Idle time before each restart sample. */
const RESTART_SETTLE_MS = 1000;
const RESTART_N = 5;
const POLICY_N = 3;
const FIXTURE = 'mv3-worker';
const POLICY_DIR = '/etc/chromium/policies/managed';
/** Keeps a policy-mode Chromium (background networking on) from reaching anything but loopback. */
const LOOPBACK_ONLY = '--host-resolver-rules="MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"';

/** The worker's state once past `parsed` (its top-level script has run), or at its next change. */
const PAST_PARSED = `new Promise((resolve) => {
  const sw = self.serviceWorker;
  if (!sw || sw.state !== 'parsed') resolve(sw ? sw.state : 'activated');
  else sw.addEventListener('statechange', () => resolve(sw.state), { once: true });
})`;

interface UploadAnswer {
  extensions: { name: string; id: string; activation: string }[];
  chromium: { restarted: boolean; ready_ms: number };
}

async function upload(d: Daemon, name: string, zip: Buffer): Promise<UploadAnswer> {
  const form = new FormData();
  form.append('extensions[][name]', name);
  form.append('extensions[][zip_file]', new Blob([zip], { type: 'application/zip' }), `${name}.zip`);
  return d.call<UploadAnswer>('/browsers/local/extensions', { method: 'POST', body: form });
}

async function remove(d: Daemon, name: string): Promise<void> {
  await d.call(`/browsers/local/extensions/${name}`, { method: 'DELETE' }, 204);
}

export async function benchActivationLive(): Promise<Row[]> {
  const zip = fixtureZip(FIXTURE);
  const work = tempDir('browserd-bench-live-');
  const d = await readyDaemon();
  let hand: HandChromium | null = null;
  let cdp: CdpClient | null = null;
  let second: CdpClient | null = null;
  try {
    hand = await startChromium(daemonFlags(path.join(work, 'profile')));
    cdp = await CdpClient.overWebSocket(hand.wsUrl);
    const watch = await TargetWatch.start(cdp);
    const cdp2 = await CdpClient.overWebSocket(hand.wsUrl);
    second = cdp2;

    const ours: number[] = [];
    const locked: number[] = [];
    const theirs: number[] = [];
    const ran: number[] = [];
    const conn = cdp;
    const viaDaemon = async (i: number): Promise<void> => {
      const name = `bench-live-${i}`;
      const r = await timed(() => upload(d, name, zip));
      const got = r.value.extensions[0];
      if (got?.activation !== 'live') throw new Error(`upload ${i} was activated ${got?.activation}`);
      const activated = await d.waitLog((l) => l.event === 'extension_activated' && l.name === name, 5000);
      await remove(d, name);
      ours.push(r.ms);
      if (typeof activated.ms === 'number') locked.push(activated.ms);
    };
    const bare = async (i: number): Promise<void> => {
      const dir = path.join(work, `bench-live-${i}`);
      cpSync(path.join(fixtures, 'extensions', FIXTURE), dir, { recursive: true });
      const h = await timed(async () => {
        const { id } = await conn.send('Extensions.loadUnpacked', { path: dir });
        await watch.worker(id);
        return id;
      });
      await conn.send('Extensions.uninstall', { id: h.value });
      watch.forget(h.value);
      rmSync(dir, { recursive: true, force: true });
      theirs.push(h.ms);
    };
    const scriptRan = async (i: number): Promise<void> => {
      const dir = path.join(work, `bench-live-ran-${i}`);
      cpSync(path.join(fixtures, 'extensions', FIXTURE), dir, { recursive: true });
      const sessions = new Map<string, string>(); // worker URL → session
      let wanted: { prefix: string; resolve: (sessionId: string) => void } | null = null;
      const off = cdp2.on('Target.attachedToTarget', ({ sessionId, targetInfo }) => {
        if (targetInfo.type !== 'service_worker') return;
        sessions.set(targetInfo.url, sessionId);
        if (wanted !== null && targetInfo.url.startsWith(wanted.prefix)) wanted.resolve(sessionId);
      });
      try {
        await cdp2.send('Target.setAutoAttach', { autoAttach: true, waitForDebuggerOnStart: false, flatten: true, filter: [{ type: 'service_worker', exclude: false }] });
        const h = await timed(async () => {
          const { id } = await cdp2.send('Extensions.loadUnpacked', { path: dir });
          const prefix = `chrome-extension://${id}/`;
          const sessionId = [...sessions].find(([url]) => url.startsWith(prefix))?.[1] ?? (await new Promise<string>((resolve) => (wanted = { prefix, resolve })));
          const r = await cdp2.send('Runtime.evaluate', { expression: PAST_PARSED, awaitPromise: true, returnByValue: true }, { sessionId });
          if (r.exceptionDetails || r.result.value === 'parsed') throw new Error(`worker of ${id}: ${JSON.stringify(r.exceptionDetails ?? r.result.value)}`);
          return id;
        });
        await cdp2.send('Target.setAutoAttach', { autoAttach: false, waitForDebuggerOnStart: false, flatten: true });
        await cdp2.send('Extensions.uninstall', { id: h.value });
        ran.push(h.ms);
      } finally {
        off();
        rmSync(dir, { recursive: true, force: true });
      }
    };
    for (let i = 0; i <= LIVE_N; i++) {
      const steps = [viaDaemon, bare, scriptRan];
      for (const step of i % 2 === 0 ? steps : steps.reverse()) {
        await sleep(LIVE_SETTLE_MS);
        await step(i);
      }
      if (i === 0) {
        for (const a of [ours, locked, theirs, ran]) a.length = 0; // warm-up
        continue;
      }
      if (i % 10 === 0) progress(`live activation ${i}/${LIVE_N}: browserd p50 ${median(ours).toFixed(0)} ms, bare p50 ${median(theirs).toFixed(0)} ms, until the script ran p50 ${median(ran).toFixed(0)} ms`);
    }
    const peerName = 'bare Extensions.loadUnpacked on a hand-started Chromium until the service worker target appears';
    const note =
      `N=${LIVE_N} each, interleaved (alternating order, ${LIVE_SETTLE_MS} ms idle before each); a fresh extension each time (removed untimed); browserd: multipart upload, unzip, manifest checks, then under the ` +
      `browser lock loadUnpacked and verification (p50 ${median(locked).toFixed(0)} ms of the total, the \`ms\` of its extension_activated log line)`;
    return [
      { name: '2. live activation, p50', unit: 'ms', browserd: median(ours), peer: median(theirs), peerName, note },
      { name: '2. live activation, p95', unit: 'ms', browserd: percentile(ours, 95), peer: percentile(theirs, 95), peerName, note: `the same ${LIVE_N} samples` },
      {
        name: '2. live activation vs the same guarantee, p50',
        unit: 'ms',
        browserd: median(ours),
        peer: median(ran),
        peerName: "by hand on the same Chromium: auto-attach to service workers, loadUnpacked, one Runtime.evaluate in the worker's session answering once it is past `parsed` (its top-level script has run)",
        note: `the same ${LIVE_N} rounds, interleaved with the two others; p95 ${percentile(ours, 95).toFixed(0)} vs ${percentile(ran, 95).toFixed(0)} ms`,
      },
    ];
  } finally {
    second?.close();
    cdp?.close();
    await hand?.stop();
    await d.cleanup();
  }
}

/** Hand restarts: stop, spawn with --load-extension, until the extension's service worker target appears. */
async function floorSamples(n: number): Promise<number[]> {
  const work = tempDir('browserd-bench-floor-');
  const ext = path.join(work, 'ext');
  cpSync(path.join(fixtures, 'extensions', FIXTURE), ext, { recursive: true });
  const args = daemonFlags(path.join(work, 'profile'), { extensionPaths: [ext] });
  let hand: HandChromium | null = await startChromium(args);
  const out: number[] = [];
  try {
    for (let i = 0; i <= n; i++) {
      await sleep(RESTART_SETTLE_MS);
      const prev: HandChromium = hand;
      hand = null;
      const t0 = performance.now();
      await prev.stop();
      hand = await startChromium(args);
      const cdp = await CdpClient.overWebSocket(hand.wsUrl);
      try {
        const worker = async (): Promise<boolean> => (await cdp.send('Target.getTargets')).targetInfos.some((t) => t.type === 'service_worker' && t.url.startsWith('chrome-extension://'));
        await until('a service worker after a hand restart with --load-extension', worker, 30_000, 5);
      } finally {
        cdp.close();
      }
      if (i > 0) out.push(performance.now() - t0);
    }
    return out;
  } finally {
    await hand?.stop();
  }
}

async function endToEnd(d: Daemon, n: number, mode: string, zip: Buffer): Promise<number[]> {
  await d.waitLog((l) => l.event === 'chromium_ready', 60_000);
  const out: number[] = [];
  for (let i = 0; i <= n; i++) {
    const name = `bench-${mode}-${i}`;
    await sleep(RESTART_SETTLE_MS);
    const r = await timed(() => upload(d, name, zip));
    const got = r.value.extensions[0];
    if (got?.activation !== mode) throw new Error(`expected activation ${mode}, got ${got?.activation}`);
    await remove(d, name);
    if (i > 0) out.push(r.ms);
    progress(`${mode} activation ${i}/${n}: ${r.ms.toFixed(0)} ms${i === 0 ? ' (warm-up)' : ''}`);
  }
  return out;
}

export async function benchActivationRestart(): Promise<Row[]> {
  const zip = fixtureZip(FIXTURE);
  const floor = await floorSamples(RESTART_N);
  const floorName = 'floor: hand restart of Chromium with --load-extension until the service worker target appears';

  let restart: number[];
  const d1 = await startDaemon({ autostart: true, env: { BROWSERD_TEST_HOOKS: 'fail-live-activation' } });
  try {
    restart = await endToEnd(d1, RESTART_N, 'restart', zip);
  } finally {
    await d1.cleanup();
  }

  // The blocklist affects every Chromium on the machine while it exists: as short as possible.
  const policyFile = path.join(POLICY_DIR, `browserd-bench-${process.pid}.json`);
  const unregister = onCleanup(() => rmSync(policyFile, { force: true }));
  let policy: number[];
  try {
    writeFileSync(policyFile, JSON.stringify({ ExtensionInstallBlocklist: ['*'] }));
    const d2 = await startDaemon({ autostart: true, env: { BROWSERD_CHROMIUM_FLAGS: LOOPBACK_ONLY } });
    try {
      policy = await endToEnd(d2, POLICY_N, 'policy', zip);
    } finally {
      await d2.cleanup();
    }
  } finally {
    rmSync(policyFile, { force: true });
    unregister();
  }
  return [
    {
      name: '3. restart activation, p50',
      unit: 'ms',
      browserd: median(restart),
      peer: median(floor),
      peerName: floorName,
      note: `N=${RESTART_N}; BROWSERD_TEST_HOOKS=fail-live-activation forces the restart path (a failed live attempt, then a Chromium restart with the whole set, verified)`,
    },
    {
      name: '3. policy activation, p50',
      unit: 'ms',
      browserd: median(policy),
      peer: median(floor),
      peerName: floorName,
      note: `N=${POLICY_N}; ExtensionInstallBlocklist ["*"] in ${POLICY_DIR} forces the policy path (CRX3 packed and served on loopback, forcelist written, Chromium restarted, the install verified)`,
    },
  ];
}

export const liveBench: Bench = { name: 'live', what: '2. live extension activation vs Extensions.loadUnpacked', run: benchActivationLive };

export const activationBench: Bench = { name: 'activation', what: '3. restart and policy activation, end to end', run: benchActivationRestart };
