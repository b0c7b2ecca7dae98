// sd_notify with the real Chromium: the daemon is started as browserd.service starts it (through
// systemd/notify-exec.pl) against a fake NOTIFY_SOCKET made by the test. READY=1 only once the API
// listens and Chromium is ready; STATUS= on state changes; WATCHDOG=1 pings; STOPPING=1 on
// SIGTERM; every datagram carries the daemon's own pid (what NotifyAccess=main accepts).
// One daemon (one Chromium) for the whole file.
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { NotifyReceiver, startUnderSystemd } from '../helpers/notify.js';
import { tempDir } from '../kit/cleanup.js';
import { type Daemon } from '../kit/daemon.js';

const WATCHDOG_USEC = 500_000;

let dir: string;
let receiver: NotifyReceiver;
let daemon: Daemon;

before(async () => {
  dir = tempDir('browserd-notify-');
  receiver = await NotifyReceiver.start(path.join(dir, 'notify.sock'));
  daemon = await startUnderSystemd({
    autostart: true,
    systemdEnv: { NOTIFY_SOCKET: receiver.address, WATCHDOG_USEC: String(WATCHDOG_USEC) },
  });
});

after(async () => {
  await daemon?.cleanup();
  receiver?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function browser(): Promise<{ state: string; chromium: { pid: number | null } }> {
  const res = await daemon.fetch('/browsers/local');
  assert.equal(res.status, 200);
  return (await res.json()) as { state: string; chromium: { pid: number | null } };
}

test('READY=1 is sent once, only after `listening` and Chromium is ready, with its pid in STATUS', async () => {
  await receiver.waitFor((ms) => ms.some((m) => m.fields.READY === '1'), 'READY=1', 90_000);
  const readyAt = receiver.indexOf('READY', '1');
  const ready = receiver.messages[readyAt];
  const m = /^chromium ready, pid (\d+); API on (\S+)$/.exec(ready?.fields.STATUS ?? '');
  assert.ok(m, `READY=1 comes with the ready status, got ${JSON.stringify(ready?.raw)}`);

  // The daemon's own log, written in order: listening, chromium_ready, then the READY=1 it sent
  // (its stdout may reach us after the datagram: wait for the line).
  await daemon.waitLog((l) => l.event === 'systemd_ready');
  const at = (event: string): number => daemon.logs.findIndex((l) => l.event === event);
  assert.ok(at('listening') >= 0 && at('chromium_ready') >= 0 && at('systemd_ready') >= 0);
  assert.ok(at('listening') < at('systemd_ready'), 'READY=1 after listening');
  assert.ok(at('chromium_ready') < at('systemd_ready'), 'READY=1 after chromium_ready');
  assert.equal(daemon.logs.find((l) => l.event === 'chromium_ready')?.chromium_pid, Number(m[1]));
  assert.equal(`http://${m[2]}`, daemon.url);

  // Before READY=1: status lines (listening, chromium starting), and no READY.
  const before = receiver.messages.slice(0, readyAt);
  assert.ok(before.some((x) => /^chromium starting; API on /.test(x.fields.STATUS ?? '')), JSON.stringify(before.map((x) => x.raw)));
  assert.ok(before.every((x) => x.fields.READY === undefined));
  const b = await browser();
  assert.equal(b.state, 'ready');
  assert.equal(b.chromium.pid, Number(m[1]));
});

test('WATCHDOG=1 pings every WATCHDOG_USEC/2 from the daemon itself', async () => {
  await receiver.waitFor((ms) => ms.filter((x) => x.fields.WATCHDOG === '1').length >= 4, 'four WATCHDOG=1 pings', 30_000);
  const line = daemon.logs.find((l) => l.event === 'systemd');
  assert.equal(line?.watchdog_ms, WATCHDOG_USEC / 2000);
  assert.equal(line?.notify, true);
  // Every datagram so far was sent by the daemon's pid (perl exec'd node in place): systemd's
  // NotifyAccess=main accepts exactly these.
  assert.ok(receiver.messages.length > 0);
  for (const msg of receiver.messages) assert.equal(msg.pid, daemon.pid, `sender of ${JSON.stringify(msg.raw)}`);
});

test('Chromium inherits neither the notify socket nor the systemd variables', async () => {
  const { chromium } = await browser();
  assert.ok(chromium.pid !== null);
  const environ = readFileSync(`/proc/${chromium.pid}/environ`, 'latin1').split('\0');
  for (const name of ['NOTIFY_SOCKET', 'BROWSERD_NOTIFY_FD', 'WATCHDOG_USEC', 'WATCHDOG_PID']) {
    assert.ok(!environ.some((e) => e.startsWith(`${name}=`)), `${name} leaked into Chromium's environment`);
  }
  // The daemon's notify descriptor (its initial environment names it) is a socket that no
  // process of Chromium's holds.
  const daemonEnv = readFileSync(`/proc/${daemon.pid}/environ`, 'latin1').split('\0');
  const fd = daemonEnv.find((e) => e.startsWith('BROWSERD_NOTIFY_FD='))?.split('=')[1];
  assert.ok(fd !== undefined, 'notify-exec.pl passed BROWSERD_NOTIFY_FD');
  const inode = readlinkSync(`/proc/${daemon.pid}/fd/${fd}`);
  assert.match(inode, /^socket:\[\d+\]$/);
  const chromiumFds = readdirSync(`/proc/${chromium.pid}/fd`).map((f) => {
    try {
      return readlinkSync(`/proc/${chromium.pid}/fd/${f}`);
    } catch {
      return '';
    }
  });
  assert.ok(chromiumFds.length > 0);
  assert.ok(!chromiumFds.includes(inode), `Chromium holds the notify socket ${inode}`);
});

test('/metrics reports Chromium as ready', async () => {
  const res = await daemon.fetch('/metrics');
  assert.equal(res.status, 200);
  assert.match(await res.text(), /^browserd_chromium_ready 1$/m);
});

test('a Chromium restart updates STATUS= (restarting, then the new pid) and sends no second READY=1', async () => {
  const old = (await browser()).chromium.pid;
  const res = await daemon.fetch('/browsers/local/restart', { method: 'POST' });
  assert.equal(res.status, 200);
  const now = ((await res.json()) as { chromium: { pid: number } }).chromium.pid;
  assert.notEqual(now, old);
  await receiver.waitFor((ms) => ms.some((x) => x.fields.STATUS?.startsWith(`chromium ready, pid ${now};`)), `STATUS with pid ${now}`);
  const restarting = receiver.messages.findIndex((x) => x.fields.STATUS?.startsWith('chromium restarting'));
  const readyAgain = receiver.messages.findIndex((x) => x.fields.STATUS?.startsWith(`chromium ready, pid ${now};`));
  assert.ok(restarting > receiver.indexOf('READY', '1') && restarting < readyAgain, 'restarting, then ready');
  assert.equal(receiver.count('READY'), 1);
});

test('SIGTERM: STOPPING=1, then a clean exit', async () => {
  const exit = await daemon.stop();
  assert.equal(exit.code, 0);
  await receiver.waitFor((ms) => ms.some((x) => x.fields.STOPPING === '1'), 'STOPPING=1', 10_000);
  const stopping = receiver.indexOf('STOPPING', '1');
  assert.equal(receiver.messages[stopping]?.fields.STATUS, 'stopping');
  assert.ok(stopping > receiver.indexOf('READY', '1'));
  assert.equal(receiver.count('READY'), 1);
  assert.equal(receiver.messages[stopping]?.pid, daemon.pid);
});
