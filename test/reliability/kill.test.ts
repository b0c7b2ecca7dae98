// @long: one of the slowest files (10 s or more alone), started first by test/run.mjs.
// kill -9 of the daemon at random moments — while Chromium launches, while an extension activates,
// during a restart, right after spawns, with proxy writes in flight — twenty times on one state dir
// (a fixed seed): every time, within 2 s nothing names the Chromium profile any more (a pipe-mode
// Chromium ends with its daemon), the next start ends every recorded process group before it
// listens, becomes ready, and has exactly the extensions and proxies last acknowledged (an
// operation whose answer never came may have happened or not; nothing else may differ).
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { parseJournal } from '../../daemon/processes/groups/journal.js';
import { readFileSync } from 'node:fs';
import { livingGroups } from '../../daemon/core/process/group.js';
import { indexed, installedList, upload } from '../helpers/extensions.js';
import { fixtureZip } from '../helpers/zip.js';
import { waitBrowser } from '../kit/browser.js';
import { tempDir } from '../kit/cleanup.js';
import { agentDirOf, startDaemon, type Daemon } from '../kit/daemon.js';
import { processesNaming } from '../kit/procs.js';
import { until } from '../kit/wait.js';

const ROUNDS = 20;
const SEED = 0xc0ffee;
const MOMENTS = ['launch', 'activation', 'restart', 'spawn'] as const;

function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
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

test(`kill -9 at ${ROUNDS} random moments: nothing left behind, the next start ready, the acknowledged state kept`, { timeout: 600_000 }, async () => {
  const rand = prng(SEED);
  const stateDir = tempDir('browserd-kill-');
  const profile = path.join(agentDirOf(stateDir), 'chromium-profile');
  const want: Expected = { proxies: new Set(), maybeProxies: new Set(), extensions: new Set(), maybeExtensions: new Set() };
  let d = await startDaemon({ autostart: true, stateDir });
  try {
    for (let round = 0; round < ROUNDS; round++) {
      const moment = MOMENTS[Math.floor(rand() * MOMENTS.length)] as (typeof MOMENTS)[number];
      const delay = Math.floor(rand() * 300);
      if (moment !== 'launch') await waitBrowser(d, (s) => s.state === 'ready', 'ready');
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
      } else if (moment === 'spawn') {
        for (let i = 0; i < 3; i++) {
          await d.fetch('/browsers/local/process/spawn', { method: 'POST', json: { command: 'sh', args: ['-c', 'sleep 600 & sleep 600'] } });
        }
      }
      await new Promise((r) => setTimeout(r, delay));
      const recorded = journalGroups(stateDir);
      d.proc.kill('SIGKILL');
      await d.waitExit();
      const killedAt = Date.now();
      await Promise.all([proxyWrite, work]);
      // A pipe-mode Chromium and its crashpad handlers end with the daemon, by themselves (the bound is
      // for a loaded 2-core machine, where the exit of a dozen processes can take seconds).
      await until(`round ${round} (${moment}): nothing naming the profile`, () => processesNaming(profile).length === 0, 15_000);
      d = await startDaemon({ autostart: true, stateDir });
      // The recorded groups were ended before `listening`.
      assert.deepEqual([...(await livingGroups(recorded))], [], `round ${round} (${moment}): recorded groups alive`);
      assert.ok(Date.now() - killedAt < 30_000);
      await waitBrowser(d, (s) => s.state === 'ready', `ready after round ${round}`);
      await checkState(d, want, round);
    }
  } finally {
    await d.cleanup();
  }
});
