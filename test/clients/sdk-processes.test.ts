// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The processes routes as the official SDK (@onkernel/sdk 0.84) sends them, against the real
// daemon: exec, spawn (also on a terminal), stdin, status, stdoutStream (the SDK's Stream: the exit
// event reaches SDK code), kill and resize. Every answer is checked at runtime against a zod
// schema that mirrors the SDK's declared type (resources/browsers/process.d.ts): required fields
// required, optional ones optional, exact types (extra fields are allowed, as by the SDK).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import Kernel, { APIError } from '@onkernel/sdk';
import { z } from 'zod';
import { startDaemon, type Daemon } from '../kit/daemon.js';
import { until } from '../kit/wait.js';

/** ProcessExecResponse */
const execResponse = z.object({ duration_ms: z.number().optional(), exit_code: z.number().optional(), stderr_b64: z.string().optional(), stdout_b64: z.string().optional() });
/** ProcessSpawnResponse */
const spawnResponse = z.object({ pid: z.number().optional(), process_id: z.string().optional(), started_at: z.string().optional() });
/** ProcessStatusResponse */
const statusResponse = z.object({
  cpu_pct: z.number().optional(),
  exit_code: z.number().nullable().optional(),
  mem_bytes: z.number().optional(),
  state: z.enum(['running', 'exited']).optional(),
});
/** ProcessStdinResponse */
const stdinResponse = z.object({ written_bytes: z.number().optional() });
/** ProcessStdoutStreamResponse */
const streamEvent = z.object({
  data_b64: z.string().optional(),
  event: z.literal('exit').optional(),
  exit_code: z.number().optional(),
  stream: z.enum(['stdout', 'stderr']).optional(),
});
/** ProcessKillResponse, ProcessResizeResponse */
const okResponse = z.object({ ok: z.boolean() });

const ID = 'local';
let d: Daemon;
let client: Kernel;

before(async () => {
  d = await startDaemon();
  client = new Kernel({ apiKey: d.token ?? '', baseURL: d.url, maxRetries: 0 });
});
after(() => d.cleanup());

const text = (b64: string | undefined): string => Buffer.from(b64 ?? '', 'base64').toString();

function waitState(processId: string, state: 'running' | 'exited'): Promise<z.infer<typeof statusResponse>> {
  return until(`process ${processId} to be ${state}`, async () => {
    const s = statusResponse.parse(await client.browsers.process.status(processId, { id: ID }));
    return s.state === state ? s : undefined;
  });
}

test('exec with every field the SDK declares (null for the nullable ones)', async () => {
  const r = execResponse.parse(
    await client.browsers.process.exec(ID, {
      command: 'sh',
      args: ['-c', 'echo "$GREETING from $(id -u)"; echo err >&2; exit 4'],
      env: { GREETING: 'hello' },
      as_root: true,
      as_user: null,
      cwd: null,
      timeout_sec: null,
    }),
  );
  assert.equal(r.exit_code, 4);
  assert.equal(text(r.stdout_b64), 'hello from 0\n');
  assert.equal(text(r.stderr_b64), 'err\n');
  assert.equal(typeof r.duration_ms, 'number');
});

test('spawn, stdin, status, then the stdout stream: the SDK yields the output and the exit event with its exit_code', async () => {
  const spawned = spawnResponse.parse(
    await client.browsers.process.spawn(ID, { command: 'sh', args: ['-c', 'read line; echo "got $line"; echo bye >&2; exit 5'], cwd: null, as_user: null, timeout_sec: 60 }),
  );
  assert.ok(spawned.process_id && spawned.pid && spawned.started_at);
  const id = spawned.process_id;
  const running = await waitState(id, 'running');
  assert.equal(running.exit_code, null);
  assert.equal(typeof running.cpu_pct, 'number');
  assert.equal(typeof running.mem_bytes, 'number');
  // Right after its exec (setpriv → sh) a process's resident size can still read 0 in /proc: it is
  // blocked reading stdin from then on, so its memory shows up without anything written to it.
  await until('the running process to report its resident memory', async () => (statusResponse.parse(await client.browsers.process.status(id, { id: ID })).mem_bytes ?? 0) > 0);
  assert.deepEqual(stdinResponse.parse(await client.browsers.process.stdin(id, { id: ID, data_b64: Buffer.from('ping\n').toString('base64') })), { written_bytes: 5 });

  const stream = await client.browsers.process.stdoutStream(id, { id: ID });
  const events: z.infer<typeof streamEvent>[] = [];
  for await (const ev of stream) events.push(streamEvent.parse(ev));
  const out = events.filter((e) => e.stream === 'stdout').map((e) => text(e.data_b64)).join('');
  const err = events.filter((e) => e.stream === 'stderr').map((e) => text(e.data_b64)).join('');
  assert.equal(out, 'got ping\n');
  assert.equal(err, 'bye\n');
  const last = events.at(-1);
  assert.equal(last?.event, 'exit', 'the exit reaches SDK code');
  assert.equal(last?.exit_code, 5);
  const exited = await waitState(id, 'exited');
  assert.equal(exited.exit_code, 5);
});

test('kill: the SDK requires a signal; the group gets it', async () => {
  const { process_id } = spawnResponse.parse(await client.browsers.process.spawn(ID, { command: 'sleep', args: ['300'] }));
  assert.ok(process_id);
  assert.deepEqual(okResponse.parse(await client.browsers.process.kill(process_id, { id: ID, signal: 'TERM' })), { ok: true });
  const s = await waitState(process_id, 'exited');
  assert.equal(s.exit_code, null, 'ended by a signal');
});

test('a terminal through the SDK: spawn with allocate_tty, rows and cols; resize; a pipe process cannot be resized (409)', async () => {
  const { process_id } = spawnResponse.parse(
    await client.browsers.process.spawn(ID, { command: 'sh', args: ['-c', 'stty size; read x; stty size; [ -t 1 ] && echo tty'], allocate_tty: true, rows: 20, cols: 70 }),
  );
  assert.ok(process_id);
  let output = '';
  let exit: z.infer<typeof streamEvent> | null = null;
  let resized = false;
  for await (const ev of await client.browsers.process.stdoutStream(process_id, { id: ID })) {
    const e = streamEvent.parse(ev);
    assert.notEqual(e.stream, 'stderr', 'a terminal has one stream');
    if (e.event === 'exit') exit = e;
    else output += text(e.data_b64);
    if (!resized && output.includes('20 70\r\n')) {
      // The first size was read: resize, then let it read the second.
      resized = true;
      assert.deepEqual(okResponse.parse(await client.browsers.process.resize(process_id, { id: ID, rows: 50, cols: 160 })), { ok: true });
      assert.deepEqual(stdinResponse.parse(await client.browsers.process.stdin(process_id, { id: ID, data_b64: Buffer.from('\r').toString('base64') })), { written_bytes: 1 });
    }
  }
  assert.equal(output, '20 70\r\n\r\n50 160\r\ntty\r\n');
  assert.equal(exit?.exit_code, 0);

  const pipe = spawnResponse.parse(await client.browsers.process.spawn(ID, { command: 'sleep', args: ['300'] }));
  await assert.rejects(client.browsers.process.resize(pipe.process_id ?? '', { id: ID, rows: 10, cols: 10 }), (err: unknown) => {
    assert.ok(err instanceof APIError);
    assert.equal(err.status, 409);
    assert.equal((err.error as { code: string }).code, 'not_a_tty');
    return true;
  });
  await client.browsers.process.kill(pipe.process_id ?? '', { id: ID, signal: 'KILL' });
});
