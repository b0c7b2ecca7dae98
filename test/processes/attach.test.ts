// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The WebSocket attach of a terminal process, through the real daemon with real programs:
// keystrokes round-trip (the p50 is reported, not asserted: timings belong to bench/cases/pty.ts),
// several clients each see everything and each may type, resize by a text frame, the close codes
// (4000 with the exit, 1013 for a reader that fell behind the replay buffer, 1001 at shutdown),
// replay or not, and the refusals (auth, scope, a process without a terminal).
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { kill, spawnProcess, status, waitExited } from '../helpers/processes.js';
import { attach, type Attached } from '../helpers/terminal.js';
import { agentScratchDirs } from '../kit/agent.js';
import { keysFile, startDaemon, type Daemon } from '../kit/daemon.js';
import { until, waitFile } from '../kit/wait.js';

const READER = 'reader-token-aaaaaaaaaaaaaaaa';
const scratch = agentScratchDirs('browserd-attach-'); // the API's processes (the agent user) write there
let d: Daemon;

before(async () => {
  const ALL = 'all-token-bbbbbbbbbbbbbbbbbb';
  const keys = keysFile([
    { id: 'all', token: ALL, scopes: ['processes:exec', 'processes:write', 'browser:read'] },
    { id: 'reader', token: READER, scopes: ['browser:read'] },
  ]);
  d = await startDaemon({ token: null, bearer: ALL, env: { BROWSERD_KEYS_FILE: keys } });
});
after(() => d.cleanup());

/** A terminal in raw mode whose cat echoes every byte back; READY once stty has run. */
async function echoTerminal(target: Daemon): Promise<{ id: string; client: Attached }> {
  const { process_id } = await spawnProcess(target, { command: 'sh', args: ['-c', 'stty raw -echo; echo READY; exec cat'], allocate_tty: true });
  const client = await attach(target, process_id);
  await client.waitFor(/READY\n/); // raw mode: no CR added
  return { id: process_id, client };
}

const percentile = (xs: number[], p: number): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))] as number;

