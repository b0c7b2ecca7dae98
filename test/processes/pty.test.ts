// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// Processes on a pseudo-terminal (spawn allocate_tty) through the HTTP API of the real daemon with
// real programs: an interactive bash (prompt, tput, resize, Ctrl-C, job control), a password
// prompt, isatty, stdin's honesty on a terminal that does not read (and a daemon that does not
// freeze meanwhile), kill of the whole session, EOF as ^D, and the refusals.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test, type TestContext } from 'node:test';
import { expectError } from '../helpers/http.js';
import { b64, kill, PROC, readOutput, spawnProcess, status, waitExited } from '../helpers/processes.js';
import { LiveOutput, resize, type } from '../helpers/terminal.js';
import { agentScratchDirs } from '../kit/agent.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';
import { killGroup, sessionProcesses, waitPidGone } from '../kit/procs.js';
import { until } from '../kit/wait.js';

const PROMPT = 'PROMPT$ ';
/** An interactive bash without rc files, with a prompt the tests can find. */
const BASH = { command: 'bash', args: ['--norc', '--noprofile', '-i'], env: { PS1: PROMPT }, allocate_tty: true };
const scratch = agentScratchDirs('browserd-pty-'); // the API's processes (the agent user) write there
let d: Daemon;
/** A daemon with a short stdin deadline, for a terminal that does not read. */
let quick: Daemon;

before(async () => {
  [d, quick] = await Promise.all([startDaemon(), startDaemon({ env: { BROWSERD_STDIN_TIMEOUT_MS: '200' } })]);
});
after(async () => {
  await Promise.all([d.cleanup(), quick.cleanup()]);
});

/** bash on a terminal, at its prompt; after the test its output stream is closed and its group killed. */
async function shell(t: TestContext, size: { rows?: number; cols?: number } = {}): Promise<{ process_id: string; pid: number; out: LiveOutput }> {
  const { process_id, pid } = await spawnProcess(d, { ...BASH, ...size });
  const out = await LiveOutput.open(d, process_id);
  t.after(() => {
    out.close();
    killGroup(pid);
  });
  await out.waitFor(/PROMPT\$ $/);
  return { process_id, pid, out };
}

test('bash -i on a terminal: a prompt, tput cols gives the size spawned, after resize the new size; status shows it', async (t) => {
  const { process_id, out } = await shell(t, { rows: 30, cols: 99 });
  let at = out.mark();
  await type(d, process_id, 'tput cols; tput lines\r');
  // bash echoes the line, then "\r" as it leaves bracketed-paste mode, then the output.
  assert.deepEqual([...(await out.waitFor(/[\r\n](\d+)\r\n(\d+)\r\nPROMPT\$ $/, at)).slice(1)], ['99', '30']);
  assert.deepEqual((await status(d, process_id)).tty, { rows: 30, cols: 99 });

  const res = await resize(d, process_id, 40, 132);
  assert.deepEqual(await res.json(), { ok: true });
  assert.deepEqual((await status(d, process_id)).tty, { rows: 40, cols: 132 });
  at = out.mark();
  await type(d, process_id, 'tput cols; tput lines\r');
  assert.deepEqual([...(await out.waitFor(/[\r\n](\d+)\r\n(\d+)\r\nPROMPT\$ $/, at)).slice(1)], ['132', '40']);
  // The kernel sent SIGWINCH to the foreground job: bash itself saw the new size.
  at = out.mark();
  await type(d, process_id, 'echo "cols=$COLUMNS"\r');
  await out.waitFor(/[\r\n]cols=132\r\n/, at);
  await type(d, process_id, 'exit 3\r');
  assert.deepEqual(await out.waitExit(), { exit_code: 3, signal: null });
  await expectError(await resize(d, process_id, 10, 10), 409, 'process_exited');
});

test('Ctrl-C (\\x03 on stdin) ends the foreground job and the prompt returns; the shell lives', async (t) => {
  const { process_id, pid, out } = await shell(t);
  await type(d, process_id, 'sleep 100\r');
  // Job control: sleep runs in a process group of its own, in the terminal's session.
  const sleeper = await until('sleep in the foreground', () => sessionProcesses(pid).find((p) => p.comm === 'sleep'));
  assert.notEqual(sleeper.pgid, pid);
  const at = out.mark();
  await type(d, process_id, '\x03');
  await out.waitFor(/\^C\r\nPROMPT\$ $/, at);
  await waitPidGone(sleeper.pid);
  assert.equal((await status(d, process_id)).state, 'running', 'the shell lives');
  const at2 = out.mark();
  await type(d, process_id, 'echo still here\r');
  await out.waitFor(/[\r\n]still here\r\nPROMPT\$ $/, at2);
});

