// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The supervisor's wait for a stopped browser whose launch is queued behind another operation:
// a CDP client is never refused only because a restart runs, and a failed launch is its answer.
import assert from 'node:assert/strict';
import path from 'node:path';
import { rmSync } from 'node:fs';
import { after, test } from 'node:test';
import { profileDirOf } from '../../daemon/chromium/sweep/profile.js';
import { RESTART_OP, Supervisor } from '../../daemon/chromium/supervisor.js';
import { loadConfig } from '../../daemon/core/config.js';
import { Deadline } from '../../daemon/core/deadline.js';
import { createLogger } from '../../daemon/core/log.js';
import { createMetrics } from '../../daemon/core/metrics.js';
import { tempDir } from '../kit/cleanup.js';
import { fixtures } from '../kit/daemon.js';

const log = createLogger('silent');
const dirs: string[] = [];
const closers: (() => void | Promise<void>)[] = [];
after(async () => {
  for (const c of closers.reverse()) await c();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
const wait = (): Deadline => Deadline.in(30_000, 'test');

test('a stopped browser with a restart queued behind another operation: waitReady waits for that restart and gives its outcome', async () => {
  const stateDir = tempDir();
  const policyDir = tempDir();
  dirs.push(stateDir, `${stateDir}-agent`, policyDir);
  const config = loadConfig({
    PATH: process.env.PATH,
    BROWSERD_STATE_DIR: stateDir,
    BROWSERD_POLICY_DIR: policyDir,
    BROWSERD_CHROMIUM: path.join(fixtures, 'chromium-crash.sh'),
    BROWSERD_CRASH_LOOP_MAX: '1',
  });
  const sup = new Supervisor({ config, log, metrics: createMetrics(), profileDir: profileDirOf(config.agent.dir), tmpDir: config.chromium.tmpDir });
  let release = (): void => {};
  closers.push(() => {
    release(); // the lock's holder lets go however the test ends, so close() gets the lock
    return sup.close();
  });
  assert.equal(sup.status().state, 'stopped');
  await assert.rejects(sup.waitMux(wait(), { whileLaunchQueued: true }), /not started/, 'nothing queued: at once');

  const held = sup.lock.run('extensions', () => new Promise<void>((resolve) => (release = resolve)));
  const restart = sup.lock.run(RESTART_OP, () => sup.restartLocked('request')).catch((err: unknown) => err);
  const waiting = sup.waitMux(wait(), { whileLaunchQueued: true });
  let settled = false;
  waiting.then(
    () => (settled = true),
    () => (settled = true),
  );
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(settled, false, 'still waiting while the restart is queued');
  assert.equal(sup.status().state, 'stopped');
  // A caller holding the lock itself is not made to wait for what is queued behind it.
  await assert.rejects(sup.waitMux(wait()), /not started/);

  release();
  await held;
  // The queued restart runs the fixture, which crashes at once: its outcome is the answer.
  await assert.rejects(waiting, /crash loop.*simulated start-up crash/);
  assert.match(String(await restart), /simulated start-up crash/);
  assert.equal(sup.status().state, 'failed');
  await assert.rejects(sup.waitMux(wait(), { whileLaunchQueued: true }), /Chromium failed/, 'failed and nothing queued: at once');
});
