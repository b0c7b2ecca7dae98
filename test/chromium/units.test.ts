// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// Unit tests of the Chromium module's pure parts: flags, the output ring buffer, line splitting
// and rate limiting, backoff and the crash-loop window, the launch failure diagnosis, the policy
// check and the lifecycle lock.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, copyFileSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { until } from '../kit/wait.js';
import { createLogger } from '../../daemon/core/log.js';
import { backoffFor, CrashLoop } from '../../daemon/chromium/state/crash-loop.js';
import { blockingPolicy, explainLaunchFailure, stderrGist } from '../../daemon/chromium/launch/diagnose.js';
import { chromiumEnv, chromiumFlags, type FlagInputs } from '../../daemon/chromium/flags.js';
import { LaunchError } from '../../daemon/chromium/launch/launcher.js';
import { exeOf } from '../../daemon/core/process/proc.js';
import { groupMembers } from '../kit/procs.js';
import { LifecycleLock } from '../../daemon/chromium/state/lock.js';
import { LineRateLimiter, LineSplitter, RingBuffer } from '../../daemon/chromium/launch/output.js';
import { ChromiumIdentity } from '../../daemon/chromium/sweep/identity.js';
import { namesDir } from '../../daemon/chromium/sweep/profile.js';
import { BrowserdError } from '../../daemon/core/errors.js';
import { tempDir } from '../kit/cleanup.js';

const silent = createLogger('silent');

const base: FlagInputs = {
  profileDir: '/state/chromium-profile',
  headless: true,
  extraFlags: [],
  extras: { extensionPaths: [], allowBackgroundNetworking: false },
  noSandbox: false,
  proxyPort: null,
};

test('flags: the daemon owns the profile, and DevTools is a pipe, never a TCP port', () => {
  const f = chromiumFlags(base);
  assert.ok(f.includes('--user-data-dir=/state/chromium-profile'));
  assert.ok(f.includes('--remote-debugging-pipe'));
  assert.ok(!f.some((x) => x.startsWith('--remote-debugging-port') || x.startsWith('--remote-debugging-address')));
  assert.ok(f.includes('--headless'));
  // It breaks Chromium 156's network service (restarts ~20/s); crashpad is swept by the profile instead.
  assert.ok(!f.includes('--disable-crashpad-for-testing'));
});

test('flags: never --disable-extensions, in any combination', () => {
  for (const headless of [true, false]) {
    for (const noSandbox of [true, false]) {
      for (const allowBackgroundNetworking of [true, false]) {
        for (const extensionPaths of [[], ['/x/a'], ['/x/a', '/x/b']]) {
          const f = chromiumFlags({ ...base, headless, noSandbox, extras: { extensionPaths, allowBackgroundNetworking } });
          assert.ok(!f.some((x) => x === '--disable-extensions' || x.startsWith('--disable-extensions=')), f.join(' '));
          assert.ok(!f.some((x) => x.startsWith('--disable-component-extensions-with-background-pages')));
        }
      }
    }
  }
});

test('flags: --no-sandbox only on the explicit opt-out (BROWSERD_CHROMIUM_SANDBOX=false), --headless only when headless', () => {
  assert.ok(!chromiumFlags(base).includes('--no-sandbox'));
  assert.ok(chromiumFlags({ ...base, noSandbox: true }).includes('--no-sandbox'));
  assert.ok(!chromiumFlags({ ...base, headless: false }).includes('--headless'));
});

test('flags: --load-extension from the launch extras, only when there are some', () => {
  assert.ok(!chromiumFlags(base).some((x) => x.startsWith('--load-extension')));
  const f = chromiumFlags({ ...base, extras: { extensionPaths: ['/e/one', '/e/two'], allowBackgroundNetworking: false } });
  assert.ok(f.includes('--load-extension=/e/one,/e/two'));
});

test('flags: every connection goes to the forwarding proxy, loopback included, WebRTC UDP only through it', () => {
  assert.ok(!chromiumFlags(base).some((f) => f.startsWith('--proxy-server')));
  const f = chromiumFlags({ ...base, proxyPort: 4567 });
  assert.ok(f.includes('--proxy-server=http://127.0.0.1:4567'));
  assert.ok(f.includes('--proxy-bypass-list=<-loopback>'));
  assert.ok(f.includes('--force-webrtc-ip-handling-policy=disable_non_proxied_udp'));
});

test('flags: background networking is off unless a policy force-install needs it', () => {
  const off = chromiumFlags(base);
  assert.ok(off.includes('--disable-background-networking'));
  assert.ok(off.includes('--disable-component-update'));
  const on = chromiumFlags({ ...base, extras: { extensionPaths: [], allowBackgroundNetworking: true } });
  assert.ok(!on.includes('--disable-background-networking'));
  assert.ok(!on.includes('--disable-component-update'));
});

