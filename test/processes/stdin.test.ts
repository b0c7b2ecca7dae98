// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// stdin through the HTTP API of the real daemon with real children: integrity, order under
// concurrency, strict base64, EOF, the 504 of a child that does not read (and its bytes arriving
// later, in order), the cap on queued bytes (429), the 409s, the 413, and EPIPE not hurting the
// daemon. A child that must not read yet waits for a file the test creates: no assertion depends
// on how long anything takes.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { expectError, rawRequest } from '../helpers/http.js';
import { base64Length } from '../../daemon/core/strict-base64.js';
import { b64, execProcess, kill, PROC, readOutput, spawnProcess, status, waitExited, writeStdin } from '../helpers/processes.js';
import { agentTempDir } from '../kit/agent.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';
import { until } from '../kit/wait.js';

const STDIN_LIMIT = 2 * 1024 * 1024;
/** The stdin limit of `quick`; its queued-bytes cap is 4 times that. */
const QUICK_LIMIT = 1024 * 1024;
/** A daemon with a stdin deadline no child that reads can miss. */
let d: Daemon;
/** A daemon with a short stdin deadline, for children that do not read (504 and the queue cap). */
let quick: Daemon;
const dir = agentTempDir('browserd-stdin-'); // the API's processes (the agent user) write there

before(async () => {
  [d, quick] = await Promise.all([
    startDaemon({ env: { BROWSERD_STDIN_TIMEOUT_MS: '60000', BROWSERD_STDIN_LIMIT_BYTES: String(STDIN_LIMIT) } }),
    startDaemon({ env: { BROWSERD_STDIN_TIMEOUT_MS: '100', BROWSERD_STDIN_LIMIT_BYTES: String(QUICK_LIMIT) } }),
  ]);
});
after(async () => {
  await Promise.all([d.cleanup(), quick.cleanup()]);
  rmSync(dir, { recursive: true, force: true });
});

const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

/** A shell script that reads nothing until the file $1 exists, then copies its stdin to the file $2. */
const READ_WHEN_TOLD = 'while [ ! -e "$1" ]; do sleep 0.05; done; cat > "$2"';

const QUEUED_RE = /(\d+) of (\d+) bytes of this request stay queued \(behind (\d+) bytes of earlier requests\)/;

/** The 504's counts: bytes of the request still queued, its size, and the bytes queued ahead of it. */
function queuedCounts(message: unknown): { queued: number; size: number; behind: number } {
  const m = QUEUED_RE.exec(String(message));
  assert.ok(m, String(message));
  return { queued: Number(m[1]), size: Number(m[2]), behind: Number(m[3]) };
}

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

test('16 concurrent writers of 100-300 KiB: the child receives every byte, each request contiguous', async () => {
  const go = path.join(dir, 'concurrent.go');
  const file = path.join(dir, 'concurrent.bin');
  const { process_id } = await spawnProcess(d, { command: 'sh', args: ['-c', READ_WHEN_TOLD, 'sh', go, file] });
  // Distinct random payloads, each several of the writer's 64 KiB slices: interleaving between
  // slices of different requests would break a payload apart. The child reads only once all 16
  // are queued at the same time.
  const payloads = Array.from({ length: 16 }, (_, i) => randomBytes(100 * 1024 + i * 13_000 + 7));
  const pending = payloads.map((p) => writeStdin(d, process_id, p));
  await until('16 requests queued', () => (d.logs.filter((l) => l.event === 'stdin_queued' && l.process_id === process_id).length === 16 ? true : undefined));
  writeFileSync(go, '');
  const answers = await Promise.all(pending);
  for (const [i, res] of answers.entries()) await okWritten(res, payloads[i]?.length ?? -1);
  await okWritten(await writeStdin(d, process_id, '', true), 0);
  assert.equal((await waitExited(d, process_id)).exit_code, 0);

  const got = readFileSync(file);
  assert.equal(got.length, payloads.reduce((n, p) => n + p.length, 0));
  // Each payload appears whole at some offset, and the payloads tile what the child received.
  const placed = payloads.map((p, i) => ({ i, at: got.indexOf(p), len: p.length })).sort((a, b) => a.at - b.at);
  for (const p of placed) assert.ok(p.at >= 0, `request ${p.i} arrived contiguous`);
  let offset = 0;
  for (const p of placed) {
    assert.equal(p.at, offset, `request ${p.i} starts where the one before it ended`);
    offset += p.len;
  }
  assert.equal(offset, got.length);
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
  const go = path.join(dir, 'late-reader.go');
  const file = path.join(dir, 'late-reader.bin');
  const { process_id } = await spawnProcess(quick, { command: 'sh', args: ['-c', READ_WHEN_TOLD, 'sh', go, file] });
  const first = randomBytes(QUICK_LIMIT); // far more than the pipe (a socket pair, some 200 KiB) holds
  const second = randomBytes(10 * 1024);
  const third = randomBytes(1000);

  const r1 = queuedCounts((await expectError(await writeStdin(quick, process_id, first), 504, 'timeout')).message);
  assert.equal(r1.size, first.length);
  assert.ok(r1.queued > 0 && r1.queued <= first.length, 'the pipe cannot hold it all');
  assert.equal(r1.behind, 0);

  const r2 = queuedCounts((await expectError(await writeStdin(quick, process_id, second), 504, 'timeout')).message);
  assert.equal(r2.queued, second.length, 'nothing of the second request can be in the pipe yet');
  assert.equal(r2.behind, r1.queued, 'the rest of the first request is ahead of it');

  // The child still does not read: the last one (with EOF after it) is queued too.
  const r3 = await expectError(await writeStdin(quick, process_id, third, true), 504, 'timeout');
  assert.match(String(r3.message), /stdin will be closed after them/);
  assert.deepEqual(queuedCounts(r3.message), { queued: third.length, size: third.length, behind: r1.queued + second.length });
  await expectError(await writeStdin(quick, process_id, 'too late'), 409, 'stdin_closed');

  writeFileSync(go, '');
  assert.equal((await waitExited(quick, process_id)).exit_code, 0, 'the child read everything and saw EOF');
  assert.equal(sha256(readFileSync(file)), sha256(Buffer.concat([first, second, third])));
});

