// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// spawn, status, list, kill, output streams, the live limit (also for a group that outlives its
// leader), retention, the working directory and scopes, through the HTTP API of the real daemon
// with real children.
import assert from 'node:assert/strict';
import { chownSync, mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { expectError } from '../helpers/http.js';
import { decodeEvents, execProcess, kill, openStream, parseSse, PROC, readOutput, spawnProcess, status, waitExited, writeStdin, type Status } from '../helpers/processes.js';
import { agentTempDir } from '../kit/agent.js';
import { tempDir } from '../kit/cleanup.js';
import { keysFile, startDaemon, type Daemon } from '../kit/daemon.js';
import { killGroup, waitGroupGone, waitPidGone } from '../kit/procs.js';
import { until, waitFile } from '../kit/wait.js';

const MAX_LIVE = 4;
const REPLAY_BYTES = 64 * 1024;
const READER = 'reader-token-aaaaaaaaaaaaaaaa';
const EXECUTOR = 'executor-token-bbbbbbbbbbbbbbbb';

const dir = agentTempDir('browserd-proc-'); // the API's processes (the agent user) write there
let d: Daemon;

before(async () => {
  const keys = keysFile([
    { id: 'reader', token: READER, scopes: ['browser:read'] },
    { id: 'executor', token: EXECUTOR, scopes: ['processes:exec'] },
  ]);
  d = await startDaemon({
    env: { BROWSERD_MAX_PROCESSES: String(MAX_LIVE), BROWSERD_OUTPUT_BUFFER_BYTES: String(REPLAY_BYTES), BROWSERD_KEYS_FILE: keys },
  });
});
after(async () => {
  await d.cleanup();
  rmSync(dir, { recursive: true, force: true });
});

test('spawn answers the id and pid; status and list show it running, then exited with its code', async () => {
  const { process_id, pid } = await spawnProcess(d, { command: 'sh', args: ['-c', 'read x; exit 7'] });
  assert.match(process_id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  const s = await status(d, process_id);
  assert.equal(s.pid, pid);
  assert.equal(s.state, 'running');
  assert.equal(s.exit_code, null);
  assert.equal(s.exited_at, null);
  const list = (await (await d.fetch(PROC)).json()) as { processes: Status[] };
  assert.ok(list.processes.some((p) => p.process_id === process_id && p.state === 'running'));

  assert.equal((await writeStdin(d, process_id, 'go\n')).status, 200);
  const done = await waitExited(d, process_id);
  assert.equal(done.exit_code, 7);
  assert.equal(done.signal, null);
  assert.ok(done.exited_at !== null && done.exited_at >= done.started_at);
  assert.ok(d.logs.some((l) => l.event === 'process_spawned' && l.child_pid === pid && l.process_id === process_id));
  assert.ok(d.logs.some((l) => l.event === 'process_exited' && l.child_pid === pid && l.code === 7));
});

test('unknown process ids are 404 on every process route', async () => {
  const id = '00000000-0000-4000-8000-000000000000';
  await expectError(await d.fetch(`${PROC}/${id}/status`), 404, 'not_found');
  await expectError(await d.fetch(`${PROC}/${id}/stdout/stream`), 404, 'not_found');
  await expectError(await kill(d, id), 404, 'not_found');
  await expectError(await d.fetch(`/browsers/other/process/${id}/status`), 404, 'not_found');
});

test('kill reaches a grandchild: the whole group gets the signal', async () => {
  const pidFile = path.join(dir, 'grandchild.pid');
  const { process_id, pid } = await spawnProcess(d, { command: 'sh', args: ['-c', 'sleep 300 & echo $! > "$1"; wait', 'sh', pidFile] });
  const grandchild = Number((await waitFile(pidFile)).trim());
  assert.ok(grandchild > 0 && grandchild !== pid);
  const res = await kill(d, process_id);
  assert.deepEqual(await res.json(), { ok: true });
  const s = await waitExited(d, process_id);
  assert.equal(s.signal, 'SIGTERM');
  assert.equal(s.exit_code, null);
  await waitPidGone(grandchild);
  // Killing what has exited is a conflict, like writing to it.
  await expectError(await kill(d, process_id, 'KILL'), 409, 'process_exited');
});

test('kill: signal names are checked; the body may be left out', async () => {
  const { process_id } = await spawnProcess(d, { command: 'sleep', args: ['300'] });
  await expectError(await kill(d, process_id, 'STOP'), 400, 'bad_request');
  await expectError(await kill(d, process_id, 'SIGKILL'), 400, 'bad_request');
  assert.equal((await kill(d, process_id, 'INT')).status, 200);
  assert.equal((await waitExited(d, process_id)).signal, 'SIGINT');

  const other = await spawnProcess(d, { command: 'sleep', args: ['300'] });
  const res = await d.fetch(`${PROC}/${other.process_id}/kill`, { method: 'POST' });
  assert.equal(res.status, 200, await res.text());
  assert.equal((await waitExited(d, other.process_id)).signal, 'SIGTERM');
});

test('two SSE readers each see all output in order, and the exit event last; a late reader gets the replay', async () => {
  const script = 'read x; for i in 1 2 3; do echo out$i; echo err$i >&2; done; exit 3';
  const { process_id } = await spawnProcess(d, { command: 'sh', args: ['-c', script] });
  const [a, b] = await Promise.all([openStream(d, process_id), openStream(d, process_id)]);
  assert.equal((await writeStdin(d, process_id, 'go\n')).status, 200);
  const outputs = (await Promise.all([a.text(), b.text()])).map((t) => decodeEvents(parseSse(t)));
  const late = await readOutput(d, process_id);
  for (const out of [...outputs, late]) {
    assert.equal(out.stdout.toString(), 'out1\nout2\nout3\n');
    assert.equal(out.stderr.toString(), 'err1\nerr2\nerr3\n');
    assert.equal(out.lost, 0);
    assert.deepEqual(out.exit, { exit_code: 3, signal: null });
    assert.equal(out.events.at(-1)?.event, 'exit', 'exit is the last event');
    assert.equal(out.events.filter((e) => e.event === 'exit').length, 1);
  }
  // Each stream's own order is kept, and each data event's id is the offset just past it.
  const all = Buffer.concat(late.sequence.map((s) => s.data));
  assert.equal(all.length, 30);
  const ids = late.events.filter((e) => e.event === 'message').map((e) => Number(e.id));
  assert.equal(ids.at(-1), 30);
  assert.deepEqual([...ids].sort((x, y) => x - y), ids);
});

test('Last-Event-ID resumes the stream after that offset; a bad one is 400', async () => {
  const { process_id } = await spawnProcess(d, { command: 'sh', args: ['-c', 'printf abc; sleep 0.2; printf def'] });
  await waitExited(d, process_id);
  const full = await readOutput(d, process_id);
  assert.equal(full.stdout.toString(), 'abcdef');
  const resumed = decodeEvents(parseSse(await (await openStream(d, process_id, { 'last-event-id': '3' })).text()));
  assert.equal(resumed.stdout.toString(), 'def');
  assert.deepEqual(resumed.exit, { exit_code: 0, signal: null });
  await expectError(await d.fetch(`${PROC}/${process_id}/stdout/stream`, { headers: { 'last-event-id': '99' } }), 400, 'bad_request');
  await expectError(await d.fetch(`${PROC}/${process_id}/stdout/stream`, { headers: { 'last-event-id': 'x' } }), 400, 'bad_request');
});

test('a reader that does not read never blocks the child; later it learns how many bytes it lost', async () => {
  const total = 20 * 1024 * 1024;
  const { process_id } = await spawnProcess(d, { command: 'sh', args: ['-c', `read x; head -c ${total} /dev/zero`] });
  const stalled = await openStream(d, process_id); // its body is not read until the child is done
  assert.equal((await writeStdin(d, process_id, 'go\n')).status, 200);
  assert.equal((await waitExited(d, process_id)).exit_code, 0, 'the child wrote everything and exited');
  const out = decodeEvents(parseSse(await stalled.text()));
  assert.ok(out.lost > 0, 'the stalled reader fell behind the replay buffer');
  assert.equal(out.lost + out.stdout.length, total, 'bytes lost + bytes received = every byte written');
  assert.ok(out.events.some((e) => e.event === 'lost'));
  assert.equal(out.events.at(-1)?.event, 'exit');
  // A reader after the exit gets what the buffer kept: the last bytes that fit REPLAY_BYTES in real
  // bytes (the payload less the cost of each chunk kept: docs/memory.md).
  const late = await readOutput(d, process_id);
  assert.ok(late.stdout.length <= REPLAY_BYTES && late.stdout.length > REPLAY_BYTES - 4096, `kept ${late.stdout.length} of ${REPLAY_BYTES}`);
  assert.equal(late.lost, total - late.stdout.length);
});

test(`more than ${MAX_LIVE} live processes: 429 limit_exceeded naming the limit (spawn and exec)`, async () => {
  const ids: string[] = [];
  for (let i = 0; i < MAX_LIVE; i++) ids.push((await spawnProcess(d, { command: 'sleep', args: ['300'] })).process_id);
  const body = await expectError(await d.fetch(`${PROC}/spawn`, { method: 'POST', json: { command: 'true' } }), 429, 'limit_exceeded');
  assert.match(String(body.message), new RegExp(`limit ${MAX_LIVE}\\b`));
  await expectError(await d.fetch(`${PROC}/exec`, { method: 'POST', json: { command: 'true' } }), 429, 'limit_exceeded');
  assert.match(await (await d.fetch('/metrics')).text(), new RegExp(`^browserd_processes_live ${MAX_LIVE}$`, 'm'));

  const first = ids.shift() as string;
  assert.equal((await kill(d, first, 'KILL')).status, 200);
  await waitExited(d, first);
  const again = await spawnProcess(d, { command: 'true' });
  await waitExited(d, again.process_id);
  for (const id of ids) assert.equal((await kill(d, id, 'KILL')).status, 200);
  for (const id of ids) await waitExited(d, id);
  await until('no live processes', async () => {
    const text = await (await d.fetch('/metrics')).text();
    return /^browserd_processes_live 0$/m.test(text) ? true : undefined;
  });
});

test('a group that outlives its leader counts toward the limit, can be killed, and is 409 only once gone', async () => {
  const procs: { process_id: string; pid: number; orphan: number }[] = [];
  try {
    for (let i = 0; i < MAX_LIVE; i++) {
      const file = path.join(dir, `orphan-${i}.pid`);
      const p = await spawnProcess(d, { command: 'sh', args: ['-c', 'sleep 300 & echo $! > "$1"; exit 0', 'sh', file] });
      procs.push({ ...p, orphan: Number((await waitFile(file)).trim()) });
    }
    for (const p of procs) {
      const s = await waitExited(d, p.process_id);
      assert.equal(s.exit_code, 0);
      assert.equal(s.group_alive, true, 'the leader exited, its background child lives on');
    }
    // Every leader has exited, yet their groups hold every live slot.
    const body = await expectError(await d.fetch(`${PROC}/spawn`, { method: 'POST', json: { command: 'true' } }), 429, 'limit_exceeded');
    assert.match(String(body.message), new RegExp(`limit ${MAX_LIVE}\\b`));
    await expectError(await d.fetch(`${PROC}/exec`, { method: 'POST', json: { command: 'true' } }), 429, 'limit_exceeded');
    const list = (await (await d.fetch(PROC)).json()) as { processes: Status[] };
    for (const p of procs) {
      const s = list.processes.find((x) => x.process_id === p.process_id);
      assert.equal(s?.state, 'exited');
      assert.equal(s?.group_alive, true);
    }

    // kill still reaches the group after the leader's exit; once nothing is left, 409.
    const [first, ...rest] = procs as [(typeof procs)[0], ...typeof procs];
    assert.deepEqual(await (await kill(d, first.process_id)).json(), { ok: true });
    await waitPidGone(first.orphan);
    await expectError(await kill(d, first.process_id), 409, 'process_exited');
    const after = await status(d, first.process_id);
    assert.equal(after.state, 'exited');
    assert.equal(after.group_alive, false);
    // Its slot is free again.
    const again = await spawnProcess(d, { command: 'true' });
    await waitExited(d, again.process_id);

    for (const p of rest) assert.equal((await kill(d, p.process_id, 'KILL')).status, 200);
    for (const p of rest) await waitGroupGone(p.pid);
    await until('no live processes', async () => {
      const text = await (await d.fetch('/metrics')).text();
      return /^browserd_processes_live 0$/m.test(text) ? true : undefined;
    });
  } finally {
    for (const p of procs) killGroup(p.pid);
  }
});

test('as_user runs as that user with its HOME; an unknown user is 400', async () => {
  const { process_id } = await spawnProcess(d, { command: 'sh', args: ['-c', 'echo "$(id -u) $HOME $USER"'], as_user: 'nobody' });
  const out = await readOutput(d, process_id);
  assert.equal(out.stdout.toString(), '65534 /nonexistent nobody\n');
  assert.equal((await status(d, process_id)).exit_code, 0);
  const body = await expectError(await d.fetch(`${PROC}/spawn`, { method: 'POST', json: { command: 'id', as_user: 'no-such-user' } }), 400, 'bad_request');
  assert.match(String(body.message), /^as_user: /);
});

test('spawn refuses what cannot start: 400 naming the field', async () => {
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ command: 'no-such-command-here' }, /^command: not found/],
    [{ command: '/etc/passwd' }, /^command: permission denied/],
    [{ command: 'true', cwd: '/no/such/dir' }, /^cwd: /],
    [{ command: 'true', cwd: 'relative/dir' }, /^cwd: /],
    [{ command: '' }, /^command: /],
    [{ command: 'true', env: { 'A=B': 'x' } }, /^env/],
    [{ command: 'true', args: 'not a list' }, /^args: /],
    [{ command: 'true', unknown: 1 }, /unknown|unrecognized/i],
  ];
  for (const [body, message] of cases) {
    const err = await expectError(await d.fetch(`${PROC}/spawn`, { method: 'POST', json: body }), 400, 'bad_request');
    const details = err.details as { message: string }[];
    assert.match(details[0]?.message ?? '', message, JSON.stringify(body));
  }
});

