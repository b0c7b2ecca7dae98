// exec through the HTTP API of the real daemon: exit and output, stdin, the deadline (the whole
// group is killed), what a command leaves in its group (killed when it exits), the output limit,
// the environment, and a client that goes away.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { startDaemon, tempDir, TEST_TOKEN, type Daemon } from './helpers/daemon.js';
import { expectError } from './helpers/http.js';
import { b64, execProcess, groupMembers, killGroup, PROC, waitFile, waitPidGone } from './helpers/processes.js';

const OUTPUT_LIMIT = 4096;
const dir = tempDir('browserd-exec-');
let d: Daemon;

before(async () => {
  d = await startDaemon({ env: { BROWSERD_EXEC_OUTPUT_LIMIT_BYTES: String(OUTPUT_LIMIT) } });
});
after(async () => {
  await d.cleanup();
  rmSync(dir, { recursive: true, force: true });
});

const text = (s: string): string => Buffer.from(s, 'base64').toString();

test('exec returns the exit code, both outputs and the duration', async () => {
  const r = await execProcess(d, { command: 'sh', args: ['-c', 'echo out; echo err >&2; exit 5'] });
  assert.equal(r.exit_code, 5);
  assert.equal(r.signal, null);
  assert.equal(text(r.stdout_b64), 'out\n');
  assert.equal(text(r.stderr_b64), 'err\n');
  assert.equal(r.timed_out, false);
  assert.equal(typeof r.duration_ms, 'number');
  assert.equal(r.stdout_truncated_bytes, 0);
});

test('exec writes stdin_b64 then EOF; without it stdin is at EOF at once', async () => {
  const bytes = Buffer.from([0, 1, 2, 250, 255, 10]);
  const r = await execProcess(d, { command: 'cat', stdin_b64: b64(bytes) });
  assert.deepEqual(Buffer.from(r.stdout_b64, 'base64'), bytes);
  const none = await execProcess(d, { command: 'cat' });
  assert.equal(none.exit_code, 0);
  assert.equal(none.stdout_b64, '');
  const bad = await expectError(await d.fetch(`${PROC}/exec`, { method: 'POST', json: { command: 'cat', stdin_b64: 'aGk' } }), 400, 'bad_request');
  assert.match(String(bad.message), /^stdin_b64: not strict base64/);
});

test('exec timeout kills the whole group and reports timed_out', async () => {
  const r = await execProcess(d, { command: 'sh', args: ['-c', 'sleep 300 & echo $!; wait'], timeout_sec: 0.5 });
  assert.equal(r.timed_out, true);
  assert.equal(r.signal, 'SIGKILL');
  assert.equal(r.exit_code, null);
  const grandchild = Number(text(r.stdout_b64).trim());
  assert.ok(grandchild > 0);
  await waitPidGone(grandchild);
  for (const bad of [0, -1, 3601, 'ten']) {
    await expectError(await d.fetch(`${PROC}/exec`, { method: 'POST', json: { command: 'true', timeout_sec: bad } }), 400, 'bad_request');
  }
});

test('exec runs a command to completion: what it leaves in its process group is killed when it exits', async () => {
  for (const timeout_sec of [undefined, 1]) {
    const r = await execProcess(d, { command: 'sh', args: ['-c', 'sleep 301 & echo $!; exit 0'], ...(timeout_sec === undefined ? {} : { timeout_sec }) });
    const grandchild = Number(text(r.stdout_b64).trim());
    assert.ok(grandchild > 0, text(r.stdout_b64));
    try {
      assert.equal(r.exit_code, 0);
      assert.equal(r.timed_out, false);
      await waitPidGone(grandchild, 5000);
      assert.deepEqual(groupMembers(r.pid), [], 'nothing of the group is left');
      await d.waitLog((l) => l.event === 'process_exited' && l.kind === 'exec' && l.child_pid === r.pid && l.group_killed === true);
    } finally {
      killGroup(r.pid);
    }
  }
});

test('exec output over the limit is truncated and the rest counted', async () => {
  const r = await execProcess(d, { command: 'sh', args: ['-c', `head -c 10000 /dev/zero; head -c 5000 /dev/zero >&2`] });
  assert.equal(Buffer.from(r.stdout_b64, 'base64').length, OUTPUT_LIMIT);
  assert.equal(r.stdout_truncated_bytes, 10000 - OUTPUT_LIMIT);
  assert.equal(Buffer.from(r.stderr_b64, 'base64').length, OUTPUT_LIMIT);
  assert.equal(r.stderr_truncated_bytes, 5000 - OUTPUT_LIMIT);
  assert.equal(r.exit_code, 0);
});

test("the child gets a minimal environment plus env, never the daemon's own", async () => {
  const r = await execProcess(d, { command: 'env', env: { GREETING: 'hello world', PATH: '/usr/bin:/bin' } });
  const env = new Map(text(r.stdout_b64).trim().split('\n').map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
  assert.equal(env.get('GREETING'), 'hello world');
  assert.equal(env.get('PATH'), '/usr/bin:/bin');
  assert.ok(env.has('HOME') && env.has('USER'));
  for (const key of env.keys()) assert.ok(!key.startsWith('BROWSERD_'), `${key} leaked into the child`);
  assert.ok(!text(r.stdout_b64).includes(TEST_TOKEN));
});

test('exec runs in cwd; an unknown command is 400 command: not found', async () => {
  const r = await execProcess(d, { command: 'pwd', cwd: dir });
  assert.equal(text(r.stdout_b64).trim(), dir);
  const body = await expectError(await d.fetch(`${PROC}/exec`, { method: 'POST', json: { command: 'no-such-command-here' } }), 400, 'bad_request');
  assert.match(String(body.message), /^command: not found/);
  const nobody = await execProcess(d, { command: 'id', args: ['-u'], as_user: 'nobody' });
  assert.equal(text(nobody.stdout_b64).trim(), '65534');
});

test('a client that goes away before the answer: the group is killed', async () => {
  const pidFile = path.join(dir, 'abandoned.pid');
  const ac = new AbortController();
  const pending = d
    .fetch(`${PROC}/exec`, { method: 'POST', json: { command: 'sh', args: ['-c', 'sleep 300 & echo $! > "$1"; wait', 'sh', pidFile] }, signal: ac.signal })
    .catch((err: unknown) => err);
  const grandchild = Number((await waitFile(pidFile)).trim());
  ac.abort();
  assert.ok((await pending) instanceof Error);
  await waitPidGone(grandchild);
  await d.waitLog((l) => l.event === 'process_exited' && l.signal === 'SIGKILL');
});
