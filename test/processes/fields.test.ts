// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The SDK's fields and the input refused at the door, through the HTTP API of the real daemon:
// null for the nullable fields, strings a process cannot carry (unpaired surrogates, the env name
// __proto__), spawn's timeout_sec, kill and deadlines reaching every process group of the session,
// and the SDK's cpu_pct / mem_bytes in status.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { expectError } from '../helpers/http.js';
import { execProcess, kill, PROC, readOutput, spawnProcess, status, waitExited } from '../helpers/processes.js';
import { agentScratchDirs } from '../kit/agent.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';
import { groupMembers, killGroup, waitPidGone } from '../kit/procs.js';
import { until, waitFile } from '../kit/wait.js';

const scratch = agentScratchDirs('browserd-fields-'); // the API's processes (the agent user) write there
let d: Daemon;
let dir: string;

before(async () => {
  dir = scratch();
  d = await startDaemon();
});
after(() => d.cleanup());

test("the SDK's nullable fields: null means not given (spawn)", async () => {
  const { process_id } = await spawnProcess(d, { command: 'sh', args: ['-c', 'cd "$HOME" && [ "$(pwd -P)" = "$(cd "$OLDPWD" && pwd -P)" ] && id -un'], cwd: null, as_user: null, timeout_sec: null, env: {} });
  const out = await readOutput(d, process_id);
  const s = await status(d, process_id);
  assert.equal(out.stdout.toString(), `${s.as_user}\n`, 'it runs as the daemon user, in its home');
  assert.equal(s.timeout_at, null);
  assert.equal(s.timed_out, false);
  assert.equal(s.tty, null);
});

test('strings a process cannot carry are 400 naming the field: an unpaired surrogate anywhere, the env name __proto__', async () => {
  const lone = '\ud800';
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ command: `ec${lone}ho` }, /^command: must be valid Unicode/],
    [{ command: 'echo', args: ['ok', `x${lone}`] }, /^args\.1: must be valid Unicode/],
    [{ command: 'env', env: { [`A${lone}`]: 'x' } }, /^env\.A.*: the variable name must be valid Unicode/],
    [{ command: 'env', env: { A: `\udc00` } }, /^env\.A: must be valid Unicode/],
    [{ command: 'pwd', cwd: `/tmp${lone}` }, /^cwd: must be valid Unicode/],
    [{ command: 'id', as_user: `no${lone}body` }, /^as_user: must be valid Unicode/],
  ];
  for (const route of ['spawn', 'exec']) {
    for (const [body, message] of cases) {
      const text = JSON.stringify(body);
      assert.match(text, /\\ud[89abc]00/, 'the surrogate travels as a JSON escape');
      const err = await expectError(await d.fetch(`${PROC}/${route}`, { method: 'POST', body: text, headers: { 'content-type': 'application/json' } }), 400, 'bad_request');
      assert.match(String(err.message), message, `${route} ${text}`);
    }
    // JSON.parse makes "__proto__" an own key; zod would drop it without a word.
    const proto = '{"command":"env","env":{"__proto__":"x","B":"y"}}';
    const err = await expectError(await d.fetch(`${PROC}/${route}`, { method: 'POST', body: proto, headers: { 'content-type': 'application/json' } }), 400, 'bad_request');
    assert.match(String(err.message), /^env\.__proto__: a key named __proto__ is refused/);
  }
  // A pair of surrogates (an emoji) is valid Unicode and reaches the child as UTF-8.
  const r = await execProcess(d, { command: 'printf', args: ['%s', '\ud83d\ude00'] });
  assert.deepEqual(Buffer.from(r.stdout_b64, 'base64'), Buffer.from('😀'));
});

test('spawn timeout_sec: at the deadline the whole session gets SIGKILL, also a job in a group of its own; status shows it', async () => {
  const pidFile = path.join(dir, 'timeout-job.pid');
  // timeout(1) moves itself into a process group of its own, in the same session.
  const { process_id, pid } = await spawnProcess(d, { command: 'sh', args: ['-c', 'timeout 300 sleep 300 & echo $! > "$1"; wait', 'sh', pidFile], timeout_sec: 1 });
  const job = Number((await waitFile(pidFile)).trim());
  await until('the job in its own group', () => (groupMembers(job).includes(job) ? true : undefined));
  try {
    const running = await status(d, process_id);
    assert.equal(running.timed_out, false);
    assert.ok(running.timeout_at !== null && Date.parse(running.timeout_at) - Date.parse(running.started_at) === 1000, JSON.stringify(running));
    const s = await waitExited(d, process_id);
    assert.equal(s.signal, 'SIGKILL');
    assert.equal(s.timed_out, true);
    await waitPidGone(job);
    await d.waitLog((l) => l.event === 'process_timeout' && l.process_id === process_id);
  } finally {
    killGroup(pid);
    killGroup(job);
  }
  for (const bad of [0, -1, 'ten', 24 * 86400 + 1]) {
    await expectError(await d.fetch(`${PROC}/spawn`, { method: 'POST', json: { command: 'true', timeout_sec: bad } }), 400, 'bad_request');
  }
});

test('kill reaches every process group of the session: a job that moved into a group of its own too', async () => {
  const pidFile = path.join(dir, 'session-job.pid');
  // timeout(1) moves itself into a process group of its own (setpgid), in the same session.
  const { process_id, pid } = await spawnProcess(d, { command: 'sh', args: ['-c', 'timeout 300 sleep 300 & echo $! > "$1"; wait', 'sh', pidFile] });
  const job = Number((await waitFile(pidFile)).trim());
  try {
    await until('the job in its own group', () => (groupMembers(job).includes(job) ? true : undefined));
    assert.equal(groupMembers(pid).includes(job), false, 'the job runs in a group of its own');
    assert.equal((await kill(d, process_id, 'TERM')).status, 200);
    await waitPidGone(job);
    assert.equal((await waitExited(d, process_id)).signal, 'SIGTERM');
  } finally {
    killGroup(pid);
    killGroup(job);
  }
});

test("status while running carries the SDK's cpu_pct and mem_bytes (of the living members)", async () => {
  const { process_id } = await spawnProcess(d, { command: 'sleep', args: ['300'] });
  // Just spawned, the child may still be between its fork and its exec (no resident pages of its own yet).
  let s = await status(d, process_id);
  await until(() => `mem_bytes of a running sleep; last: ${JSON.stringify(s)}`, async () => ((s = await status(d, process_id)).mem_bytes ?? 0) > 0, 10_000, 20);
  assert.equal(typeof s.cpu_pct, 'number');
  assert.equal(s.state, 'running');
  assert.equal((await kill(d, process_id, 'KILL')).status, 200);
  const done = await waitExited(d, process_id);
  assert.equal(done.mem_bytes, undefined, 'nothing of the group lives');
});
