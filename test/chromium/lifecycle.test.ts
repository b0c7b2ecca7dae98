// The Chromium supervisor with the real Chromium, through the real daemon: start → ready, a
// crash (kill -9) → restarted with the exit recorded, requested restarts queueing in order and
// `?wait=false` → 409, the whole tree in one group, a daemon killed with SIGKILL whose Chromium
// ends with it (and a stray Chromium on the profile ended by the next daemon, even one that does
// not start Chromium), SIGTERM leaving no process
// behind even while an extension install holds the lifecycle lock, and a caller's own process
// naming the profile left alone throughout; a restart sweeping the old run's crashpad handlers in
// the background without touching the new run's. One state dir, two daemons.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { indexed, upload } from '../helpers/extensions.js';
import { expectError } from '../helpers/http.js';
import { fixtureZip } from '../helpers/zip.js';
import { profileDir } from '../helpers/chromium.js';
import { browser, waitBrowser, type Snapshot } from '../kit/browser.js';
import { tempDir } from '../kit/cleanup.js';
import { agentDirOf, startDaemon, type Daemon } from '../kit/daemon.js';
import { groupMembers, isAlive, pgidOf, processesNaming, processesWithEnv } from '../kit/procs.js';
import { until } from '../kit/wait.js';

const stateDir = tempDir();
/** Inherited by the daemon, Chromium and everything Chromium starts: finds the whole tree. */
const marker = `CHROMIUM_TEST_MARKER=${randomUUID()}`;
const env = { [marker.split('=')[0] as string]: marker.split('=')[1] };
let d: Daemon;
let second: Daemon | null = null;
/** A caller's own process on the profile (as the processes API may start): sh, its sleep and tail. */
let foreign: ChildProcess;
let foreignPids: number[] = [];

before(async () => {
  d = await startDaemon({ autostart: true, stateDir, env });
  await waitBrowser(d, ready, 'ready');
  const profile = path.join(agentDirOf(stateDir), 'chromium-profile');
  await until('Local State written', () => existsSync(path.join(profile, 'Local State')));
  // Its own process group (as the processes API gives every process), no marker: not Chromium's.
  foreign = spawn('sh', ['-c', 'sleep 600 & tail -f "$0/Local State"', profile], { detached: true, stdio: 'ignore' });
  await until('sh, sleep and tail running', () => groupMembers(foreign.pid as number).length === 3);
  foreignPids = groupMembers(foreign.pid as number);
});
after(async () => {
  await d.cleanup();
  await second?.cleanup();
  try {
    process.kill(-(foreign.pid as number), 'SIGKILL');
  } catch {
    // gone already
  }
  rmSync(stateDir, { recursive: true, force: true });
});

function ready(s: Snapshot): boolean {
  return s.state === 'ready';
}

/** Processes naming the profile, but for the caller's own. */
const chromiumOnProfile = (dir: string): number[] => processesNaming(dir).filter((pid) => !foreignPids.includes(pid));
/** Every pid a `chromium_leftover` line of `daemon` named. */
const leftoverPids = (daemon: Daemon): number[] => daemon.logs.filter((l) => l.event === 'chromium_leftover').flatMap((l) => l.pids as number[]);

test('start → ready: pid, version, the stable CDP URL, /readyz 200, lifecycle logs', async () => {
  const s = await waitBrowser(d, ready, 'ready');
  assert.equal(s.id, 'local');
  assert.equal(s.reason, null);
  assert.ok(Number.isInteger(s.chromium.pid));
  assert.match(s.chromium.version ?? '', /Chrome\/\d+\./);
  assert.equal(s.chromium.restarts, 0);
  assert.equal(s.chromium.last_exit, null);
  assert.ok(!Number.isNaN(Date.parse(s.chromium.started_at ?? '')));
  assert.equal(s.cdp_url, `${d.url.replace('http://', 'ws://')}/browsers/local/cdp`);
  assert.deepEqual(s.extensions, []);
  const rz = await fetch(`${d.url}/readyz`);
  assert.equal(rz.status, 200);
  await rz.text();

  const launched = await d.waitLog((l) => l.event === 'chromium_launched' && l.chromium_pid === s.chromium.pid);
  const flags = launched.flags as string[];
  assert.ok(flags.includes(`--user-data-dir=${profileDir(d)}`));
  assert.ok(!flags.includes('--disable-extensions'));
  const readyLine = await d.waitLog((l) => l.event === 'chromium_ready' && l.chromium_pid === s.chromium.pid);
  assert.equal(typeof readyLine.ms, 'number');
  assert.equal(readyLine.version, s.chromium.version);
  const metrics = await (await d.fetch('/metrics')).text();
  assert.match(metrics, /^browserd_chromium_ready 1$/m);
});