test('a working directory the daemon cannot enter is 400 cwd: …, not blamed on the command', async () => {
  // Without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH, root cannot enter another user's directory of
  // mode 700, as the daemon (User=browserd) cannot under systemd. The child enters its cwd before
  // it switches to as_user, so a failed chdir came back as the exec's EACCES ("command: permission denied").
  const locked = path.join(tempDir('browserd-locked-'), 'locked'); // in a folder of root's: reached, not entered
  mkdirSync(locked, { mode: 0o700 });
  chownSync(locked, 1, 1);
  const limited = await startDaemon({ wrapper: ['setpriv', '--bounding-set', '-dac_override,-dac_read_search'] });
  try {
    for (const route of ['spawn', 'exec']) {
      for (const asUser of [{ as_user: 'nobody' }, {}]) {
        const res = await limited.fetch(`${PROC}/${route}`, { method: 'POST', json: { command: 'sh', args: ['-c', 'pwd'], cwd: locked, ...asUser } });
        const err = await expectError(res, 400, 'bad_request');
        const details = err.details as { message: string }[];
        assert.match(details[0]?.message ?? '', new RegExp(`^cwd: permission denied: ${locked} cannot be entered`), `${route} ${JSON.stringify(asUser)}`);
      }
    }
    // The same request without cwd runs (as nobody, in /: its home does not exist).
    const ok = await execProcess(limited, { command: 'sh', args: ['-c', 'id -u; pwd'], as_user: 'nobody' });
    assert.equal(Buffer.from(ok.stdout_b64, 'base64').toString(), '65534\n/\n');
  } finally {
    await limited.cleanup();
  }
});

