// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// sd_notify without Chromium: READY=1 right after `listening` when Chromium is not autostarted,
// an abstract-namespace NOTIFY_SOCKET, WATCHDOG_PID naming another process, a daemon started
// without notify-exec.pl, and notify-exec.pl's own behaviour.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { notifyExec, NotifyReceiver, startUnderSystemd } from '../helpers/notify.js';
import { tempDir } from '../kit/cleanup.js';

test('without Chromium autostart, READY=1 follows `listening` (abstract socket; WATCHDOG_PID of another process: no pings)', async (t) => {
  const receiver = await NotifyReceiver.start(`@browserd-test-${randomUUID()}`);
  t.after(() => receiver.close());
  const daemon = await startUnderSystemd({
    systemdEnv: { NOTIFY_SOCKET: receiver.address, WATCHDOG_USEC: '100000', WATCHDOG_PID: '1' },
  });
  t.after(() => daemon.cleanup());

  await receiver.waitFor((ms) => ms.some((m) => m.fields.READY === '1'), 'READY=1');
  const ready = receiver.messages[receiver.indexOf('READY', '1')];
  assert.equal(ready?.fields.STATUS, `chromium not autostarted (BROWSERD_BROWSER_AUTOSTART=false); API on ${daemon.url.slice('http://'.length)}`);
  assert.equal(ready?.pid, daemon.pid);
  await daemon.waitLog((l) => l.event === 'systemd_ready'); // stdout may come after the datagram
  const at = (event: string): number => daemon.logs.findIndex((l) => l.event === event);
  assert.ok(at('listening') >= 0 && at('listening') < at('systemd_ready'));

  const off = daemon.logs.find((l) => l.event === 'watchdog_off');
  assert.equal(off?.watchdog_pid, '1');
  assert.equal(daemon.logs.find((l) => l.event === 'systemd')?.watchdog_ms, null);

  assert.equal((await daemon.stop()).code, 0);
  await receiver.waitFor((ms) => ms.some((m) => m.fields.STOPPING === '1'), 'STOPPING=1', 10_000);
  // The watchdog, when on, pings at once and then every 50 ms here: none came in all this time.
  assert.equal(receiver.count('WATCHDOG'), 0);
});

test('NOTIFY_SOCKET without notify-exec.pl: one clear error line, and the daemon still serves', async (t) => {
  const daemon = await startUnderSystemd({ viaWrapper: false, systemdEnv: { NOTIFY_SOCKET: '/run/browserd-test-nonexistent.sock' } });
  t.after(() => daemon.cleanup());
  const line = await daemon.waitLog((l) => l.event === 'sd_notify_unavailable');
  assert.equal(line.level, 50);
  assert.match(String(line.msg), /BROWSERD_NOTIFY_FD is not: start browserd through systemd\/notify-exec\.pl/);
  const res = await daemon.fetch('/healthz');
  assert.equal(res.status, 200);
  assert.equal(daemon.logs.filter((l) => l.event === 'systemd').length, 0);
});

test('notify-exec.pl: without NOTIFY_SOCKET it only execs (same pid, no descriptor)', () => {
  const env = { PATH: process.env.PATH };
  const res = spawnSync('perl', [notifyExec, '/bin/sh', '-c', 'echo "$$ ${BROWSERD_NOTIFY_FD-unset}"'], { env, encoding: 'utf8' });
  assert.equal(res.status, 0, res.stderr);
  assert.equal(res.stdout.trim(), `${res.pid} unset`);
});

test('notify-exec.pl: passes a socket descriptor that survives exec, in the same process', async (t) => {
  const dir = tempDir('browserd-notify-exec-');
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const receiver = await NotifyReceiver.start(path.join(dir, 'n.sock'));
  t.after(() => receiver.close());
  const script = 'fd=$BROWSERD_NOTIFY_FD; echo "$$ $(readlink /proc/$$/fd/$fd)"; printf "STATUS=from sh" >&"$fd"';
  const res = spawnSync('perl', [notifyExec, '/bin/bash', '-c', script], { env: { PATH: process.env.PATH, NOTIFY_SOCKET: receiver.address }, encoding: 'utf8' });
  assert.equal(res.status, 0, res.stderr);
  assert.match(res.stdout.trim(), new RegExp(`^${res.pid} socket:\\[\\d+\\]$`));
  await receiver.waitFor((ms) => ms.length === 1, 'the datagram written by the exec’d program');
  assert.equal(receiver.messages[0]?.fields.STATUS, 'from sh');
  assert.equal(receiver.messages[0]?.pid, res.pid);
});

test('notify-exec.pl: an unreachable NOTIFY_SOCKET fails the start at once, naming it', () => {
  const sock = '/run/browserd-test-nonexistent.sock';
  const res = spawnSync('perl', [notifyExec, '/bin/true'], { env: { PATH: process.env.PATH, NOTIFY_SOCKET: sock }, encoding: 'utf8' });
  assert.notEqual(res.status, 0);
  assert.match(res.stderr, new RegExp(`cannot connect to NOTIFY_SOCKET=${sock}`));
});
