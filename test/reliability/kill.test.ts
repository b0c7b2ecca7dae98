// @long: one of the slowest files (10 s or more alone), started first by test/run.mjs.
// kill -9 of the daemon, over and over on one state dir, at moments drawn in a seeded order, with random
// delays (0–300 ms) after the work in flight began. The scenarios (how many kills each):
//   - launch (6): while Chromium launches: the start before it is killed 0–300 ms after `listening`,
//     before its Chromium is ready (the diagnostic line says the state it was in);
//   - activation (4): while an extension upload activates (Chromium restarts with it);
//   - restart (5): while a POST /browsers/local/restart is in flight;
//   - serving (3): while Chromium is ready and nothing else runs.
// Before every kill, whatever the moment: three processes just spawned (their groups in the journal)
// and a proxy write in flight. After every kill: within 15 s nothing names the Chromium profile any
// more (a pipe-mode Chromium ends with its daemon); the next start ends every recorded process group
// before it listens; it has exactly the extensions and proxies last acknowledged (an operation whose
// answer never came may have happened or not; nothing else may differ); and it becomes ready (every
// start, but one the next round kills while it launches: the start after that one becomes ready
// instead; the last start always does).
// One daemon per kill is the least this can cost: a kill -9 ends the daemon and its Chromium. So the
// launches are where the time goes: a launch kill costs none (its Chromium never gets to ready), every
// other kill one. It was 20 kills and 20 launches, of which one landed in a launch (the start before
// a `launch` kill was waited ready, so it killed a ready Chromium) and 4 right after spawns: 18 kills
// and 13 launches now, every scenario as often or more (spawns before all 18).
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { parseJournal } from '../../daemon/processes/groups/journal.js';
import { readFileSync } from 'node:fs';
import { livingGroups } from '../../daemon/core/process/group.js';
import { indexed, installedList, upload } from '../helpers/extensions.js';
import { fixtureZip } from '../helpers/zip.js';
import { browser, waitBrowser } from '../kit/browser.js';
import { tempDir } from '../kit/cleanup.js';
import { agentDirOf, startDaemon, type Daemon } from '../kit/daemon.js';
import { processesNaming } from '../kit/procs.js';
import { until } from '../kit/wait.js';

const SEED = 0xc0ffee;
type Moment = 'launch' | 'activation' | 'restart' | 'serving';
const COUNTS: Record<Moment, number> = { launch: 6, activation: 4, restart: 5, serving: 3 };

function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Every moment as often as COUNTS says, in an order drawn from `rand` (Fisher–Yates). */
function plan(rand: () => number): Moment[] {
  const moments = (Object.entries(COUNTS) as [Moment, number][]).flatMap(([m, n]) => Array.from({ length: n }, () => m));
  for (let i = moments.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [moments[i], moments[j]] = [moments[j] as Moment, moments[i] as Moment];
  }
  return moments;
}

/** What a client was told, and what it asked for without an answer (either outcome is right for those). */
interface Expected {
  proxies: Set<string>;
  maybeProxies: Set<string>;
  extensions: Set<string>;
  maybeExtensions: Set<string>;
}

function journalGroups(stateDir: string): number[] {
  try {
    return parseJournal(readFileSync(path.join(stateDir, 'process-groups.log'), 'utf8')).entries.map((e) => e.pgid);
  } catch {
    return [];
  }
}

async function checkState(d: Daemon, want: Expected, round: number): Promise<void> {
  const proxies = ((await (await d.fetch('/proxies?limit=1000')).json()) as { name?: string }[]).map((p) => p.name ?? '');
  for (const name of want.proxies) assert.ok(proxies.includes(name), `round ${round}: acknowledged proxy ${name} lost`);
  for (const name of proxies) assert.ok(want.proxies.has(name) || want.maybeProxies.has(name), `round ${round}: proxy ${name} was never asked for`);
  const extensions = (await installedList(d)).map((e) => e.name);
  for (const name of want.extensions) assert.ok(extensions.includes(name), `round ${round}: acknowledged extension ${name} lost: ${extensions.join()}`);
  for (const name of extensions) assert.ok(want.extensions.has(name) || want.maybeExtensions.has(name), `round ${round}: extension ${name} was never asked for`);
  // What is there now is what the next round expects.
  want.proxies = new Set(proxies);
  want.extensions = new Set(extensions);
  want.maybeProxies.clear();
  want.maybeExtensions.clear();
}

