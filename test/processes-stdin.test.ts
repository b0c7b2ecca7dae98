// stdin through the HTTP API of the real daemon with real children: integrity, order under
// concurrency, strict base64, EOF, the 504 of a child that does not read (and its bytes arriving
// later, in order), the 409s, the 413, and EPIPE not hurting the daemon.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { startDaemon, tempDir, type Daemon } from './helpers/daemon.js';
import { expectError } from './helpers/http.js';
import {
  b64,
  execProcess,
  kill,
  PROC,
  readOutput,
  spawnProcess,
  status,
  waitExited,
  writeStdin,
} from './helpers/processes.js';

const STDIN_LIMIT = 2 * 1024 * 1024;
let d: Daemon;
const dir = tempDir('browserd-stdin-');

before(async () => {
  d = await startDaemon({ env: { BROWSERD_STDIN_TIMEOUT_MS: '1000', BROWSERD_STDIN_LIMIT_BYTES: String(STDIN_LIMIT) } });
});
after(async () => {
  await d.cleanup();
  rmSync(dir, { recursive: true, force: true });
});

const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

async function okWritten(res: Response, bytes: number): Promise<void> {
  const text = await res.text();
  assert.equal(res.status, 200, text);
  assert.deepEqual(JSON.parse(text), { written_bytes: bytes });
}

test('1 MiB of random bytes in 64 requests through sha256sum matches the local digest', async () => {
  const data = randomBytes(1024 * 1024);
  const { process_id } = await spawnProcess(d, { command: 'sha256sum' });
  const size = data.length / 64;
  for (let i = 0; i < 64; i++) {
    await okWritten(await writeStdin(d, process_id, data.subarray(i * size, (i + 1) * size), i === 63), size);
  }
  const out = await readOutput(d, process_id);
  assert.equal(out.stdout.toString(), `${sha256(data)}  -\n`);
  assert.deepEqual(out.exit, { exit_code: 0, signal: null });
  assert.equal(out.events.at(-1)?.event, 'exit');
});

test('16 concurrent writers: the child receives every byte, each request contiguous', async () => {
  const file = path.join(dir, 'concurrent.bin');
  const { process_id } = await spawnProcess(d, { command: 'sh', args: ['-c', 'cat > "$1"', 'sh', file] });
  // Request i is (40 KiB + i * 1000) bytes of the single value 0x41 + i: any interleaving splits a run.
  const payloads = Array.from({ length: 16 }, (_, i) => Buffer.alloc(40 * 1024 + i * 1000, 0x41 + i));
  const answers = await Promise.all(payloads.map((p) => writeStdin(d, process_id, p)));
  for (const [i, res] of answers.entries()) await okWritten(res, payloads[i]?.length ?? -1);
  await okWritten(await writeStdin(d, process_id, '', true), 0);
  assert.equal((await waitExited(d, process_id)).exit_code, 0);

  const got = readFileSync(file);
  assert.equal(got.length, payloads.reduce((n, p) => n + p.length, 0));
  const runs: [number, number][] = [];
  for (let i = 0; i < got.length; ) {
    let j = i;
    while (j < got.length && got[j] === got[i]) j++;
    runs.push([got[i] as number, j - i]);
    i = j;
  }
  assert.equal(runs.length, 16, 'one run per request: no request was split');
  assert.deepEqual(
    runs.map(([v, n]) => [v, n]).sort((a, b) => a[0] - b[0]),
    payloads.map((p, i) => [0x41 + i, p.length]),
  );
});

test('invalid base64 is 400 bad_request naming data_b64, and nothing of it is written', async () => {
  const { process_id } = await spawnProcess(d, { command: 'cat' });
  const cases = {
    'a character outside the alphabet': 'aGVs*G8=',
    'bad padding': 'aG=v',
    'whitespace inside': 'aGVs bG8=',
    'a line break inside': 'aGVs\nbG8=',
    'length not a multiple of 4': 'aGVsbG8',
    'base64url': 'aGV-bG8_',
  };
  for (const [what, text] of Object.entries(cases)) {
    const res = await d.fetch(`${PROC}/${process_id}/stdin`, { method: 'POST', json: { data_b64: text } });
    const body = await expectError(res, 400, 'bad_request');
    const details = body.details as { code: string; message: string }[];
    assert.equal(details.length, 1, what);
    assert.equal(details[0]?.code, 'invalid_input');
    assert.match(details[0]?.message ?? '', /^data_b64: not strict base64: /, what);
  }
  await expectError(await d.fetch(`${PROC}/${process_id}/stdin`, { method: 'POST', json: { data_b64: 42 } }), 400, 'bad_request');
  await expectError(await d.fetch(`${PROC}/${process_id}/stdin`, { method: 'POST', json: { data_b64: 'aGk=', extra: 1 } }), 400, 'bad_request');
  await okWritten(await writeStdin(d, process_id, 'only this', true), 9);
  const out = await readOutput(d, process_id);
  assert.equal(out.stdout.toString(), 'only this');
});

test('close: true sends EOF after the data: the child sees EOF and exits', async () => {
  const { process_id } = await spawnProcess(d, { command: 'sh', args: ['-c', 'cat; echo "EOF seen" >&2'] });
  await okWritten(await writeStdin(d, process_id, 'last words\n', true), 11);
  const out = await readOutput(d, process_id);
  assert.equal(out.stdout.toString(), 'last words\n');
  assert.equal(out.stderr.toString(), 'EOF seen\n');
  assert.deepEqual(out.exit, { exit_code: 0, signal: null });
});