test('flags: extra flags go last, in their order', () => {
  const f = chromiumFlags({ ...base, extraFlags: ['--lang=de', '--window-size=800,600'] });
  assert.deepEqual(f.slice(-2), ['--lang=de', '--window-size=800,600']);
});

test('flags: Chromium does not inherit the daemon settings or systemd variables; its TMPDIR is in the state dir', () => {
  const env = chromiumEnv(
    { PATH: '/bin', HOME: '/root', BROWSERD_TOKEN: 'secret-secret-secret', NOTIFY_SOCKET: '/run/x', DISPLAY: ':1', XDG_CONFIG_HOME: '/root/.config', TMPDIR: '/tmp' },
    '/s/p',
    '/s/tmp',
  );
  assert.deepEqual(env, { PATH: '/bin', HOME: '/root', DISPLAY: ':1', XDG_CONFIG_HOME: '/s/p/xdg-config', TMPDIR: '/s/tmp' });
});

test('ring buffer: keeps the last lines in order, each cut to its limit', () => {
  const r = new RingBuffer(3, 5);
  assert.deepEqual(r.lines(), []);
  for (const l of ['a', 'b', 'c', 'd', 'eeeeeeeee']) r.push(l);
  assert.deepEqual(r.lines(), ['c', 'd', 'eeeee…']);
  assert.deepEqual(r.tail(2), ['d', 'eeeee…']);
  assert.deepEqual(r.tail(10), ['c', 'd', 'eeeee…']);
  assert.equal(r.seen, 5);
  assert.throws(() => new RingBuffer(0), RangeError);
});

test('line splitter: whole lines across chunks, CRLF, long lines cut, the rest at end', () => {
  const lines: string[] = [];
  const s = new LineSplitter((l) => lines.push(l), 4);
  s.write('ab');
  s.write('c\r\nde\nfghijkl');
  assert.deepEqual(lines, ['abc', 'de', 'fghi']);
  s.write('m');
  s.end();
  assert.deepEqual(lines, ['abc', 'de', 'fghi', 'jklm']);
});

test('line splitter: a multi-byte character split across chunks is decoded whole', () => {
  const lines: string[] = [];
  const s = new LineSplitter((l) => lines.push(l));
  const bytes = Buffer.from('prix 5 € ✓ 😀\nfin é', 'utf8');
  // One byte at a time: every multi-byte character (2, 3 and 4 bytes) is split.
  for (let i = 0; i < bytes.length; i++) s.write(bytes.subarray(i, i + 1));
  s.end();
  assert.deepEqual(lines, ['prix 5 € ✓ 😀', 'fin é']);
  assert.ok(!lines.join('').includes('\uFFFD'), 'no replacement characters');
});

test('rate limiter: at most N lines a second, then one report of the dropped count', () => {
  let now = 10_000;
  const out: string[] = [];
  const dropped: number[] = [];
  const r = new LineRateLimiter(2, (l) => out.push(l), (n) => dropped.push(n), () => now);
  for (const l of ['1', '2', '3', '4', '5']) r.push(l);
  assert.deepEqual(out, ['1', '2']);
  assert.deepEqual(dropped, []);
  now += 1000;
  r.push('6');
  assert.deepEqual(dropped, [3]);
  assert.deepEqual(out, ['1', '2', '6']);
  r.flush();
  assert.deepEqual(dropped, [3], 'nothing more to report');
});

test('backoff: doubles from the initial value up to the cap', () => {
  assert.deepEqual([1, 2, 3, 4, 5].map((n) => backoffFor(n, 250, 1500)), [250, 500, 1000, 1500, 1500]);
  assert.equal(backoffFor(2000, 250, 30_000), 30_000);
  assert.equal(backoffFor(3, 0, 100), 0);
});

test('crash loop: N crashes within the window is a loop; older crashes fall out of it', () => {
  let now = 0;
  const loop = new CrashLoop({ max: 3, windowMs: 60_000, initialBackoffMs: 100, maxBackoffMs: 10_000 }, () => now);
  assert.deepEqual(loop.record(), { count: 1, loop: false, backoffMs: 100 });
  now = 1000;
  assert.deepEqual(loop.record(), { count: 2, loop: false, backoffMs: 200 });
  now = 61_500; // the first two are older than the window
  assert.deepEqual(loop.record(), { count: 1, loop: false, backoffMs: 100 });
  now = 62_000;
  assert.equal(loop.record().count, 2);
  now = 63_000;
  assert.deepEqual(loop.record(), { count: 3, loop: true, backoffMs: 0 });
  loop.reset();
  assert.equal(loop.record().count, 1);
});

