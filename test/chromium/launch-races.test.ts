// Races inside a launch, through the real daemon and the real Chromium: Chromium killed while the
// ready hooks run (after it answered DevTools, before it counts as ready) fails that launch once and
// ends in restarting → ready with a new, live pid.
//
// The window is a few milliseconds in production (the download behaviour, the page tracking), too
// short to hit by timing without a race in the test; the test hook `hold-ready=<file>`
// (daemon/chromium/test-hooks.ts) adds a last ready hook that waits until <file> exists, so the
// kill lands inside the window at a known moment (after every other hook: the one that used to end
// in `ready` with no Chromium), and the file's creation lets the next launch pass.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { waitBrowser } from '../kit/browser.js';
import { tempDir } from '../kit/cleanup.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';
import { isAlive } from '../kit/procs.js';

const release = path.join(tempDir('browserd-hold-'), 'release');
let d: Daemon;

before(async () => {
  d = await startDaemon({ autostart: true, env: { BROWSERD_TEST_HOOKS: `hold-ready=${release}` } });
});
after(async () => {
  await d.cleanup();
});

test('Chromium killed during the ready hooks: that launch fails once, then restarting → ready with a new, live pid', async () => {
  const held = await d.waitLog((l) => l.event === 'chromium_ready_held');
  const oldPid = held.chromium_pid as number;
  const from = d.logs.indexOf(held);
  process.kill(oldPid, 'SIGKILL');
  await waitBrowser(d, (s) => s.state === 'restarting', 'restarting');
  writeFileSync(release, ''); // the next launch's hooks pass at once
  const ready = await d.waitLog((l) => d.logs.indexOf(l) > from && l.event === 'chromium_ready');
  assert.notEqual(ready.chromium_pid, oldPid, 'the killed Chromium is never announced ready');
  const s = await waitBrowser(d, (b) => b.state === 'ready', 'ready');
  assert.equal(s.chromium.pid, ready.chromium_pid);
  assert.ok(isAlive(s.chromium.pid as number), 'the ready pid is alive');
  assert.equal(s.chromium.last_exit?.signal, 'SIGKILL');
  assert.equal(s.chromium.last_exit?.reason, 'launch failed');
  assert.equal(s.chromium.restarts, 1);
  const rz = await fetch(`${d.url}/readyz`);
  assert.equal(rz.status, 200);
  await rz.text();
  // One failure, counted once: one restart scheduled, as the first crash.
  const restarts = d.logs.slice(from).filter((l) => l.event === 'chromium_restart' && typeof l.backoff_ms === 'number');
  assert.deepEqual(
    restarts.map((l) => l.crashes),
    [1],
  );
});
