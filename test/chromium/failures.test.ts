// How the supervisor fails, through the real daemon: a crash loop (a "binary" that exits at once)
// → `failed` with a clear reason, POST /restart trying afresh and bringing it back once the cause
// is gone; a readiness deadline (a binary that never announces DevTools); managed policy that
// turns DevTools off; a kernel where the sandbox cannot start (and the opt-out); a binary that
// vanished; headful without a display (the real Chromium).
import assert from 'node:assert/strict';
import { chmodSync, copyFileSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';
import { expectError } from '../helpers/http.js';
import { profileDir } from '../helpers/chromium.js';
import { browser, waitBrowser, type Snapshot } from '../kit/browser.js';
import { tempDir } from '../kit/cleanup.js';
import { fixtures, startDaemon, type Daemon } from '../kit/daemon.js';
import { isAlive, processesNaming } from '../kit/procs.js';

const daemons: Daemon[] = [];
const dirs: string[] = [];
after(async () => {
  await Promise.all(daemons.map((d) => d.cleanup()));
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function daemon(env: Record<string, string>, autostart = true): Promise<Daemon> {
  const d = await startDaemon({ autostart, env });
  daemons.push(d);
  return d;
}

const failed = (s: Snapshot): boolean => s.state === 'failed';

test('crash loop → failed with a clear reason; POST /restart tries afresh; once the cause is gone it is ready', async () => {
  const d = await daemon({
    BROWSERD_CHROMIUM: path.join(fixtures, 'chromium-crash.sh'),
    BROWSERD_RESTART_BACKOFF_MS: '20',
    BROWSERD_CRASH_LOOP_MAX: '3',
  });
  const s = await waitBrowser(d, failed, 'failed');
  assert.match(s.reason ?? '', /^crash loop: Chromium crashed or failed to start 3 times within 60 s/);
  assert.match(s.reason ?? '', /exited with code 1 before it was ready/);
  assert.match(s.reason ?? '', /fixture: simulated start-up crash/, 'the gist of the last stderr lines');
  assert.equal(s.chromium.pid, null);
  assert.equal(s.chromium.last_exit?.code, 1);
  assert.equal(s.chromium.last_exit?.reason, 'launch failed');
  const rz = await expectError(await fetch(`${d.url}/readyz`), 503, 'browser_unavailable');
  assert.match(String(rz.message), /^Chromium failed: crash loop/);
  const launches = d.logs.filter((l) => l.event === 'chromium_launched').length;
  assert.equal(launches, 3);
  assert.deepEqual(
    d.logs.filter((l) => l.event === 'chromium_restart').map((l) => l.backoff_ms),
    [20, 40],
    'exponential backoff between the attempts',
  );
  assert.ok(d.logs.some((l) => l.event === 'chromium_failed'));

  // A fresh start: the crash history is cleared, so it tries the full loop again.
  const failedAt = d.logs.length;
  const body = await expectError(await d.fetch('/browsers/local/restart', { method: 'POST' }), 503, 'browser_unavailable');
  assert.match(String(body.message), /simulated start-up crash/);
  await d.waitLog((l) => d.logs.indexOf(l) > failedAt && l.event === 'chromium_failed');
  assert.equal(d.logs.slice(failedAt).filter((l) => l.event === 'chromium_launched').length, 3);

  // The cause goes away (the fixture now runs the real Chromium): POST /restart brings it back.
  writeFileSync(path.join(d.agentDir, 'fixture-allow-start'), '');
  const res = await d.fetch('/browsers/local/restart', { method: 'POST' });
  assert.equal(res.status, 200);
  const ok = (await res.json()) as Snapshot;
  assert.equal(ok.state, 'ready');
  assert.equal(ok.reason, null);
  assert.match(ok.chromium.version ?? '', /Chrome\//);
  const rz2 = await fetch(`${d.url}/readyz`);
  assert.equal(rz2.status, 200);
  await rz2.text();
  const exit = await d.stop();
  assert.equal(exit.code, 0);
  assert.deepEqual(processesNaming(profileDir(d)), []);
});

test('a binary that never announces DevTools: the readiness deadline ends it, and its group is gone', async () => {
  const d = await daemon({
    BROWSERD_CHROMIUM: path.join(fixtures, 'chromium-silent.sh'),
    BROWSERD_READY_TIMEOUT_MS: '1000',
    BROWSERD_CRASH_LOOP_MAX: '1',
  });
  const s = await waitBrowser(d, failed, 'failed');
  assert.match(s.reason ?? '', /did not answer Browser.getVersion on its DevTools pipe within 1000 ms/);
  assert.match(s.reason ?? '', /fixture: running without DevTools/);
  const launched = d.logs.find((l) => l.event === 'chromium_launched');
  assert.ok(launched);
  assert.equal(isAlive(launched.pid as number), false);
  assert.equal(s.chromium.last_exit?.signal, 'SIGTERM');
});

test('managed policy that turns DevTools off: failed at once, naming the policy and its file, no launch', async () => {
  const policyDir = tempDir();
  dirs.push(policyDir);
  mkdirSync(policyDir, { recursive: true });
  writeFileSync(path.join(policyDir, 'corp.json'), JSON.stringify({ RemoteDebuggingAllowed: false }));
  const d = await daemon({ BROWSERD_POLICY_DIR: policyDir });
  const s = await waitBrowser(d, failed, 'failed');
  assert.match(s.reason ?? '', new RegExp(`RemoteDebuggingAllowed=false in ${path.join(policyDir, 'corp.json')}`));
  assert.ok(!d.logs.some((l) => l.event === 'chromium_launched'), 'Chromium is not launched into a hang');

  writeFileSync(path.join(policyDir, 'corp.json'), JSON.stringify({ DeveloperToolsAvailability: 2 }));
  const body = await expectError(await d.fetch('/browsers/local/restart', { method: 'POST' }), 503, 'browser_unavailable');
  assert.match(String(body.message), /DeveloperToolsAvailability=2/);
  assert.equal((await browser(d)).state, 'failed');
});

test('a kernel where the sandbox cannot start: failed at once naming the kernel setting and the opt-out; opted out, it runs with a warning at every launch', async () => {
  const bin = path.join(fixtures, 'chromium-no-sandbox.sh');
  const d = await daemon({ BROWSERD_CHROMIUM: bin });
  const s = await waitBrowser(d, failed, 'failed');
  assert.match(s.reason ?? '', /sandbox cannot start: it needs user namespaces for unprivileged users \(sysctl kernel\.unprivileged_userns_clone=1/);
  assert.match(s.reason ?? '', /BROWSERD_CHROMIUM_SANDBOX=false/);
  assert.doesNotMatch(s.reason ?? '', /^crash loop/, 'permanent: not retried into a crash loop');

  const off = await daemon({ BROWSERD_CHROMIUM: bin, BROWSERD_CHROMIUM_SANDBOX: 'false' });
  await waitBrowser(off, (b) => b.state === 'ready', 'ready');
  await off.waitLog((l) => l.event === 'chromium_sandbox_off');
  assert.equal((await off.fetch('/browsers/local/restart', { method: 'POST' })).status, 200);
  await waitBrowser(off, (b) => b.state === 'ready', 'ready again');
  assert.equal(off.logs.filter((l) => l.event === 'chromium_sandbox_off').length, 2, 'a warning at every launch');
});

test('autostart off: stopped, /readyz says how to start; a binary that vanished is failed at once with ENOENT', async () => {
  const binDir = tempDir();
  dirs.push(binDir);
  const bin = path.join(binDir, 'chromium');
  copyFileSync(path.join(fixtures, 'chromium-crash.sh'), bin);
  chmodSync(bin, 0o755);
  const d = await daemon({ BROWSERD_CHROMIUM: bin }, false);
  const s = await browser(d);
  assert.equal(s.state, 'stopped');
  assert.equal(s.chromium.pid, null);
  const rz = await expectError(await fetch(`${d.url}/readyz`), 503, 'browser_unavailable');
  assert.match(String(rz.message), /not started \(BROWSERD_BROWSER_AUTOSTART=false\); POST \/browsers\/\{id\}\/restart starts it/);

  rmSync(bin);
  const body = await expectError(await d.fetch('/browsers/local/restart', { method: 'POST' }), 503, 'browser_unavailable');
  assert.match(String(body.message), /does not exist \(ENOENT\)/);
  const now = await browser(d);
  assert.equal(now.state, 'failed');
  assert.match(now.reason ?? '', /BROWSERD_CHROMIUM/);
  assert.equal(d.logs.filter((l) => l.event === 'chromium_restart' && typeof l.crashes === 'number').length, 0, 'no retries of a permanent cause');
});

test('headful without a display: the real Chromium fails with the "no display" message', async () => {
  const d = await daemon({ BROWSERD_HEADLESS: 'false', BROWSERD_CRASH_LOOP_MAX: '1' });
  const s = await waitBrowser(d, failed, 'failed');
  assert.match(s.reason ?? '', /no display: headful Chromium \(BROWSERD_HEADLESS=false\) needs an X server/);
  assert.deepEqual(processesNaming(profileDir(d)), []);
});