const ctx = { binary: '/usr/lib/chromium/chromium', profileDir: '/s/chromium-profile', policyDir: '/nonexistent-policy-dir', readyTimeoutMs: 1000 };
const at = new Date();

test('diagnosis: missing binary, profile in use, no display, timeouts, plain exits', () => {
  const enoent = explainLaunchFailure(new LaunchError('x', 'spawn', [], { errno: 'ENOENT' }), ctx);
  assert.match(enoent.message, /does not exist \(ENOENT\).*BROWSERD_CHROMIUM/);
  assert.equal(enoent.permanent, true);

  const inUse = explainLaunchFailure(new LaunchError('x', 'exit', ['some line'], { exit: { code: 21, signal: null, at } }), ctx);
  assert.match(inUse.message, /profile \/s\/chromium-profile is in use by another Chromium.*exit code 21/);
  assert.equal(inUse.permanent, false);

  const noDisplay = explainLaunchFailure(
    new LaunchError('x', 'exit', ['[1:1:1122/151821.649040:ERROR:ui/ozone/platform/x11/ozone_platform_x11.cc:257] Missing X server or $DISPLAY'], {
      exit: { code: 1, signal: null, at },
    }),
    ctx,
  );
  assert.match(noDisplay.message, /^no display: .*BROWSERD_HEADLESS=false/);

  const silent = explainLaunchFailure(new LaunchError('x', 'timeout', ['hello']), ctx);
  assert.match(silent.message, /did not answer Browser.getVersion on its DevTools pipe within 1000 ms; last stderr: "hello"/);

  const exited = explainLaunchFailure(new LaunchError('x', 'exit', [], { exit: { code: null, signal: 'SIGSEGV', at } }), ctx);
  assert.equal(exited.message, 'Chromium exited on signal SIGSEGV before it was ready');
});

test('stderr gist: the last informative lines, without D-Bus noise or the log prefix', () => {
  const lines = [
    'first',
    '[6597:6608:1122/151045.138653:ERROR:dbus/bus.cc:405] Failed to connect to the bus: no socket',
    '[6597:6608:1122/151045.138653:FATAL:thing.cc:1] it broke',
    '',
  ];
  assert.equal(stderrGist(lines), '"first" | "it broke"');
  assert.equal(stderrGist([]), '');
});