test('scopes: browser:read reads but cannot spawn, write or kill; processes:exec spawns but cannot read', async () => {
  const as = (token: string, init: RequestInit & { json?: unknown } = {}): RequestInit & { json?: unknown } => ({
    ...init,
    headers: { authorization: `Bearer ${token}` },
  });
  const spawned = await d.fetch(`${PROC}/spawn`, as(EXECUTOR, { method: 'POST', json: { command: 'sleep', args: ['300'] } }));
  assert.equal(spawned.status, 200);
  const { process_id } = (await spawned.json()) as { process_id: string };

  const denied = await expectError(await d.fetch(`${PROC}/spawn`, as(READER, { method: 'POST', json: { command: 'true' } })), 403, 'forbidden');
  assert.deepEqual(denied.details, [{ code: 'missing_scope', message: 'processes:exec' }]);
  await expectError(await d.fetch(`${PROC}/exec`, as(READER, { method: 'POST', json: { command: 'true' } })), 403, 'forbidden');
  const w = await expectError(await d.fetch(`${PROC}/${process_id}/stdin`, as(READER, { method: 'POST', json: { data_b64: '' } })), 403, 'forbidden');
  assert.deepEqual(w.details, [{ code: 'missing_scope', message: 'processes:write' }]);
  await expectError(await d.fetch(`${PROC}/${process_id}/kill`, as(EXECUTOR, { method: 'POST', json: {} })), 403, 'forbidden');
  await expectError(await d.fetch(`${PROC}/${process_id}/status`, as(EXECUTOR)), 403, 'forbidden');
  await expectError(await d.fetch(PROC, as(EXECUTOR)), 403, 'forbidden');

  assert.equal((await d.fetch(`${PROC}/${process_id}/status`, as(READER))).status, 200);
  assert.equal((await d.fetch(PROC, as(READER))).status, 200);
  assert.equal((await kill(d, process_id, 'KILL')).status, 200);
  await waitExited(d, process_id);
});

