// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// exec through the HTTP API of the real daemon: exit and output, stdin, the deadline (the whole
// group is killed), what a command leaves in its group (killed when it exits), the output limit,
// the environment, and a client that goes away.
import assert from 'node:assert/strict';
import { chownSync, existsSync, rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { expectError } from '../helpers/http.js';
import { b64, execProcess, PROC } from '../helpers/processes.js';
import { agentIds, agentTempDir } from '../kit/agent.js';
import { tempDir } from '../kit/cleanup.js';
import { TEST_TOKEN, startDaemon, type Daemon } from '../kit/daemon.js';
import { groupMembers, killGroup, waitPidGone } from '../kit/procs.js';
import { waitFile } from '../kit/wait.js';

const OUTPUT_LIMIT = 4096;
const dir = agentTempDir('browserd-exec-'); // the API's processes (the agent user) write there
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

test("the SDK's fields: null means not given (the agent user); as_root runs as root on a daemon running as root; with as_user it is 400", async () => {
  const r = await execProcess(d, { command: 'id', args: ['-u'], cwd: null, as_user: null, timeout_sec: null, as_root: false });
  assert.equal(r.exit_code, 0);
  assert.equal(text(r.stdout_b64).trim(), String(agentIds().uid));
  assert.equal(process.getuid?.(), 0, 'the test suite runs as root (as the daemon may under systemd with as_root use)');
  const root = await execProcess(d, { command: 'id', args: ['-u'], as_root: true });
  assert.equal(text(root.stdout_b64).trim(), '0');
  const both = await expectError(await d.fetch(`${PROC}/exec`, { method: 'POST', json: { command: 'id', as_root: true, as_user: 'nobody' } }), 400, 'bad_request');
  assert.match(String(both.message), /^as_root: true cannot be combined with as_user/);
  await expectError(await d.fetch(`${PROC}/spawn`, { method: 'POST', json: { command: 'id', as_root: true, as_user: 'nobody' } }), 400, 'bad_request');
  await expectError(await d.fetch(`${PROC}/exec`, { method: 'POST', json: { command: 'id', as_root: 'yes' } }), 400, 'bad_request');
});

test('as_root on a daemon that is not root: 422 unsupported_field naming as_root, and nothing runs', async () => {
  const stateDir = tempDir('browserd-nonroot-');
  chownSync(stateDir, 65534, 65534);
  // Without CAP_SETUID it may not switch users: its processes run as itself (no separation, named explicitly).
  const nonRoot = await startDaemon({ stateDir, env: { BROWSERD_AGENT_USER: 'nobody' }, wrapper: ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups'] });
  const marker = path.join(stateDir, 'ran');
  try {
    for (const route of ['exec', 'spawn']) {
      const res = await nonRoot.fetch(`${PROC}/${route}`, { method: 'POST', json: { command: 'touch', args: [marker], as_root: true } });
      const body = await expectError(res, 422, 'unsupported_field');
      assert.match(String(body.message), /^as_root: the daemon runs as uid 65534 .*not root/);
      assert.deepEqual(body.inner_error, { code: 'as_root', message: String(body.message).slice('as_root: '.length) });
      assert.equal(res.headers.get('x-should-retry'), 'false');
    }
    assert.equal(existsSync(marker), false, 'the command was not run as anyone');
    // as_root: false is as if not given.
    const ok = await execProcess(nonRoot, { command: 'id', args: ['-u'], as_root: false });
    assert.equal(text(ok.stdout_b64).trim(), '65534');
  } finally {
    await nonRoot.cleanup();
    rmSync(stateDir, { recursive: true, force: true });
  }
});

test('exec: a body too large for stdin_b64 is 413 naming the stdin limit and its setting, before the body is read', async () => {
  const small = await startDaemon({ env: { BROWSERD_STDIN_LIMIT_BYTES: '1024', BROWSERD_BODY_LIMIT_BYTES: '2048' } });
  try {
    const big = b64(Buffer.alloc(64 * 1024));
    const body = await expectError(await small.fetch(`${PROC}/exec`, { method: 'POST', json: { command: 'cat', stdin_b64: big } }), 413, 'payload_too_large');
    assert.match(String(body.message), /^stdin_b64 is over its limit of 1024 bytes \(BROWSERD_STDIN_LIMIT_BYTES\): the request body is over 3416 bytes/);
    assert.match(String(body.message), /2048 bytes \(BROWSERD_BODY_LIMIT_BYTES\) for the other fields/);
    const decoded = await expectError(await small.fetch(`${PROC}/exec`, { method: 'POST', json: { command: 'cat', stdin_b64: b64(Buffer.alloc(1025)) } }), 413, 'payload_too_large');
    assert.match(String(decoded.message), /^stdin_b64 \(1025 bytes decoded\) is over its limit of 1024 bytes \(BROWSERD_STDIN_LIMIT_BYTES\)$/);
  } finally {
    await small.cleanup();
  }
});