test('a child that does not read: 504 saying how many bytes stay queued; they arrive later, in order', async () => {
  const file = path.join(dir, 'late-reader.bin');
  const { process_id } = await spawnProcess(d, { command: 'sh', args: ['-c', 'sleep 6; cat > "$1"', 'sh', file] });
  const first = randomBytes(1536 * 1024); // far more than the pipe (a socket pair, some 200 KiB) holds
  const second = randomBytes(10 * 1024);
  const third = randomBytes(1000);

  const r1 = await expectError(await writeStdin(d, process_id, first), 504, 'timeout');
  const m1 = /(\d+) of (\d+) bytes of this request stay queued \(behind (\d+) bytes of earlier requests\)/.exec(String(r1.message));
  assert.ok(m1, String(r1.message));
  assert.equal(Number(m1[2]), first.length);
  assert.ok(Number(m1[1]) > 0 && Number(m1[1]) <= first.length, String(r1.message));
  assert.equal(Number(m1[3]), 0);

  const r2 = await expectError(await writeStdin(d, process_id, second), 504, 'timeout');
  const m2 = /(\d+) of (\d+) bytes of this request stay queued \(behind (\d+) bytes of earlier requests\)/.exec(String(r2.message));
  assert.ok(m2, String(r2.message));
  assert.equal(Number(m2[1]), second.length, 'nothing of the second request can be in the pipe yet');
  assert.ok(Number(m2[3]) > 0, 'the first request is still ahead of it');

  // The last one may be answered 200 (the child reads by then) or 504; either way its bytes come last.
  const r3 = await writeStdin(d, process_id, third, true);
  assert.ok(r3.status === 200 || r3.status === 504, `status ${r3.status}`);
  await r3.text();

  assert.equal((await waitExited(d, process_id)).exit_code, 0);
  assert.equal(sha256(readFileSync(file)), sha256(Buffer.concat([first, second, third])));
});

test('stdin after exit: 409 process_exited', async () => {
  const { process_id } = await spawnProcess(d, { command: 'true' });
  await waitExited(d, process_id);
  await expectError(await writeStdin(d, process_id, 'late'), 409, 'process_exited');
});

test('stdin after close: 409 stdin_closed', async () => {
  const { process_id } = await spawnProcess(d, { command: 'sleep', args: ['60'] });
  await okWritten(await writeStdin(d, process_id, '', true), 0);
  await expectError(await writeStdin(d, process_id, 'more'), 409, 'stdin_closed');
  await expectError(await writeStdin(d, process_id, '', true), 409, 'stdin_closed');
  assert.equal((await kill(d, process_id, 'KILL')).status, 200);
  await waitExited(d, process_id);
});

test('a child that closed its stdin (EPIPE): 409 stdin_closed, and the daemon carries on', async () => {
  const { process_id } = await spawnProcess(d, { command: 'sh', args: ['-c', 'exec 0<&-; echo closed; sleep 60'] });
  const out = await d.fetch(`${PROC}/${process_id}/stdout/stream`);
  const reader = out.body?.getReader();
  assert.ok(reader);
  const first = await reader.read(); // "closed" was printed: stdin is closed by now
  assert.match(Buffer.from(first.value ?? []).toString(), /data:/);
  await reader.cancel();
  // Large enough that the socket buffer cannot swallow it whole.
  const res = await writeStdin(d, process_id, randomBytes(1024 * 1024));
  await expectError(res, 409, 'stdin_closed');
  await expectError(await writeStdin(d, process_id, 'again'), 409, 'stdin_closed');
  assert.equal((await status(d, process_id)).state, 'running');
  assert.equal((await d.fetch('/healthz')).status, 200);
  assert.equal((await kill(d, process_id, 'KILL')).status, 200);
  await waitExited(d, process_id);
});

test('data over the stdin limit: 413 with the limit; exec stdin_b64 too', async () => {
  const { process_id } = await spawnProcess(d, { command: 'cat' });
  const body = await expectError(await writeStdin(d, process_id, Buffer.alloc(STDIN_LIMIT + 1)), 413, 'payload_too_large');
  assert.match(String(body.message), new RegExp(`limit of ${STDIN_LIMIT} bytes`));
  await okWritten(await writeStdin(d, process_id, Buffer.alloc(STDIN_LIMIT), true), STDIN_LIMIT);
  await waitExited(d, process_id);
  const res = await d.fetch(`${PROC}/exec`, { method: 'POST', json: { command: 'cat', stdin_b64: b64(Buffer.alloc(STDIN_LIMIT + 1)) } });
  await expectError(res, 413, 'payload_too_large');
  const ok = await execProcess(d, { command: 'wc', args: ['-c'], stdin_b64: b64(Buffer.alloc(STDIN_LIMIT)) });
  assert.equal(Buffer.from(ok.stdout_b64, 'base64').toString().trim(), String(STDIN_LIMIT));
});

test('unknown process: 404; stdin bytes are counted in the metrics', async () => {
  await expectError(await writeStdin(d, '00000000-0000-4000-8000-000000000000', 'x'), 404, 'not_found');
  const metrics = await (await d.fetch('/metrics')).text();
  const m = /^browserd_stdin_bytes_total (\d+)/m.exec(metrics);
  assert.ok(m);
  assert.ok(Number(m[1]) >= 1024 * 1024 + STDIN_LIMIT, metrics.slice(0, 200));
});