const moments = plan(prng(SEED));

test(`kill -9 at ${moments.length} moments (${Object.entries(COUNTS).map(([m, n]) => `${n} ${m}`).join(', ')}): nothing left behind, the next start ready, the acknowledged state kept`, { timeout: 600_000 }, async (t) => {
  const rand = prng(SEED ^ 0x5eed);
  const stateDir = tempDir('browserd-kill-');
  const profile = path.join(agentDirOf(stateDir), 'chromium-profile');
  const want: Expected = { proxies: new Set(), maybeProxies: new Set(), extensions: new Set(), maybeExtensions: new Set() };
  let d = await startDaemon({ autostart: true, stateDir });
  let launchesKilledEarly = 0;
  try {
    for (const [round, moment] of moments.entries()) {
      const delay = Math.floor(rand() * 300);
      // A start the round does not kill while it launches becomes ready first.
      if (moment !== 'launch') await waitBrowser(d, (s) => s.state === 'ready', `ready after round ${round - 1}`);
      // Every kill comes right after spawns: their groups are in the journal.
      for (let i = 0; i < 3; i++) {
        const res = await d.fetch('/browsers/local/process/spawn', { method: 'POST', json: { command: 'sh', args: ['-c', 'sleep 600 & sleep 600'] } });
        await res.arrayBuffer();
      }
      // Proxy writes in flight at every moment.
      const proxyName = `p${round}`;
      want.maybeProxies.add(proxyName);
      const proxyWrite = d
        .fetch('/proxies', { method: 'POST', json: { name: proxyName, type: 'custom', protocol: 'http', config: { host: '127.0.0.1', port: 9 } } })
        .then(async (r) => {
          if (r.status === 201) want.proxies.add(proxyName);
          await r.arrayBuffer();
        })
        .catch(() => undefined);
      let work: Promise<unknown> = Promise.resolve();
      if (moment === 'activation') {
        const name = `ext${round % 3}`;
        want.maybeExtensions.add(name);
        work = upload(d, indexed([[name, fixtureZip('mv3-worker')]]))
          .then(async (r) => {
            if (r.status === 200) want.extensions.add(name);
            await r.arrayBuffer();
          })
          .catch(() => undefined);
      } else if (moment === 'restart') {
        work = d.fetch('/browsers/local/restart', { method: 'POST' }).catch(() => undefined);
      }
      await new Promise((r) => setTimeout(r, delay));
      const state = moment === 'launch' ? (await browser(d)).state : moment;
      if (moment === 'launch' && state !== 'ready') launchesKilledEarly++;
      const recorded = journalGroups(stateDir);
      d.proc.kill('SIGKILL');
      await d.waitExit();
      await Promise.all([proxyWrite, work]);
      // A pipe-mode Chromium and its crashpad handlers end with the daemon, by themselves (the bound is
      // for a loaded 2-core machine, where the exit of a dozen processes can take seconds).
      await until(`round ${round} (${moment}): nothing naming the profile`, () => processesNaming(profile).length === 0, 15_000);
      d = await startDaemon({ autostart: true, stateDir });
      // The recorded groups were ended before `listening`.
      assert.ok(recorded.length >= 3, `round ${round} (${moment}): the spawns' groups are in the journal`);
      assert.deepEqual([...(await livingGroups(recorded))], [], `round ${round} (${moment}): recorded groups alive`);
      // The stores' state is there at `listening`, before Chromium is ready.
      await checkState(d, want, round);
      t.diagnostic(`round ${round}: ${moment} after ${delay} ms (browser ${state}); ${recorded.length} recorded groups ended; ${want.proxies.size} proxies, ${want.extensions.size} extensions kept`);
    }
    await waitBrowser(d, (s) => s.state === 'ready', `ready after round ${moments.length - 1}`);
    await checkState(d, want, moments.length);
    t.diagnostic(`${launchesKilledEarly} of ${COUNTS.launch} launch kills landed before Chromium was ready`);
  } finally {
    await d.cleanup();
  }
});