test('policy: RemoteDebuggingAllowed=false and DeveloperToolsAvailability=2 are named with their file', () => {
  const dir = tempDir();
  try {
    assert.equal(blockingPolicy(dir), null);
    writeFileSync(path.join(dir, 'a.json'), '{"ExtensionInstallForcelist": ["x"]}');
    writeFileSync(path.join(dir, 'broken.json'), '{not json');
    assert.equal(blockingPolicy(dir), null);
    writeFileSync(path.join(dir, 'b.json'), '{"DeveloperToolsAvailability": 2}');
    assert.match(blockingPolicy(dir) ?? '', /DeveloperToolsAvailability=2 in .*b\.json/);
    writeFileSync(path.join(dir, 'b.json'), '{"DeveloperToolsAvailability": 1, "RemoteDebuggingAllowed": false}');
    assert.match(blockingPolicy(dir) ?? '', /RemoteDebuggingAllowed=false in .*b\.json/);
    assert.equal(blockingPolicy(path.join(dir, 'missing')), null);
    // A timeout with a blocking policy names the policy and is permanent.
    const d = explainLaunchFailure(new LaunchError('x', 'timeout', []), { ...ctx, policyDir: dir });
    assert.equal(d.permanent, true);
    assert.match(d.message, /RemoteDebuggingAllowed=false/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('profile match: a flag value or argument naming the dir, in NUL- or space-separated command lines', () => {
  const dir = '/var/lib/browserd/chromium-profile';
  assert.ok(namesDir(`/usr/lib/chromium/chromium\0--user-data-dir=${dir}\0about:blank`, dir));
  assert.ok(namesDir(`/usr/lib/chromium/chromium --type=zygote --user-data-dir=${dir} --foo`, dir));
  assert.ok(namesDir(`x\0--log-file=${dir}/log.txt`, dir));
  assert.ok(!namesDir(`x\0--user-data-dir=${dir}2`, dir));
  assert.ok(!namesDir(`x\0--user-data-dir=/other${dir}`, dir));
});

test('Chromium identity: the binary, learned executables, helpers beside them, a wrapper; not a shell or tail naming the profile', () => {
  const id = new ChromiumIdentity('/usr/lib/chromium/chromium', null, silent);
  const zygote = { exe: '/usr/lib/chromium/chromium', argv: ['/usr/lib/chromium/chromium --type=zygote --user-data-dir=/p'] };
  assert.ok(id.matches(zygote));
  assert.ok(id.matches({ exe: '/usr/lib/chromium/chrome_crashpad_handler', argv: ['/usr/lib/chromium/chrome_crashpad_handler', '--database=/p/xdg-config/chromium/Crash Reports'] }));
  // What a caller may run on the profile: sh -c 'sleep 600 & tail -f "$0/Local State"' <profile>.
  assert.ok(!id.matches({ exe: '/usr/bin/dash', argv: ['sh', '-c', 'sleep 600 & tail -f "$0/Local State"', '/p'] }));
  assert.ok(!id.matches({ exe: '/usr/bin/tail', argv: ['tail', '-f', '/p/Local State'] }));
  assert.ok(!id.matches({ exe: '/opt/other/chrome_crashpad_handler', argv: ['x'] }), 'a helper only beside a Chromium executable');
  assert.ok(!id.matches({ exe: null, argv: ['python3', '/p/x.py'] }));

  // A wrapper script in /usr/bin: the interpreter runs it (argv[1]); what it execs is learned.
  const wrapper = new ChromiumIdentity('/usr/bin/chromium-wrapper', null, silent);
  assert.ok(wrapper.matches({ exe: '/usr/bin/dash', argv: ['/bin/sh', '/usr/bin/chromium-wrapper', '--user-data-dir=/p'] }));
  assert.ok(!wrapper.matches({ exe: '/usr/bin/dash', argv: ['sh', '-c', 'tail -f "$0/Local State"', '/p'] }));
  assert.ok(!wrapper.matches({ exe: '/usr/bin/tail', argv: ['tail', '-f', '/p/Local State'] }), 'not every file beside the binary (/usr/bin)');
  assert.ok(!wrapper.matches(zygote), 'the real binary is not known before it is learned');
});

test('Chromium identity: executables learned from a run (its --type= children) are kept for the next daemon', async () => {
  const dir = tempDir();
  try {
    const file = path.join(dir, 'chromium-executables.json');
    const real = path.join(dir, 'chromium-real');
    copyFileSync('/bin/dash', real);
    chmodSync(real, 0o755);
    // A "Chromium" (a copy of dash) leading its own group, whose child runs with --type=renderer.
    const leader = spawn(real, ['-c', '"$0" -c "sleep 60; :" --type=renderer & sleep 60; :', real], { detached: true, stdio: 'ignore' });
    try {
      const id = new ChromiumIdentity('/nonexistent/wrapper.sh', file, silent);
      const child = (): boolean => groupMembers(leader.pid as number).some((pid) => pid !== leader.pid);
      await until("the wrapper's child", child, 5000, 25);
      await id.learnFrom(leader.pid as number);
      assert.ok(id.executables().has(real));
      assert.deepEqual(JSON.parse(readFileSync(file, 'utf8')), [real]);
      const next = new ChromiumIdentity('/nonexistent/wrapper.sh', file, silent);
      assert.ok(next.matches({ exe: real, argv: ['x'] }), 'the next daemon knows it');
      // The kernel marks an executable replaced on disk (a package upgrade) " (deleted)".
      rmSync(real);
      assert.ok(readlinkSync(`/proc/${leader.pid}/exe`).endsWith(' (deleted)'));
      assert.equal(await exeOf(leader.pid as number), real);
    } finally {
      process.kill(-(leader.pid as number), 'SIGKILL');
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('lock: one holder at a time, waiters in arrival order, wait=false is 409 busy', async () => {
  const lock = new LifecycleLock();
  const order: string[] = [];
  let release!: () => void;
  const first = lock.run('first', () => new Promise<void>((r) => (release = r)).then(() => void order.push('first')));
  assert.equal(lock.heldBy, 'first');
  const second = lock.run('second', async () => void order.push('second'));
  const third = lock.run('third', async () => void order.push('third'));
  assert.equal(lock.waiting, 2);
  await assert.rejects(
    lock.run('nowait', async () => void order.push('nowait'), { wait: false }),
    (err: unknown) => err instanceof BrowserdError && err.code === 'busy' && /first/.test(err.message),
  );
  const ac = new AbortController();
  const gaveUp = lock.run('aborted', async () => void order.push('aborted'), { signal: ac.signal });
  ac.abort();
  await assert.rejects(gaveUp, (err: unknown) => err instanceof BrowserdError && err.code === 'browser_unavailable');
  release();
  await Promise.all([first, second, third]);
  assert.deepEqual(order, ['first', 'second', 'third']);
  assert.equal(lock.heldBy, null);
  // A throwing holder releases the lock too.
  await assert.rejects(lock.run('boom', async () => Promise.reject(new Error('boom'))), /boom/);
  assert.equal(await lock.run('after', async () => 42), 42);
});