test('the whole tree is in one process group, but for crashpad, whose command line names the profile', async () => {
  const s = await waitBrowser(d, ready, 'ready');
  // Processes started by exec (crashpad handlers among them) show the inherited marker; zygote
  // children rewrite their environ area with their title but name the profile dir.
  const byEnv = processesWithEnv(marker, [d.pid]);
  const byProfile = chromiumOnProfile(profileDir(d));
  assert.ok(byEnv.some((p) => p.pid === s.chromium.pid), 'the marker reaches Chromium');
  assert.ok(byProfile.length >= 3, `Chromium runs several processes: ${JSON.stringify(byProfile)}`);
  const outside = [...new Set([...byEnv.map((p) => p.pid), ...byProfile])].filter((pid) => pgidOf(pid) !== s.chromium.pid && pgidOf(pid) !== null);
  for (const pid of outside) {
    // Crashpad runs in its own session by design; its database is under the profile, so the
    // post-stop sweep finds it (the stop tests assert nothing naming the profile survives).
    const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    assert.match(cmd, /chrome_crashpad_handler/, `only crashpad may run outside the group: ${cmd.slice(0, 200)}`);
    assert.ok(cmd.includes(`--database=${profileDir(d)}/`), `crashpad's database is under the profile: ${cmd.slice(0, 300)}`);
  }
});

test('kill -9 of Chromium: a new pid, ready again, the crash in last_exit, the old tree gone', async () => {
  const before = await waitBrowser(d, ready, 'ready');
  const oldPid = before.chromium.pid as number;
  process.kill(oldPid, 'SIGKILL');
  const after = await waitBrowser(d, (s) => ready(s) && s.chromium.pid !== oldPid, 'ready with a new pid');
  assert.equal(after.chromium.restarts, before.chromium.restarts + 1);
  assert.equal(after.chromium.last_exit?.signal, 'SIGKILL');
  assert.equal(after.chromium.last_exit?.code, null);
  assert.equal(after.chromium.last_exit?.reason, 'crash');
  assert.deepEqual(
    processesWithEnv(marker, [d.pid]).filter((p) => p.pgid === oldPid),
    [],
    'no process of the old group remains',
  );
  const exited = await d.waitLog((l) => l.event === 'chromium_exited' && l.chromium_pid === oldPid);
  assert.equal(exited.signal, 'SIGKILL');
  const restart = await d.waitLog((l) => l.event === 'chromium_restart' && typeof l.backoff_ms === 'number' && /SIGKILL/.test(String(l.reason)));
  assert.equal(restart.backoff_ms, 250);
  const metrics = await (await d.fetch('/metrics')).text();
  assert.match(metrics, /^browserd_chromium_restarts_total\{reason="crash"\} 1$/m);
});

