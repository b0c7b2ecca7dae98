// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// @long: one of the slowest files (10 s or more alone), started first by test/run.mjs.
// The generic launcher with real child processes (sh and sleep): its own process group, readiness
// raced against exit, deadline and abort, and a stop that ends every member of the group, even
// one that ignores SIGTERM or outlives the leader.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { launch, LaunchError, type LaunchedProcess } from '../../daemon/chromium/launch/launcher.js';
import { Deadline } from '../../daemon/core/deadline.js';
import { groupAlive, isAlive, pgidOf } from '../kit/procs.js';

const started: LaunchedProcess[] = [];
after(async () => {
  for (const p of started) await p.stop(100).catch(() => {});
});

async function sh(script: string): Promise<LaunchedProcess> {
  const p = await launch({ command: '/bin/sh', args: ['-c', script], env: { PATH: process.env.PATH } });
  started.push(p);
  return p;
}

const alive = isAlive;
/** The first captured group of the first output line that matches (polled from the ring buffer). */
async function waitForLine(p: LaunchedProcess, re: RegExp, deadline = Deadline.in(10_000, 'waiting for a line')): Promise<string> {
  for (;;) {
    for (const l of p.output.lines()) {
      const m = re.exec(l);
      if (m) return m[1] as string;
    }
    deadline.check();
    await sleep(10);
  }
}
const lineProbe = (p: LaunchedProcess, re: RegExp) => (deadline: Deadline) => waitForLine(p, re, deadline);

test('a binary that does not exist: LaunchError(spawn) with ENOENT', async () => {
  await assert.rejects(
    launch({ command: '/nonexistent/chromium', args: [], env: {} }),
    (err: unknown) => err instanceof LaunchError && err.kind === 'spawn' && err.extra.errno === 'ENOENT',
  );
});

test('the child leads its own process group; ready when the probe says so; stop ends the whole group', async () => {
  const p = await sh('sleep 600 & echo "child $!"; echo "READY at 42"; wait');
  assert.equal(pgidOf(p.pid), p.pid, 'own process group');
  const childPid = Number(await waitForLine(p, /^child (\d+)$/));
  const ready = await p.waitReady(lineProbe(p, /^READY at (\d+)$/), Deadline.in(10_000, '10000 ms'), 2000);
  assert.equal(ready, '42');
  assert.ok(alive(childPid));
  await p.stop(2000);
  assert.equal(groupAlive(p.pid), false);
  assert.equal(alive(childPid), false, 'the grandchild is gone too');
  assert.ok(p.exitInfo, 'the leader exit is recorded');
  assert.deepEqual(p.output.lines().slice(0, 2), [`child ${childPid}`, 'READY at 42']);
});

test('a member that ignores SIGTERM is killed after the grace period', async () => {
  const p = await sh(`sh -c 'trap "" TERM; echo "stubborn $$"; exec sleep 600' & wait`);
  const stubborn = Number(await waitForLine(p, /^stubborn (\d+)$/));
  const ignored = /SigIgn:\s*([0-9a-f]+)/.exec(readFileSync(`/proc/${stubborn}/status`, 'utf8'))?.[1] ?? '0';
  assert.notEqual(BigInt(`0x${ignored}`) & (1n << 14n), 0n, 'the fixture really ignores SIGTERM (signal 15)');
  await p.stop(200);
  assert.equal(alive(stubborn), false);
  assert.equal(groupAlive(p.pid), false);
});

test('members that outlive their leader are ended by stop', async () => {
  const p = await sh('sleep 600 & echo "orphan $!"; exit 0');
  const orphan = Number(await waitForLine(p, /^orphan (\d+)$/));
  const exit = await p.exited;
  assert.equal(exit.code, 0);
  assert.ok(alive(orphan), 'the orphan still runs after the leader exited');
  await p.stop(2000);
  assert.equal(alive(orphan), false);
  await p.stop(2000); // idempotent
});

test('readiness loses to an early exit: LaunchError(exit) with the code and the last output lines', async () => {
  const p = await sh('echo "line one" >&2; echo "line two" >&2; exit 3');
  await assert.rejects(
    p.waitReady(lineProbe(p, /^never (\d+)$/), Deadline.in(10_000, '10000 ms'), 500),
    (err: unknown) =>
      err instanceof LaunchError && err.kind === 'exit' && err.extra.exit?.code === 3 && err.output.join('|') === 'line one|line two' && /with code 3/.test(err.message),
  );
});

test('readiness loses to its deadline: LaunchError(timeout), and the group is gone', async () => {
  const p = await sh('echo waiting; exec sleep 600');
  await assert.rejects(
    p.waitReady(lineProbe(p, /^never (\d+)$/), Deadline.in(300, '300 ms'), 500),
    (err: unknown) => err instanceof LaunchError && err.kind === 'timeout' && err.output.includes('waiting'),
  );
  assert.equal(groupAlive(p.pid), false);
  assert.equal(p.exitInfo?.signal, 'SIGTERM');
});

test('readiness is abandoned when the caller aborts: LaunchError(aborted)', async () => {
  const p = await sh('exec sleep 600');
  const ac = new AbortController();
  const pending = p.waitReady(lineProbe(p, /^never (\d+)$/), Deadline.in(60_000, '60000 ms', ac.signal), 500);
  ac.abort();
  await assert.rejects(pending, (err: unknown) => err instanceof LaunchError && err.kind === 'aborted');
  assert.equal(groupAlive(p.pid), false);
});

test('a failing probe: LaunchError(probe) carrying its message', async () => {
  const p = await sh('exec sleep 600');
  await assert.rejects(
    p.waitReady(async () => Promise.reject(new Error('handshake refused')), Deadline.in(10_000, '10000 ms'), 500),
    (err: unknown) => err instanceof LaunchError && err.kind === 'probe' && /handshake refused/.test(err.message),
  );
  assert.equal(groupAlive(p.pid), false);
});