test('keystrokes round-trip through the attach socket (p50 reported)', async (t) => {
  const { id, client } = await echoTerminal(d);
  const times: number[] = [];
  for (let i = 0; i < 200; i++) {
    const key = String.fromCharCode(97 + (i % 26));
    const from = client.text().length;
    const t0 = process.hrtime.bigint();
    client.ws.send(Buffer.from(key));
    await client.waitFor(new RegExp(`^${key}`), from);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  t.diagnostic(`attach keystroke round trip over ${times.length}: p50 ${percentile(times, 0.5).toFixed(3)} ms, p99 ${percentile(times, 0.99).toFixed(3)} ms`);
  assert.equal(times.length, 200);
  await kill(d, id, 'KILL');
  const closed = await client.closed;
  assert.equal(closed.code, 4000);
  assert.deepEqual(JSON.parse(closed.reason), { exit_code: null, signal: 'SIGKILL' });
});

test('two clients each see all output and each may type; a resize frame resizes; a bad text frame gets an error frame', async () => {
  const { process_id } = await spawnProcess(d, { command: 'bash', args: ['--norc', '--noprofile', '-i'], env: { PS1: 'P$ ' }, allocate_tty: true, cols: 80 });
  const a = await attach(d, process_id);
  const b = await attach(d, process_id);
  try {
    await a.waitFor(/P\$ /);
    await b.waitFor(/P\$ /);
    let at = [a.text().length, b.text().length] as const;
    a.ws.send(Buffer.from('echo from-$((20+1))\r'));
    for (const [c, from] of [[a, at[0]], [b, at[1]]] as const) await c.waitFor(/from-21\r\n/, from);
    at = [a.text().length, b.text().length];
    b.ws.send(JSON.stringify({ type: 'resize', rows: 33, cols: 111 }));
    await until('the resize', async () => ((await status(d, process_id)).tty?.cols === 111 ? true : undefined));
    b.ws.send(Buffer.from('tput cols\r'));
    for (const [c, from] of [[a, at[0]], [b, at[1]]] as const) await c.waitFor(/[\r\n]111\r\n/, from);

    b.ws.send('{"type":"resize","rows":0,"cols":80}');
    b.ws.send('not json');
    await until('two error frames', () => (b.controls.length === 2 ? true : undefined));
    for (const f of b.controls as { type: string; message: string }[]) assert.equal(f.type, 'error');
    assert.match((b.controls[0] as { message: string }).message, /rows: /);
    assert.match((b.controls[1] as { message: string }).message, /not JSON/);
    assert.equal(b.ws.readyState, b.ws.OPEN, 'the connection stays');

    a.ws.send(Buffer.from('exit 7\r'));
    for (const c of [a, b]) {
      const closed = await c.closed;
      assert.equal(closed.code, 4000);
      assert.deepEqual(JSON.parse(closed.reason), { exit_code: 7, signal: null });
    }
  } finally {
    a.ws.terminate();
    b.ws.terminate();
  }
});

test('after the exit: the replay, then 4000 at once; ?replay=false starts with what comes next', async () => {
  const { process_id } = await spawnProcess(d, { command: 'sh', args: ['-c', 'echo before; read x; echo after $x'], allocate_tty: true });
  const early = await attach(d, process_id);
  await early.waitFor(/before\r\n/);
  const live = await attach(d, process_id, { query: '?replay=false' });
  live.ws.send(Buffer.from('now\r'));
  const closed = await live.closed;
  assert.equal(closed.code, 4000);
  assert.doesNotMatch(live.text(), /before/);
  assert.match(live.text(), /after now\r\n$/);
  await waitExited(d, process_id);
  const late = await attach(d, process_id);
  assert.equal((await late.closed).code, 4000);
  assert.match(late.text(), /^before\r\nnow\r\nafter now\r\n$/);
  early.ws.terminate();
});

test('refusals in the error shape: no token 401, a token without processes:write 403, a process without a terminal 409, unknown 404, a bad query 400', async () => {
  const pipe = await spawnProcess(d, { command: 'sleep', args: ['300'] });
  const tty = await spawnProcess(d, { command: 'sleep', args: ['300'], allocate_tty: true });
  const refused = async (id: string, opts: { query?: string; token?: string }, status: number, code: string): Promise<void> => {
    const err = (await attach(d, id, opts).then(
      () => assert.fail('attached'),
      (e: unknown) => e,
    )) as { status: number; body: string };
    assert.equal(err.status, status, err.body);
    assert.equal((JSON.parse(err.body) as { code: string }).code, code);
  };
  await refused(pipe.process_id, {}, 409, 'not_a_tty');
  await refused('00000000-0000-4000-8000-000000000000', {}, 404, 'not_found');
  await refused(tty.process_id, { token: 'no-such-token-cccccccccccccc' }, 401, 'unauthorized');
  await refused(tty.process_id, { token: READER }, 403, 'forbidden');
  await refused(tty.process_id, { query: '?replay=maybe' }, 400, 'bad_request');
  await refused(tty.process_id, { query: '?from=0' }, 400, 'bad_request');
  await kill(d, pipe.process_id, 'KILL');
  await kill(d, tty.process_id, 'KILL');
});

test('a client that reads too slowly is closed with 1013 once the replay buffer dropped output not sent to it; shutdown closes with 1001', async () => {
  const small = await startDaemon({ env: { BROWSERD_OUTPUT_BUFFER_BYTES: '65536' } });
  try {
    const done = path.join(scratch(), 'written');
    const { process_id } = await spawnProcess(small, {
      command: 'sh',
      args: ['-c', 'stty raw -echo; read x; head -c 33554432 /dev/zero; : > "$1"; read y', 'sh', done],
      allocate_tty: true,
    });
    const slow = await attach(small, process_id);
    const watcher = await echoTerminal(small); // another process: its client stays
    slow.ws.pause(); // reads nothing from now on
    slow.ws.send(Buffer.from('go\n'));
    await waitFile(done, () => true, 120_000); // 32 MiB written while the client read nothing
    slow.ws.resume();
    const closed = await slow.closed;
    assert.equal(closed.code, 1013);
    assert.match(closed.reason, /^the client reads too slowly: \d+ bytes of output passed it$/);
    assert.ok(slow.text().length < 33554432, 'it did not get everything');
    await small.stop();
    assert.equal((await watcher.client.closed).code, 1001);
  } finally {
    await small.cleanup();
  }
});
