// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// Spawned processes never outlive a daemon crash unowned: every group is recorded in
// <state>/process-groups.log as it starts, and a daemon killed with SIGKILL has what it left ended
// by the next start on the same state dir, before that one listens. Only groups provably the ones
// recorded are signalled: a look-alike process of another group, a recorded pid now held by
// another process (another start time), and records of another boot are left alone.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { parseJournal } from '../../daemon/processes/groups/journal.js';
import { expectError } from '../helpers/http.js';
import { PROC, spawnProcess, status, waitExited } from '../helpers/processes.js';
import { tempDir } from '../kit/cleanup.js';
import { agentScratchDirs } from '../kit/agent.js';
import { startDaemon } from '../kit/daemon.js';
import { killGroup, pidGone, waitGroupGone, waitPidGone } from '../kit/procs.js';
import { waitFile } from '../kit/wait.js';

const scratch = agentScratchDirs('browserd-journal-'); // the API's processes (the agent user) write there
const journalOf = (stateDir: string): string => readFileSync(path.join(stateDir, 'process-groups.log'), 'utf8');
const bootId = (): string => readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
const starttime = (pid: number): number => {
  const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
};

/** A `sleep` of the test's own, in a group of its own: a look-alike of a daemon child. */
function lookAlike(seconds: string): number {
  const child = spawn('sleep', [seconds], { detached: true, stdio: 'ignore' });
  child.unref();
  return child.pid as number;
}

test('the journal records each group as it starts and as it ends', async () => {
  const d = await startDaemon();
  try {
    const { process_id, pid } = await spawnProcess(d, { command: 'sh', args: ['-c', 'read x'] });
    assert.equal(journalOf(d.stateDir), `+${pid} ${starttime(pid)} ${bootId()}\n`);
    await d.fetch(`${PROC}/${process_id}/kill`, { method: 'POST', json: { signal: 'KILL' } });
    await waitExited(d, process_id);
    await waitFile(path.join(d.stateDir, 'process-groups.log'), (t) => t.includes(`-${pid}\n`));
    assert.deepEqual(parseJournal(journalOf(d.stateDir)).entries, []);
  } finally {
    await d.cleanup();
  }
});

test('after kill -9 of the daemon, the next start ends every group it left before it listens; a look-alike is untouched', async () => {
  const stateDir = tempDir('browserd-crash-');
  const files = scratch();
  const first = await startDaemon({ stateDir });
  const started: number[] = [];
  const other = lookAlike('301');
  try {
    // A plain group; one whose leader exits leaving a member; a job in a group of its own (timeout(1)
    // calls setpgid; same session); a terminal whose processes ignore the hangup of a closing terminal.
    const plain = await spawnProcess(first, { command: 'sleep', args: ['301'] });
    const orphaned = await spawnProcess(first, { command: 'sh', args: ['-c', 'sleep 301 & echo $! > "$1"; exit 0', 'sh', path.join(files, 'orphan')] });
    const jobs = await spawnProcess(first, { command: 'sh', args: ['-c', 'timeout 301 sleep 301 & echo $! > "$1"; wait', 'sh', path.join(files, 'job')] });
    const tty = await spawnProcess(first, { command: 'sh', args: ['-c', 'trap "" HUP; sleep 301 & echo $! > "$1"; wait', 'sh', path.join(files, 'tty')], allocate_tty: true });
    const orphan = Number((await waitFile(path.join(files, 'orphan'))).trim());
    const job = Number((await waitFile(path.join(files, 'job'))).trim());
    const ttyChild = Number((await waitFile(path.join(files, 'tty'))).trim());
    await waitExited(first, orphaned.process_id);
    started.push(plain.pid, orphaned.pid, jobs.pid, tty.pid);
    const survivors = [plain.pid, orphan, jobs.pid, job, tty.pid, ttyChild];

    first.proc.kill('SIGKILL');
    await first.waitExit();
    for (const pid of survivors) assert.equal(pidGone(pid), false, `${pid} outlived the daemon (nothing else would end it)`);

    const second = await startDaemon({ stateDir });
    try {
      // Checked the moment `listening` is logged: the sweep is done by then, not merely begun.
      for (const pid of survivors) assert.equal(pidGone(pid), true, `${pid} was ended before the new daemon listened`);
      assert.equal(pidGone(other), false, 'the look-alike of another group is untouched');
      const endedAt = second.logs.findIndex((l) => l.event === 'process_leftover_ended');
      const listeningAt = second.logs.findIndex((l) => l.event === 'listening');
      assert.ok(endedAt >= 0 && endedAt < listeningAt, 'process_leftover_ended comes before listening');
      const ended = second.logs[endedAt] as { pgids: number[]; child_pids: number[]; pid?: unknown };
      assert.deepEqual([...ended.pgids].sort((a, b) => a - b), [...started].sort((a, b) => a - b));
      for (const pid of [plain.pid, orphan, job, ttyChild]) assert.ok(ended.child_pids.includes(pid), `child_pids names ${pid}`);
      assert.equal(ended.pid, undefined, 'a child pid is never logged as pid');
      assert.equal(journalOf(stateDir), '', 'the journal starts afresh');
      await expectError(await second.fetch(`${PROC}/${plain.process_id}/status`), 404, 'not_found');
      // The new daemon records its own groups as before.
      const fresh = await spawnProcess(second, { command: 'sleep', args: ['300'] });
      assert.equal((await status(second, fresh.process_id)).state, 'running');
    } finally {
      await second.cleanup();
    }
  } finally {
    for (const pgid of [...started, other]) killGroup(pgid);
    rmSync(stateDir, { recursive: true, force: true });
  }
});

test('a record that does not prove the group is ours is never signalled: another start time, another boot', async () => {
  const stateDir = tempDir('browserd-foreign-');
  const reused = lookAlike('302'); // a pid now held by another process than the one recorded
  const rebooted = lookAlike('303'); // recorded in another boot
  try {
    writeFileSync(
      path.join(stateDir, 'process-groups.log'),
      `+${reused} ${starttime(reused) - 1} ${bootId()}\n+${rebooted} ${starttime(rebooted)} 00000000-0000-4000-8000-000000000000\nnot a record\n`,
    );
    const d = await startDaemon({ stateDir });
    try {
      assert.equal(pidGone(reused), false);
      assert.equal(pidGone(rebooted), false);
      assert.ok(!d.logs.some((l) => l.event === 'process_leftover'), 'nothing was found to end');
      assert.ok(d.logs.some((l) => l.event === 'process_journal_malformed' && l.lines === 1));
      assert.equal(journalOf(stateDir), '');
    } finally {
      await d.cleanup();
    }
  } finally {
    killGroup(reused);
    killGroup(rebooted);
    rmSync(stateDir, { recursive: true, force: true });
  }
  await waitPidGone(reused);
  await waitGroupGone(rebooted); // SIGKILL is delivered asynchronously
});

test('the journal is compacted to the last start of each group not followed by its end', () => {
  const boot = 'e0ddaecc-0c03-4c9e-b638-fad382c9bf3c';
  const { entries, malformed } = parseJournal(`+10 5 ${boot}\n+11 6 ${boot}\n-10\n+12 7 ${boot}\n+11 9 ${boot}\n-12\n+1 1 ${boot}\ngarbage\n+13 8 ${boot}`);
  assert.deepEqual(entries, [
    { pgid: 11, starttime: 9, boot },
    { pgid: 13, starttime: 8, boot },
  ]);
  assert.equal(malformed, 1);
});