test('an exited process stays readable (status, output replay), then after the retention period it is 404', async () => {
  const short = await startDaemon({ env: { BROWSERD_PROCESS_RETENTION_SEC: '2' } });
  try {
    const { process_id } = await spawnProcess(short, { command: 'sh', args: ['-c', 'read x; printf bye; exit 4'] });
    const stream = await openStream(short, process_id);
    assert.equal((await writeStdin(short, process_id, 'go\n')).status, 200);
    const live = decodeEvents(parseSse(await stream.text()));
    assert.deepEqual(live.exit, { exit_code: 4, signal: null });
    // Read right after the exit event (milliseconds, against a retention of 2 s): still there.
    const s = await status(short, process_id);
    assert.equal(s.state, 'exited');
    assert.equal(s.exit_code, 4);
    assert.equal(s.group_alive, false);
    const replay = await readOutput(short, process_id);
    assert.equal(replay.stdout.toString(), 'bye');
    assert.deepEqual(replay.exit, { exit_code: 4, signal: null });
    const list = (await (await short.fetch(PROC)).json()) as { processes: Status[] };
    assert.deepEqual(list.processes.map((p) => p.process_id), [process_id]);

    await until('the exited process to be forgotten', async () => {
      const res = await short.fetch(`${PROC}/${process_id}/status`);
      const text = await res.text();
      if (res.status === 404) return true;
      assert.equal(res.status, 200, text);
      return undefined;
    });
    assert.deepEqual(await (await short.fetch(PROC)).json(), { processes: [] });
  } finally {
    await short.cleanup();
  }
});
