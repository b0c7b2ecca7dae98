// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// Graceful shutdown of the real daemon on SIGTERM: a request in flight is answered, new
// connections are refused, every spawned process group is ended (SIGKILL for one that ignores
// SIGTERM, and also a group whose leader has exited), the log says `stopping` then `stopped`, and
// the exit code is 0. A second SIGTERM while the groups are being ended stops at once and still
// leaves no group running.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';
import { PROC, spawnProcess, status, waitExited, type ExecResult } from '../helpers/processes.js';
import { agentTempDir } from '../kit/agent.js';
import { startDaemon } from '../kit/daemon.js';
import { groupMembers, killGroup, waitGroupGone, waitPidGone } from '../kit/procs.js';
import { waitFile } from '../kit/wait.js';

const dir = agentTempDir('browserd-shutdown-'); // the API's processes (the agent user) write there
after(() => rmSync(dir, { recursive: true, force: true }));

test('SIGTERM drains an exec in flight, refuses new connections and ends every process group', async () => {
  const d = await startDaemon();
  try {
    // A group whose leader waits on a background grandchild, and one that ignores SIGTERM.
    const pidFile = path.join(dir, 'grandchild.pid');
    const tree = await spawnProcess(d, { command: 'sh', args: ['-c', 'sleep 300 & echo $! > "$1"; wait', 'sh', pidFile] });
    const grandchild = Number((await waitFile(pidFile)).trim());
    const stubbornFile = path.join(dir, 'stubborn.pid');
    const stubborn = await spawnProcess(d, { command: 'sh', args: ['-c', 'trap "" TERM; echo $$ > "$1"; while :; do sleep 1; done', 'sh', stubbornFile] });
    await waitFile(stubbornFile);
    // A group whose leader has exited, leaving a background child in it.
    const orphanFile = path.join(dir, 'orphan.pid');
    const left = await spawnProcess(d, { command: 'sh', args: ['-c', 'sleep 300 & echo $! > "$1"; exit 0', 'sh', orphanFile] });
    const orphan = Number((await waitFile(orphanFile)).trim());
    await waitExited(d, left.process_id);
    assert.equal((await status(d, left.process_id)).group_alive, true);

    const inFlight = d.fetch(`${PROC}/exec`, { method: 'POST', json: { command: 'sleep', args: ['1.5'] } });
    await d.waitLog((l) => l.event === 'process_spawned' && l.kind === 'exec');
    d.proc.kill('SIGTERM');
    await d.waitLog((l) => l.event === 'stopping');

    await assert.rejects(fetch(`${d.url}/healthz`, { headers: { connection: 'close' } }), 'a new connection after the signal is not served');

    const res = await inFlight;
    assert.equal(res.status, 200);
    const result = (await res.json()) as ExecResult;
    assert.equal(result.exit_code, 0);
    assert.equal(result.timed_out, false);

    const exit = await d.waitExit();
    assert.deepEqual(exit, { code: 0, signal: null });
    const events = d.logs.map((l) => l.event);
    const stopping = events.indexOf('stopping');
    const stopped = events.indexOf('stopped');
    assert.ok(stopping >= 0 && stopped > stopping, `stopping then stopped: ${events.join(', ')}`);
    const processesStopped = d.logs.find((l) => l.event === 'processes_stopped');
    assert.ok(processesStopped, 'the processes module ended its groups');
    assert.ok(Number(processesStopped.killed) >= 1, 'the group that ignores SIGTERM got SIGKILL');

    for (const pid of [tree.pid, grandchild, stubborn.pid, orphan]) await waitPidGone(pid, 5000);
    for (const pgid of [tree.pid, stubborn.pid, left.pid]) assert.deepEqual(groupMembers(pgid), [], `group ${pgid} has ended`);
  } finally {
    await d.cleanup();
  }
});

test('a second SIGTERM while groups are being ended: the daemon exits at once and SIGKILLs them', async () => {
  const d = await startDaemon();
  let pgid = 0;
  try {
    const pidFile = path.join(dir, 'second-signal.pid');
    const stubborn = await spawnProcess(d, { command: 'sh', args: ['-c', 'trap "" TERM; echo $$ > "$1"; while :; do sleep 1; done', 'sh', pidFile] });
    pgid = stubborn.pid;
    await waitFile(pidFile);
    d.proc.kill('SIGTERM');
    await d.waitLog((l) => l.event === 'processes_stopping');
    d.proc.kill('SIGTERM');
    const exit = await d.waitExit();
    assert.deepEqual(exit, { code: 1, signal: null }, 'the second signal stops at once');
    assert.ok(d.logs.some((l) => l.event === 'stopping' && l.level === 40), 'the second signal is logged');
    assert.ok(!d.logs.some((l) => l.event === 'processes_stopped'), 'the group was still being ended (it ignores SIGTERM)');
    // The daemon is gone: only its SIGKILL on the second signal can have ended the group.
    await waitGroupGone(pgid, 5000);
  } finally {
    if (pgid > 0) killGroup(pgid);
    await d.cleanup();
  }
});