test('a password prompt reads from the terminal (getpass), without echo', async () => {
  const { process_id } = await spawnProcess(d, {
    command: '/usr/bin/python3',
    args: ['-c', 'import getpass; print("got:" + getpass.getpass())'],
    allocate_tty: true,
  });
  const out = await LiveOutput.open(d, process_id);
  try {
    await out.waitFor(/Password: $/);
    await type(d, process_id, 's3cret\r');
    assert.deepEqual(await out.waitExit(), { exit_code: 0, signal: null });
    assert.match(out.text, /Password: \r\ngot:s3cret\r\n$/);
    assert.equal(out.text.split('s3cret').length, 2, 'the password is not echoed');
  } finally {
    out.close();
  }
});

test('isatty: stdin, stdout and stderr are the terminal; without allocate_tty they are pipes', async () => {
  const script = 'for fd in 0 1 2; do if [ -t $fd ]; then echo "$fd:tty"; else echo "$fd:pipe"; fi; done; tty';
  const onTty = await spawnProcess(d, { command: 'sh', args: ['-c', script], allocate_tty: true });
  const tty = await readOutput(d, onTty.process_id);
  assert.match(tty.stdout.toString(), /^0:tty\r\n1:tty\r\n2:tty\r\n\/dev\/pts\/\d+\r\n$/);
  assert.equal(tty.stderr.length, 0, 'a terminal has one stream');
  const onPipes = await spawnProcess(d, { command: 'sh', args: ['-c', script] });
  assert.equal((await readOutput(d, onPipes.process_id)).stdout.toString(), '0:pipe\n1:pipe\n2:pipe\nnot a tty\n');
  const s = await status(d, onPipes.process_id);
  assert.equal(s.tty, null);
});

test('stdin on a terminal that does not read: 504 with the bytes still queued, the daemon keeps serving, every byte arrives in order', async () => {
  const dir = scratch();
  const go = path.join(dir, 'go');
  const file = path.join(dir, 'got');
  const data = randomBytes(512 * 1024);
  const { process_id } = await spawnProcess(quick, {
    command: 'sh',
    args: ['-c', `stty raw -echo; while [ ! -e "$1" ]; do sleep 0.05; done; head -c ${data.length} > "$2"`, 'sh', go, file],
    allocate_tty: true,
  });
  const out = await LiveOutput.open(quick, process_id);
  try {
    // stty has run once the loop polls: wait for its first sleep in the session.
    const { pid } = await status(quick, process_id);
    await until('the terminal in raw mode', () => (sessionProcesses(pid).some((p) => p.comm === 'sleep') ? true : undefined));
    const res = await quick.fetch(`${PROC}/${process_id}/stdin`, { method: 'POST', json: { data_b64: b64(data) } });
    const body = await expectError(res, 504, 'timeout');
    const m = /(\d+) of (\d+) bytes of this request stay queued/.exec(String(body.message));
    assert.ok(m, String(body.message));
    assert.ok(Number(m[1]) > 0 && Number(m[1]) < data.length, 'the terminal took some, the rest stays queued');
    // A terminal that is not read never blocks the daemon's event loop.
    assert.equal((await quick.fetch('/healthz')).status, 200);
    writeFileSync(go, '');
    assert.equal((await waitExited(quick, process_id)).exit_code, 0);
    assert.equal(createHash('sha256').update(readFileSync(file)).digest('hex'), createHash('sha256').update(data).digest('hex'));
  } finally {
    out.close();
  }
});

test('close: true on a terminal writes ^D (EOF at the start of a line) and counts only the caller\'s bytes', async () => {
  const { process_id } = await spawnProcess(d, { command: 'cat', allocate_tty: true });
  const res = await d.fetch(`${PROC}/${process_id}/stdin`, { method: 'POST', json: { data_b64: b64('hello\n'), close: true } });
  assert.deepEqual(await res.json(), { written_bytes: 6 });
  const out = await readOutput(d, process_id);
  assert.equal(out.stdout.toString(), 'hello\r\nhello\r\n', 'the echo, then cat');
  assert.deepEqual(out.exit, { exit_code: 0, signal: null });
});

test('a process that closes its terminal before it exits is not hung up: its exit code is reported, not SIGHUP', async () => {
  // The session closes every fd of its terminal (as cat does on its way out), then lives on until
  // the test says go. A daemon that closed the terminal on that EIO hung it up (SIGHUP).
  const go = path.join(scratch(), 'go');
  const { process_id } = await spawnProcess(d, {
    command: 'sh',
    args: ['-c', 'echo closing; exec 0<&- 1>&- 2>&-; while [ ! -e "$1" ]; do sleep 0.05; done; exit 5', 'sh', go],
    allocate_tty: true,
  });
  const held = d.waitLog((l) => l.event === 'terminal_closed_before_exit' && l.process_id === process_id);
  const first = await Promise.race([held.then(() => 'held' as const), waitExited(d, process_id)]);
  assert.equal(first, 'held', `the terminal was closed before the exit: ${JSON.stringify(first)}`);
  assert.equal((await status(d, process_id)).state, 'running');
  writeFileSync(go, '');
  const out = await readOutput(d, process_id);
  assert.equal(out.stdout.toString(), 'closing\r\n');
  assert.deepEqual(out.exit, { exit_code: 5, signal: null });
});

