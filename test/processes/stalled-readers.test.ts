// A process's output stream is bounded for a reader that never reads: each stalled reader costs the
// daemon at most one write (SSE_BATCH_BYTES of text, docs/memory.md) while the process goes on
// printing, and once none of a write is taken for BROWSERD_SSE_STALL_MS the reader gets a last `event:
// dropped` (data naming the offset to resume at) and is dropped (counted in
// browserd_sse_readers_dropped_total{stream="process_output"}). The one SSE writer
// (core/streams/sse.ts) does this for every stream; the telemetry side is test/telemetry/stalled-readers.
// The stall bound is STALL_MS here, not its 30 s default (the drop is proven the same way without
// waiting 30 s for it): 15 s of 2.5 MB/s is ~37 MB a reader would hold without the bound. RSS is
// sampled every second from before the readers connect until every one was dropped.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { SSE_BATCH_BYTES } from '../../daemon/core/streams/sse.js';
import { kill, parseSse, PROC, spawnProcess } from '../helpers/processes.js';
import { startDaemon, TEST_TOKEN, type Daemon } from '../kit/daemon.js';
import { rssOf } from '../kit/procs.js';
import { until } from '../kit/wait.js';

const READERS = 8;
/**
 * BROWSERD_SSE_STALL_MS here. A dropped reader's socket is destroyed once it has read nothing for
 * another STALL_MS: the test reads one within that long of the drops to see its last frame.
 */
const STALL_MS = 15_000;
const MiB = 1024 * 1024;
let d: Daemon;

before(async () => {
  d = await startDaemon({ env: { BROWSERD_SSE_STALL_MS: String(STALL_MS) } });
});
after(async () => {
  await d.cleanup();
});

/** A reader that sends its request and never reads: the socket is paused from the start. */
function stalledReader(path: string): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(Number(new URL(d.url).port), '127.0.0.1', () => {
      s.pause();
      s.write(`GET ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${TEST_TOKEN}\r\naccept: text/event-stream\r\n\r\n`, () => resolve(s));
    });
    s.once('error', reject);
  });
}

async function droppedCount(): Promise<number> {
  const text = await (await d.fetch('/metrics')).text();
  const m = /^browserd_sse_readers_dropped_total\{stream="process_output"\} (\d+)/m.exec(text);
  return m === null ? 0 : Number(m[1]);
}

test('readers of a process output stream that never read cost at most one write each, then are told and dropped', async (t) => {
  // 256 KiB every 0.1 s (~2.5 MB/s) for as long as the test runs: more than the readers' sockets hold.
  const { process_id } = await spawnProcess(d, { command: 'sh', args: ['-c', 'while :; do head -c 262144 /dev/zero; sleep 0.1; done'] });
  try {
    const rss0 = rssOf(d.pid);
    let most = 0;
    const sample = (): void => {
      most = Math.max(most, (rssOf(d.pid) - rss0) / MiB);
    };
    // Once a second, as with the 30 s bound (RSS carries the garbage of the output read meanwhile: more
    // samples would mostly catch more of it).
    const sampler = setInterval(sample, 1000).unref(); // cleared below; unref: a failed connect does not leave the file hanging
    const readers = await Promise.all(Array.from({ length: READERS }, () => stalledReader(`${PROC}/${process_id}/stdout/stream`)));
    // Each reader: one write of about SSE_BATCH_BYTES (and one chunk past it, as base64) at most; the
    // replay buffer (1 MiB) and 72 MiB of slack for garbage not yet collected (RSS is what the kernel
    // sees): the Buffers of the output read meanwhile (2.5 MB/s) are freed at a full GC, which V8 starts
    // for external memory once it grew by 64 MiB (kExternalAllocationSoftLimit): on a busy machine RSS
    // grows steadily toward that (measured: 50–62 MiB in 10–40 s, with and without the readers' bound),
    // and 8 more of the heap. Without the bound a reader would hold what was printed while it stalled:
    // STALL_MS of 2.5 MB/s as base64, ~33 MB each, ~260 MB for the 8.
    const bound = (READERS * (SSE_BATCH_BYTES + 96 * 1024)) / MiB + 1 + 72;
    try {
      await until('every stalled reader dropped', async () => (await droppedCount()) >= READERS ? true : undefined, 120_000, 250);
    } finally {
      clearInterval(sampler);
    }
    sample();
    t.diagnostic(`RSS grew at most ${most.toFixed(1)} MiB with ${READERS} stalled readers (bound ${bound.toFixed(1)} MiB)`);
    assert.ok(most < bound, `RSS grew ${most.toFixed(1)} MiB for ${READERS} stalled readers (bound ${bound.toFixed(1)} MiB)`);
    // Reading one now: what it was sent ends with the frame that says why, then the stream ends.
    const r = readers[0] as net.Socket;
    const chunks: Buffer[] = [];
    r.on('data', (c: Buffer) => chunks.push(c));
    r.resume();
    await new Promise<void>((resolve) => r.once('close', () => resolve()));
    const body = Buffer.concat(chunks).toString();
    // The body without its HTTP head and chunk-size lines (JSON data holds no raw CR).
    const events = parseSse(`\r\n${body.slice(body.indexOf('\r\n\r\n') + 4)}`.replace(/\r\n[0-9a-f]+\r\n/g, ''));
    const last = events.at(-1);
    assert.equal(last?.event, 'dropped', `last event: ${JSON.stringify(last)?.slice(0, 200)}`);
    const data = JSON.parse(last.data) as { event: string; reason: string; resume_offset: number };
    assert.equal(data.event, 'dropped');
    assert.match(data.reason, new RegExp(`took none of \\d+ bytes for ${STALL_MS / 1000} s`));
    assert.ok(Number.isInteger(data.resume_offset) && data.resume_offset > 0);
    for (const s of readers) s.destroy();
  } finally {
    await kill(d, process_id, 'KILL');
  }
});