test('POST /restart queues behind a running restart (each restarts again, in order); ?wait=false is 409 busy', async () => {
  const before = await waitBrowser(d, ready, 'ready');
  const logStart = d.logs.length;
  const first = d.fetch('/browsers/local/restart', { method: 'POST' });
  await d.waitLog((l) => d.logs.indexOf(l) >= logStart && l.event === 'chromium_restart' && l.reason === 'request');
  const secondReq = d.fetch('/browsers/local/restart', { method: 'POST' });
  await d.waitLog((l) => d.logs.indexOf(l) >= logStart && l.event === 'browser_lock_wait' && l.op === 'restart requested');
  await expectError(await d.fetch('/browsers/local/restart?wait=false', { method: 'POST' }), 409, 'busy');

  const r1 = await first;
  const r2 = await secondReq;
  assert.equal(r1.status, 200);
  assert.equal(r2.status, 200);
  const s1 = (await r1.json()) as Snapshot;
  const s2 = (await r2.json()) as Snapshot;
  assert.equal(s1.state, 'ready');
  assert.equal(s2.state, 'ready');
  assert.notEqual(s1.chromium.pid, before.chromium.pid);
  assert.notEqual(s2.chromium.pid, s1.chromium.pid, 'the queued request restarted again');
  assert.equal(s1.chromium.restarts, before.chromium.restarts + 1);
  assert.equal(s2.chromium.restarts, before.chromium.restarts + 2);
  assert.equal(s2.chromium.last_exit?.reason, 'restart requested');
  // Stopped by SIGTERM within the grace period, not the SIGKILL fallback. Not asserted: code 0. A
  // Chromium 156 SIGTERMed a moment after it became ready sometimes dies of SIGILL while shutting
  // down (crashpad writes a dump); measured about one run in six here.
  assert.notEqual(s2.chromium.last_exit?.signal, 'SIGKILL', JSON.stringify(s2.chromium.last_exit));
  assert.ok(s2.chromium.last_exit?.code === 0 || s2.chromium.last_exit?.code === null, `no error exit: ${JSON.stringify(s2.chromium.last_exit)}`);
  // In order: the second restart began only after the first was ready.
  const idx = (pred: (l: Record<string, unknown>) => boolean): number => d.logs.findIndex((l, i) => i >= logStart && pred(l));
  const firstReady = idx((l) => l.event === 'chromium_ready' && l.chromium_pid === s1.chromium.pid);
  const secondLaunch = idx((l) => l.event === 'chromium_launched' && l.chromium_pid === s2.chromium.pid);
  assert.ok(firstReady >= 0 && secondLaunch > firstReady, `first ready at ${firstReady}, second launched at ${secondLaunch}`);
  assert.ok(!isAlive(s1.chromium.pid as number));
});