test('kill reaches the whole session of a terminal: the shell and its jobs in groups of their own', async (t) => {
  const { process_id, pid, out } = await shell(t);
  await type(d, process_id, 'sleep 301 &\r');
  const job = await until('the background job', () => sessionProcesses(pid).find((p) => p.comm === 'sleep'));
  assert.notEqual(job.pgid, pid, 'the job has a group of its own');
  assert.deepEqual(await (await kill(d, process_id, 'KILL')).json(), { ok: true });
  await waitPidGone(job.pid);
  assert.equal((await out.waitExit()).signal, 'SIGKILL');
});

test('refusals: resize of a pipe process is 409 not_a_tty; bad sizes 400; an unknown command is 400 before anything starts', async () => {
  const pipe = await spawnProcess(d, { command: 'sleep', args: ['300'] });
  await expectError(await resize(d, pipe.process_id, 24, 80), 409, 'not_a_tty');
  await kill(d, pipe.process_id, 'KILL');
  const { process_id } = await spawnProcess(d, { command: 'sleep', args: ['300'], allocate_tty: true });
  for (const [rows, cols] of [[0, 80], [24, 1001], [24.5, 80]] as const) await expectError(await resize(d, process_id, rows, cols), 400, 'bad_request');
  await expectError(await d.fetch(`${PROC}/${process_id}/resize`, { method: 'POST', json: { rows: 24 } }), 400, 'bad_request');
  await kill(d, process_id, 'KILL');
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ command: 'no-such-command-here' }, /^command: not found: no-such-command-here \(searched PATH\)$/],
    [{ command: '/etc/passwd' }, /^command: permission denied: \/etc\/passwd is not executable by browser$/],
    [{ command: 'true', cwd: '/no/such/dir' }, /^cwd: /],
    [{ command: 'true', rows: 0 }, /^rows: /],
  ];
  for (const [body, message] of cases) {
    const err = await expectError(await d.fetch(`${PROC}/spawn`, { method: 'POST', json: { ...body, allocate_tty: true } }), 400, 'bad_request');
    assert.match(String(err.message), message);
  }
  // rows and cols without allocate_tty: as the SDK says, only used with a terminal.
  const plain = await spawnProcess(d, { command: 'sh', args: ['-c', '[ -t 1 ] || echo pipe'], rows: 50, cols: 50 });
  assert.equal((await readOutput(d, plain.process_id)).stdout.toString(), 'pipe\n');
});

test('a terminal for another user: its ids through setpriv, its own supplementary groups (initgroups), not the daemon\'s', async () => {
  const grouped = await startDaemon({ wrapper: ['setpriv', '--groups', '4,27'] });
  try {
    const { process_id } = await spawnProcess(grouped, {
      command: 'sh',
      args: ['-c', 'id -u; id -g; grep -E "^(Groups|Uid):" /proc/self/status; [ -t 0 ] && echo tty'],
      as_user: 'nobody',
      allocate_tty: true,
    });
    const text = (await readOutput(grouped, process_id)).stdout.toString();
    assert.match(text, /^65534\r\n65534\r\nUid:\t65534\t65534\t65534\t65534\r\nGroups:\t65534 ?\r\ntty\r\n$/);
    const pipe = await spawnProcess(grouped, { command: 'sh', args: ['-c', 'grep "^Groups:" /proc/self/status'], as_user: 'nobody' });
    assert.match((await readOutput(grouped, pipe.process_id)).stdout.toString(), /^Groups:\t65534 ?\n$/, 'as for pipes');
  } finally {
    await grouped.cleanup();
  }
});

test('the terminal module is loaded at start: one that cannot load stops the daemon with exit 2, naming the package', async () => {
  const fake = path.join(scratch(), 'broken-pty');
  mkdirSync(fake);
  writeFileSync(path.join(fake, 'index.js'), "throw new Error('cannot open shared object file: pty.node');\n");
  const broken = await startDaemon({ env: { BROWSERD_TEST_HOOKS: `pty_package=${fake}` }, waitListening: false });
  const exit = await broken.waitExit();
  await broken.cleanup();
  assert.equal(exit.code, 2);
  const line = broken.logs.find((l) => l.event === 'dependency_missing');
  assert.ok(line, broken.stderr);
  assert.equal(line.package, fake);
  assert.match(String(line.msg), /broken-pty cannot be loaded, so no process could get a terminal \(allocate_tty\): cannot open shared object file/);
  assert.ok(!broken.logs.some((l) => l.event === 'listening'));
});
