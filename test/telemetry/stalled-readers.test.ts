// Stream memory is bounded: N telemetry readers that never read, while large events arrive, cost the
// daemon at most their documented buffers (one write of SSE_BATCH_BYTES each, docs/memory.md; it was
// one batch of 256 events, 3.6 MB of 14 KB events, each: 125 MiB for 24 readers), and once none of a
// write is taken for BROWSERD_SSE_STALL_MS each is told (a last `stream_dropped` frame) and dropped. A
// Last-Event-ID ahead of the newest event says so (`cursor_ahead`) instead of a silent stream.
// The stall bound is set to STALL_MS here, not its 30 s default: the drop is proven the same way, the
// file does not wait 30 s for it. The memory is the RSS once the events are in, as before; should a
// reader be dropped before that (a slow machine), the last RSS sampled while none had been
// (browserd_sse_readers_dropped_total{stream="telemetry"} still 0 after the sample): every stalled
// reader was still held when it was taken.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { SSE_BATCH_BYTES } from '../../daemon/core/streams/sse.js';
import { rssOf } from '../kit/procs.js';
import { startDaemon, TEST_TOKEN, type Daemon } from '../kit/daemon.js';
import { until } from '../kit/wait.js';

const READERS = 24;
/**
 * BROWSERD_SSE_STALL_MS here. A dropped reader's socket is destroyed once it has read nothing for
 * another STALL_MS: the test must start reading within that long of the drops to see the last frame.
 */
const STALL_MS = 15_000;
const EVENTS = 600;
const MiB = 1024 * 1024;
let d: Daemon;

before(async () => {
  d = await startDaemon({ env: { BROWSERD_TELEMETRY_MAX_STREAMS: String(READERS), BROWSERD_SSE_STALL_MS: String(STALL_MS) } });
});
after(async () => {
  await d.cleanup();
});

/** A reader that sends its request and never reads: the socket is paused from the start. */
function stalledReader(): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(Number(new URL(d.url).port), '127.0.0.1', () => {
      s.pause();
      s.write(`GET /telemetry/stream HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${TEST_TOKEN}\r\naccept: text/event-stream\r\n\r\n`, () => resolve(s));
    });
    s.once('error', reject);
  });
}

async function droppedCount(): Promise<number> {
  const text = await (await d.fetch('/metrics')).text();
  const m = /^browserd_sse_readers_dropped_total\{stream="telemetry"\} (\d+)/m.exec(text);
  return m === null ? 0 : Number(m[1]);
}

/** ~14 KB of data (7 strings of 2,000 characters: the custom events' string limit is 2,048). */
const big = (i: number): Record<string, string> => Object.fromEntries(Array.from({ length: 7 }, (_, k) => [`k${k}`, `${i}-${k}-`.padEnd(2000, 'x')]));

