// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The daemon's one kill escalation (daemon/core/process/kill.ts), on real children.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { after, test } from 'node:test';
import { endGroups } from '../../daemon/core/process/group.js';
import { escalate, type KillSignal } from '../../daemon/core/process/kill.js';
import { groupAlive, killGroup } from '../kit/procs.js';

const started: number[] = [];
after(() => {
  for (const pgid of started) killGroup(pgid);
});

/** `sh -c script` leading its own group, once it printed "ready" (its traps are set by then). */
async function shell(script: string): Promise<ChildProcess & { pid: number }> {
  const child = spawn('sh', ['-c', script], { detached: true, stdio: ['ignore', 'pipe', 'ignore'] });
  started.push(child.pid as number);
  let out = '';
  child.stdout.setEncoding('utf8');
  while (!out.includes('ready')) out += String((await once(child.stdout, 'data'))[0]);
  return child as ChildProcess & { pid: number };
}

/** One child as a target, recording the signals it is sent. */
function childTarget(child: ChildProcess): { sent: KillSignal[]; alive(): Promise<boolean>; signal(s: KillSignal): void; ended: Promise<unknown> } {
  const exited = once(child, 'exit');
  const sent: KillSignal[] = [];
  return {
    sent,
    alive: async () => child.exitCode === null && child.signalCode === null,
    signal: (s) => {
      sent.push(s);
      child.kill(s);
    },
    ended: exited,
  };
}

test('a child that ignores SIGTERM gets SIGKILL after the grace', async () => {
  const child = await shell('trap "" TERM; echo ready; while :; do sleep 1; done');
  const target = childTarget(child);
  const result = await escalate([target], { graceMs: 300, killWaitMs: 5000 });
  assert.deepEqual(target.sent, ['SIGTERM', 'SIGKILL']);
  assert.deepEqual(result.signalled, [target]);
  assert.deepEqual(result.killed, [target]);
  assert.deepEqual(result.survivors, []);
  assert.equal(child.signalCode, 'SIGKILL');
});

test('a child that exits on SIGTERM does not get SIGKILL', async () => {
  const child = await shell('echo ready; while :; do sleep 1; done');
  const target = childTarget(child);
  // A long grace: the escalation must end when the child does, not when the grace does.
  const result = await escalate([target], { graceMs: 120_000, killWaitMs: 5000 });
  assert.deepEqual(target.sent, ['SIGTERM']);
  assert.deepEqual(result.killed, []);
  assert.deepEqual(result.survivors, []);
  assert.equal(child.signalCode, 'SIGTERM');
});

test('no grace: SIGKILL at once, no SIGTERM; a target already gone gets nothing', async () => {
  const child = await shell('echo ready; while :; do sleep 1; done');
  const target = childTarget(child);
  const gone = { sent: [] as KillSignal[], alive: async () => false, signal: (s: KillSignal) => void gone.sent.push(s) };
  const result = await escalate([target, gone], { graceMs: 0, killWaitMs: 5000 });
  assert.deepEqual(target.sent, ['SIGKILL']);
  assert.deepEqual(gone.sent, []);
  assert.deepEqual(result.signalled, [target]);
  assert.equal(child.signalCode, 'SIGKILL');
});

test('groups: the one ignoring SIGTERM (leader and members) is killed, the other ends on SIGTERM; both are gone', async () => {
  // An ignored signal stays ignored across fork and exec: the sleeps ignore SIGTERM too.
  const stubborn = await shell('trap "" TERM; sleep 1000 & sleep 1000 & echo ready; wait');
  const gentle = await shell('sleep 1000 & sleep 1000 & echo ready; wait');
  const stubbornExit = once(stubborn, 'exit');
  const gentleExit = once(gentle, 'exit');
  const survivors = await endGroups([stubborn.pid, gentle.pid], 300, 5000);
  assert.deepEqual(survivors, []);
  assert.equal(groupAlive(stubborn.pid), false, 'no member of the stubborn group lives');
  assert.equal(groupAlive(gentle.pid), false, 'no member of the gentle group lives');
  assert.equal((await stubbornExit)[1], 'SIGKILL');
  assert.equal((await gentleExit)[1], 'SIGTERM');
});
