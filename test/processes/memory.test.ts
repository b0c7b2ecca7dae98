// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// @long: one of the slowest files (10 s or more alone), started first by test/run.mjs.
// The memory budget of the processes module through the real daemon (docs/memory.md): a child
// writing 1-byte chunks keeps its replay buffer within BROWSERD_OUTPUT_BUFFER_BYTES in real bytes
// (browserd_memory_pool_bytes{pool="process_output"}), and the stdin bytes queued over every process
// are capped by BROWSERD_STDIN_QUEUE_TOTAL_BYTES (429 limit_exceeded, inner_error stdin_queue_total),
// the output every running exec keeps by BROWSERD_EXEC_OUTPUT_TOTAL_BYTES (the rest truncated).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { expectError } from '../helpers/http.js';
import { execProcess, kill, readOutput, spawnProcess, waitExited, writeStdin } from '../helpers/processes.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';
import { until } from '../kit/wait.js';

const REPLAY_BYTES = 2 * 1024;
const MiB = 1024 * 1024;
const STDIN_LIMIT = 4 * MiB;
const STDIN_TOTAL = 8 * MiB;
const EXEC_TOTAL = 64 * 1024;
const DRIP_BYTES = 6_000;

/**
 * Writes `n` bytes one at a time, each only once the daemon has read the one before (the stdout
 * socket's send queue, TIOCOUTQ, is empty): every byte reaches the daemon as a chunk of its own.
 */
const DRIP = `
import fcntl, os, struct, sys, termios
n = int(sys.argv[1])
q = bytearray(4)
for i in range(n):
    os.write(1, bytes([97 + i % 26]))
    while True:
        fcntl.ioctl(1, termios.TIOCOUTQ, q)
        if struct.unpack('i', q)[0] == 0: break
        os.sched_yield()
`;

let d: Daemon;

before(async () => {
  d = await startDaemon({
    env: {
      BROWSERD_OUTPUT_BUFFER_BYTES: String(REPLAY_BYTES),
      BROWSERD_STDIN_LIMIT_BYTES: String(STDIN_LIMIT),
      BROWSERD_STDIN_QUEUE_TOTAL_BYTES: String(STDIN_TOTAL),
      // A request the child does not read is answered 504 soon; its bytes stay queued.
      BROWSERD_STDIN_TIMEOUT_MS: '500',
      BROWSERD_EXEC_OUTPUT_TOTAL_BYTES: String(EXEC_TOTAL),
    },
  });
});
after(async () => {
  await d.cleanup();
});

async function pool(name: string): Promise<number> {
  const text = await (await d.fetch('/metrics')).text();
  const m = new RegExp(`^browserd_memory_pool_bytes\\{pool="${name}"\\} (\\d+)$`, 'm').exec(text);
  assert.ok(m !== null, `browserd_memory_pool_bytes{pool="${name}"} in /metrics`);
  return Number(m[1]);
}

test('a child writing 1-byte chunks: its replay buffer stays within its budget in real bytes', async () => {
  const { process_id } = await spawnProcess(d, { command: '/usr/bin/python3', args: ['-c', DRIP, String(DRIP_BYTES)] });
  const s = await waitExited(d, process_id, 120_000);
  assert.equal(s.exit_code, 0);
  const held = await pool('process_output');
  // Counted per chunk (a Buffer and its record cost ~380 bytes beside a 1-byte payload), the 2,048 newest
  // chunks would hold ~0.8 MB; coalesced and counted in real bytes they stay within the budget.
  assert.ok(held > 0 && held <= REPLAY_BYTES, `process_output holds ${held} bytes; the budget is ${REPLAY_BYTES}`);
  // The bytes kept are the newest, in order; the rest is reported lost.
  const out = await readOutput(d, process_id);
  assert.equal(out.lost + out.stdout.length, DRIP_BYTES);
  const expected = Buffer.from(Array.from({ length: DRIP_BYTES }, (_, i) => 97 + (i % 26))).subarray(out.lost);
  assert.ok(out.stdout.equals(expected), 'the newest bytes, in order');
  assert.ok(out.stdout.length > REPLAY_BYTES / 4, `most of the budget holds bytes: ${out.stdout.length}`);
});

test('stdin queued over every process passes BROWSERD_STDIN_QUEUE_TOTAL_BYTES: 429 stdin_queue_total, room again once the children are gone', async () => {
  // Two children that never read their stdin; each holds far less than its own cap (4 × 4 MiB).
  const [a, b] = await Promise.all([spawnProcess(d, { command: 'sleep', args: ['600'] }), spawnProcess(d, { command: 'sleep', args: ['600'] })]);
  // 4 MiB each: the socket takes a few hundred KiB, the rest stays queued in the daemon (504, bytes kept).
  for (const id of [a.process_id, b.process_id]) await expectError(await writeStdin(d, id, Buffer.alloc(STDIN_LIMIT, 1)), 504, 'timeout');
  const queued = await pool('stdin_queue');
  assert.ok(queued > STDIN_TOTAL - STDIN_LIMIT, `${queued} bytes queued`);
  const res = await writeStdin(d, a.process_id, Buffer.alloc(STDIN_LIMIT, 2));
  const body = await expectError(res, 429, 'limit_exceeded');
  assert.match(body.message as string, /BROWSERD_STDIN_QUEUE_TOTAL_BYTES/);
  assert.equal((body.inner_error as { code?: string } | undefined)?.code, 'stdin_queue_total');
  assert.equal(res.headers.get('x-should-retry'), 'true');
  assert.equal(await pool('stdin_queue'), queued, 'nothing of the refused request was queued');
  // The children go: what they did not read leaves the budget.
  for (const id of [a.process_id, b.process_id]) assert.equal((await kill(d, id, 'KILL')).status, 200);
  await until('the stdin queue to empty', async () => ((await pool('stdin_queue')) === 0 ? true : undefined));
});

test('exec output over every running exec is held to BROWSERD_EXEC_OUTPUT_TOTAL_BYTES: the rest is counted as truncated, and given back', async () => {
  // Far below its own limit (16 MiB), past the total.
  for (let round = 0; round < 2; round++) {
    const r = await execProcess(d, { command: 'head', args: ['-c', '200000', '/dev/zero'] });
    assert.equal(r.exit_code, 0);
    assert.equal(Buffer.from(r.stdout_b64, 'base64').length, EXEC_TOTAL, `round ${round}: the total is kept, and only it`);
    assert.equal(r.stdout_truncated_bytes, 200_000 - EXEC_TOTAL);
    assert.equal(await pool('exec_output'), 0, 'the answer gives back what the exec kept');
  }
  // 1-byte chunks are kept whole and in order (copied together, not kept one Buffer each).
  const r = await execProcess(d, { command: '/usr/bin/python3', args: ['-c', DRIP, '3000'] });
  const expected = Buffer.from(Array.from({ length: 3000 }, (_, i) => 97 + (i % 26)));
  assert.ok(Buffer.from(r.stdout_b64, 'base64').equals(expected));
  assert.equal(r.stdout_truncated_bytes, 0);
});