test('24 readers that never read cost at most their documented buffers, then are told and dropped', async (t) => {
  const post = async (from: number): Promise<void> => {
    for (let i = from; i < from + EVENTS; i++) {
      const res = await d.fetch('/telemetry/events', { method: 'POST', json: { type: 'filler', data: big(i) } });
      assert.equal(res.status, 201);
    }
  };
  // First without readers: the ring (BROWSERD_TELEMETRY_RING, 1,024 events) and the heap reach their
  // size under this load; what the readers add afterwards is theirs.
  await post(0);
  await post(EVENTS);
  const readers = await Promise.all(Array.from({ length: READERS }, () => stalledReader()));
  await until('every stream open (one more is 429)', async () => ((await d.fetch('/telemetry/stream')).status === 429 ? true : undefined));
  const rss0 = rssOf(d.pid);
  // RSS sampled while the events go in, a sample kept only if no reader had been dropped after it.
  let held = 0;
  let samples = 0;
  let posting = true;
  const sampler = (async () => {
    while (posting) {
      const rss = rssOf(d.pid);
      if ((await droppedCount()) > 0) break;
      held = rss;
      samples++;
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  await post(2 * EVENTS);
  posting = false;
  await sampler;
  const rssEnd = rssOf(d.pid);
  if ((await droppedCount()) === 0) {
    held = rssEnd;
    samples++;
  }
  assert.ok(samples > 0, 'no RSS sample was taken before the first drop');
  const grown = (held - rss0) / MiB;
  // Each reader: one write of SSE_BATCH_BYTES (and one event past it) at most; 40 MiB of slack for the
  // garbage of 600 requests not yet collected (RSS is what the kernel sees). Before the bound, one
  // write was a batch of 256 events (3.6 MB each here: ~86 MiB for the readers alone).
  const bound = (READERS * (SSE_BATCH_BYTES + 16 * 1024)) / MiB + 40;
  t.diagnostic(`RSS grew ${grown.toFixed(1)} MiB with ${READERS} stalled readers and ${EVENTS} events of 14 KB, ${samples} samples before any drop (bound ${bound.toFixed(1)} MiB)`);
  assert.ok(grown < bound, `RSS grew ${grown.toFixed(1)} MiB for ${READERS} stalled readers (bound ${bound.toFixed(1)} MiB)`);
  // After STALL_MS without a byte taken, each is dropped. The readers stalled at about the same event,
  // so their drops come together: once at least half are counted and no more came over a poll, or all.
  let last = -1;
  await until('the stalled readers dropped', async () => {
    const n = await droppedCount();
    const settled = n >= READERS || (n >= READERS / 2 && n === last);
    last = n;
    return settled ? true : undefined;
  }, 90_000, 200);
  // Reading them now: each that had a stream gets, last, a frame saying why, and the stream ends. A
  // reader refused 429 (the limit reached before it, under load) has no stream, and its connection may
  // be kept alive: a reader is done at its close, or once nothing more came for 10 s after it resumed.
  const ending = Promise.all(readers.map((r) => new Promise<{ text: string; closed: boolean }>((resolve) => {
    const chunks: Buffer[] = [];
    let quiet: NodeJS.Timeout | undefined;
    const done = (closed: boolean) => (): void => {
      clearTimeout(quiet);
      resolve({ text: Buffer.concat(chunks).toString(), closed });
    };
    const idle = (): void => {
      clearTimeout(quiet);
      quiet = setTimeout(done(false), 10_000);
    };
    r.on('data', (c: Buffer) => {
      chunks.push(c);
      idle();
    });
    r.on('error', () => undefined);
    r.once('close', done(true));
    idle();
    r.resume();
  })));
  // A dropped reader's stream slot is free again: half of them open at once (one free slot could be a
  // reader refused 429 under load).
  await until('half the streams can open again', async () => {
    const opened = await Promise.all(Array.from({ length: READERS / 2 }, () => d.fetch('/telemetry/stream', { signal: AbortSignal.timeout(2000) }).catch(() => null)));
    const ok = opened.every((res) => res?.status === 200);
    await Promise.all(opened.map((res) => res?.body?.cancel().catch(() => undefined)));
    return ok ? true : undefined;
  }, 90_000, 1000);
  const ends = await ending;
  // Every stream the daemon ended was a dropped one, and says so; most were (a reader the events did
  // not fill may still be open).
  const dropped = ends.filter((e) => e.closed && e.text.startsWith('HTTP/1.1 200')).map((e) => e.text);
  assert.ok(dropped.length >= READERS / 2, `${dropped.length} of ${READERS} readers were dropped`);
  for (const text of dropped) {
    const last = text.split('\n\n').filter((f) => f.includes('data: ')).at(-1) ?? '';
    assert.match(last, /"type":"stream_dropped"/);
    assert.match(last, /"next_seq":\d+/);
  }
  for (const s of readers) s.destroy();
});

test('Last-Event-ID ahead of the newest event: one cursor_ahead frame says so, then new events', async () => {
  const ctl = new AbortController();
  const res = await d.fetch('/telemetry/stream', { headers: { 'last-event-id': '999999999' }, signal: ctl.signal });
  assert.equal(res.status, 200);
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  let text = '';
  const dec = new TextDecoder();
  await until('the cursor_ahead frame', async () => {
    const { value } = await reader.read();
    text += dec.decode(value);
    return text.includes('\n\n') ? true : undefined;
  });
  assert.match(text, /"type":"cursor_ahead"/);
  assert.match(text, /"last_event_id":999999999/);
  await d.fetch('/telemetry/events', { method: 'POST', json: { type: 'after.cursor' } });
  await until('the next new event', async () => {
    const { value } = await reader.read();
    text += dec.decode(value);
    return text.includes('after.cursor') ? true : undefined;
  });
  ctl.abort();
});
