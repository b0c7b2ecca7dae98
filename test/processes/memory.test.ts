// @long: one of the slowest files (10 s or more alone), started first by test/run.mjs.
// The memory budget of the processes module through the real daemon (docs/memory.md): a child
// writing 1-byte chunks keeps its replay buffer within BROWSERD_OUTPUT_BUFFER_BYTES in real bytes
// (browserd_memory_pool_bytes{pool="process_output"}), and the stdin bytes queued over every process
// are capped by BROWSERD_STDIN_QUEUE_TOTAL_BYTES (429 limit_exceeded, inner_error stdin_queue_total).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { readOutput, spawnProcess, waitExited } from '../helpers/processes.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';

const REPLAY_BYTES = 2 * 1024;
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
  d = await startDaemon({ env: { BROWSERD_OUTPUT_BUFFER_BYTES: String(REPLAY_BYTES) } });
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
  const { process_id } = await spawnProcess(d, { command: 'python3', args: ['-c', DRIP, String(DRIP_BYTES)] });
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