test('the bytes queued for one process are capped at 4 x the stdin limit: past it 429, nothing of it queued', async () => {
  const cap = 4 * QUICK_LIMIT;
  const go = path.join(dir, 'capped.go');
  const file = path.join(dir, 'capped.bin');
  const { process_id } = await spawnProcess(quick, { command: 'sh', args: ['-c', READ_WHEN_TOLD, 'sh', go, file] });
  // The child does not read: of the first request what the pipe cannot take stays queued ...
  const accepted = [randomBytes(QUICK_LIMIT)];
  const first = queuedCounts((await expectError(await writeStdin(quick, process_id, accepted[0] as Buffer), 504, 'timeout')).message);
  assert.ok(first.queued > 0 && first.behind === 0, JSON.stringify(first));
  // ... and every later request queues all of its bytes, until the next would pass the cap.
  let queued = first.queued;
  for (;;) {
    const data = randomBytes(QUICK_LIMIT);
    const res = await writeStdin(quick, process_id, data);
    if (queued + data.length > cap) {
      const body = await expectError(res, 429, 'limit_exceeded');
      assert.match(String(body.message), new RegExp(`: ${queued} bytes of earlier requests are not yet in the pipe`));
      assert.match(String(body.message), new RegExp(`limit of ${cap} bytes queued per process \\(4 × BROWSERD_STDIN_LIMIT_BYTES\\)`));
      break;
    }
    const r = queuedCounts((await expectError(res, 504, 'timeout')).message);
    assert.deepEqual(r, { queued: data.length, size: data.length, behind: queued });
    accepted.push(data);
    queued += data.length;
  }
  assert.ok(accepted.length >= 4, 'the cap was reached after several requests');
  // Nothing of the refused request was queued: EOF queues right behind the same bytes.
  const eof = queuedCounts((await expectError(await writeStdin(quick, process_id, '', true), 504, 'timeout')).message);
  assert.deepEqual(eof, { queued: 0, size: 0, behind: queued });

  writeFileSync(go, '');
  assert.equal((await waitExited(quick, process_id)).exit_code, 0);
  assert.equal(sha256(readFileSync(file)), sha256(Buffer.concat(accepted)), 'the child got exactly the accepted requests, in order');
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

test('data over the stdin limit: 413 naming the stdin limit and its setting; exec stdin_b64 too', async () => {
  const { process_id } = await spawnProcess(d, { command: 'cat' });
  const body = await expectError(await writeStdin(d, process_id, Buffer.alloc(STDIN_LIMIT + 1)), 413, 'payload_too_large');
  assert.match(String(body.message), new RegExp(`^data_b64 \\(${STDIN_LIMIT + 1} bytes decoded\\) is over its limit of ${STDIN_LIMIT} bytes \\(BROWSERD_STDIN_LIMIT_BYTES\\)$`));
  // Far over it: refused by its Content-Length before it is read, and read in chunks without one:
  // either way the answer names the stdin limit, not the size of the JSON body.
  const far = JSON.stringify({ data_b64: b64(Buffer.alloc(STDIN_LIMIT + 1024 * 1024)) });
  const sizeRe = new RegExp(`^data_b64 is over its limit of ${STDIN_LIMIT} bytes \\(BROWSERD_STDIN_LIMIT_BYTES\\): the request body is over \\d+ bytes`);
  const early = await d.fetch(`${PROC}/${process_id}/stdin`, { method: 'POST', body: far, headers: { 'content-type': 'application/json' } });
  assert.match(String((await expectError(early, 413, 'payload_too_large')).message), sizeRe);
  // Chunked: one chunk one byte past the route's body limit, so that the server reads every byte sent.
  const bodyLimit = base64Length(STDIN_LIMIT) + 1024;
  const chunk = 'A'.repeat(bodyLimit + 1);
  const { text } = await rawRequest(
    d.url,
    `POST ${PROC}/${process_id}/stdin HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${d.token}\r\ncontent-type: application/json\r\n` +
      `transfer-encoding: chunked\r\n\r\n${chunk.length.toString(16)}\r\n${chunk}`,
  );
  assert.match(text, /^HTTP\/1.1 413/);
  const streamed = JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as { code: string; message: string };
  assert.equal(streamed.code, 'payload_too_large');
  assert.match(streamed.message, sizeRe);
  assert.match(streamed.message, new RegExp(`the request body is over ${bodyLimit} bytes`));
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