test("a restart sweeps the old run's crashpad handlers in the background: once swept, nothing of the old run remains, the new run's are untouched, the new Chromium works", async () => {
  const before = await waitBrowser(d, ready, 'ready');
  const oldPids = chromiumOnProfile(profileDir(d));
  const oldCrashpad = oldPids.filter((pid) => pgidOf(pid) !== before.chromium.pid);
  assert.ok(oldCrashpad.length > 0, 'the old run has crashpad handlers outside its group');
  const logStart = d.logs.length;
  const r = await d.fetch('/browsers/local/restart', { method: 'POST' });
  assert.equal(r.status, 200);
  const after = (await r.json()) as Snapshot;
  const swept = await d.waitLog((l) => d.logs.indexOf(l) >= logStart && l.event === 'chromium_old_run_swept');
  assert.deepEqual(oldPids.filter(isAlive), [], 'no process of the old run remains');
  const nowOnProfile = chromiumOnProfile(profileDir(d));
  const newCrashpad = nowOnProfile.filter((pid) => pgidOf(pid) !== after.chromium.pid);
  assert.ok(newCrashpad.length > 0, "the new run's crashpad handlers run");
  assert.deepEqual((swept.pids as number[]).filter((pid) => nowOnProfile.includes(pid)), [], 'the sweep named none of the new run');
  assert.deepEqual(leftoverPids(d).filter((pid) => nowOnProfile.includes(pid)), [], 'never ended as a leftover');
  const v = await d.fetch('/browsers/local/cdp/json/version');
  assert.equal(v.status, 200);
  assert.match(((await v.json()) as { Browser: string }).Browser, /Chrome\//);
  assert.equal((await waitBrowser(d, ready, 'ready')).chromium.pid, after.chromium.pid, 'the new Chromium still runs');
});

test("a caller's process naming the profile is no Chromium: restarts neither wait for it nor end it, nor its group", async () => {
  await waitBrowser(d, ready, 'ready');
  assert.ok(d.logs.some((l) => l.event === 'chromium_restart'), 'the tests before restarted Chromium');
  assert.deepEqual(foreignPids.filter((pid) => !isAlive(pid)), [], 'sh, sleep and tail all live');
  assert.deepEqual(leftoverPids(d).filter((pid) => foreignPids.includes(pid)), [], 'never swept as a leftover');
});

test('POST /restart?wait=junk is 400 bad_request naming the parameter', async () => {
  const body = await expectError(await d.fetch('/browsers/local/restart?wait=maybe', { method: 'POST' }), 400, 'bad_request');
  assert.match(String((body.details as { message: string }[])[0]?.message), /^wait: /);
});

test('SIGKILL to the daemon: its Chromium (DevTools on a pipe) ends with it; a Chromium left on the profile anyway is ended by the next daemon before it listens, even with autostart off', async () => {
  const s = await waitBrowser(d, ready, 'ready');
  const oldPid = s.chromium.pid as number;
  const oldTree = processesWithEnv(marker, [d.pid]).map((p) => p.pid);
  assert.ok(oldTree.length >= 3 && oldTree.includes(oldPid));
  d.proc.kill('SIGKILL');
  await d.waitExit();
  // A pipe-mode Chromium reads EOF on its fd 3 and exits; its crashpad handlers follow it.
  await until('the old tree gone without a daemon', () => oldTree.every((pid) => !isAlive(pid)), 10_000);
  // A Chromium left on the profile all the same (started by hand, with a port: it outlives whoever started it).
  const stray = spawn('/usr/lib/chromium/chromium', ['--headless', '--no-sandbox', '--disable-gpu', `--user-data-dir=${profileDir(d)}`, '--remote-debugging-port=0', 'about:blank'], {
    detached: true,
    stdio: 'ignore',
    // Its temp files (ended by SIGKILL, it removes none) go to a folder removed with the test's.
    env: { ...process.env, ...env, TMPDIR: tempDir('browserd-test-stray-tmp-') },
  });
  await until('the stray Chromium running', () => chromiumOnProfile(profileDir(d)).length >= 3);
  const strayTree = chromiumOnProfile(profileDir(d));
  second = await startDaemon({
    autostart: false, // BROWSERD_BROWSER_AUTOSTART=false: no launch, yet the profile is swept
    stateDir,
    env: { ...env, BROWSERD_TEST_HOOKS: 'hold-activation=held', BROWSERD_SHUTDOWN_TIMEOUT_MS: '1000' },
  });
  // startDaemon returned at `listening`: the sweep came before it.
  const at = (event: string): number => (second as Daemon).logs.findIndex((l) => l.event === event);
  const leftover = second.logs[at('chromium_leftover')];
  assert.ok(leftover, 'the stray tree was found');
  assert.ok((leftover.pids as number[]).includes(stray.pid as number));
  assert.ok(at('chromium_leftover_ended') >= 0 && at('chromium_leftover_ended') < at('listening'), 'ended before listening');
  // Every process of the stray tree (its crashpad handlers included) is gone; the caller's is not.
  assert.deepEqual(strayTree.filter((pid) => isAlive(pid)), [], 'no process of the stray tree remains');
  assert.deepEqual(foreignPids.filter((pid) => !isAlive(pid)), [], "the caller's processes live on");
  assert.equal((await browser(second)).state, 'stopped');

  const res = await second.fetch('/browsers/local/restart', { method: 'POST' });
  assert.equal(res.status, 200);
  const s2 = (await res.json()) as Snapshot;
  assert.equal(s2.state, 'ready');
  assert.notEqual(s2.chromium.pid, oldPid);
});

test('SIGTERM while an extension install holds the lifecycle lock: the wait ends at the shutdown deadline, exit 0, no process of the tree left', async () => {
  assert.ok(second, 'the previous test started the second daemon');
  const daemon = second;
  await waitBrowser(daemon, ready, 'ready');
  assert.ok(chromiumOnProfile(profileDir(daemon)).length > 0);
  // The hook holds the lock until a release file appears (it never does here): like a long install and rollback.
  const install = upload(daemon, indexed([['held', fixtureZip('content-script')]])).catch((err: unknown) => err);
  await daemon.waitLog((l) => l.event === 'extension_activation_held');
  const exit = daemon.stop();
  const forced = await daemon.waitLog((l) => l.event === 'chromium_stop_forced', 30_000);
  assert.equal(forced.held_by, 'extensions');
  assert.equal((await exit).code, 0);
  await install;
  assert.deepEqual(chromiumOnProfile(profileDir(daemon)), []);
  await until('free of processes of this test', () => processesWithEnv(marker).length === 0);
  assert.ok(daemon.logs.some((l) => l.event === 'chromium_stopped'));
});

test("the caller's processes naming the profile outlived restarts, the next daemon's sweep and the stop; none was ever swept", () => {
  assert.deepEqual(foreignPids.filter((pid) => !isAlive(pid)), [], 'sh, sleep and tail all live');
  assert.deepEqual([...leftoverPids(d), ...leftoverPids(second as Daemon)].filter((pid) => foreignPids.includes(pid)), []);
});
