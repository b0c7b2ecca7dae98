// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The daemon's one event ring (daemon/core/seq-ring.ts), used by the telemetry bus and the log rings.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SeqRing } from '../../daemon/core/seq-ring.js';

test('numbers items from firstSeq and reads them from a cursor', () => {
  const ring = new SeqRing<string>({ maxItems: 10, maxBytes: 1000, firstSeq: 1 });
  assert.equal(ring.end, 1);
  assert.equal(ring.first, 1);
  assert.deepEqual(ring.read(1, 10), { items: [], lost: 0, next: 1 });
  assert.equal(ring.push('a', 1), 1);
  assert.equal(ring.push('b', 1), 2);
  assert.equal(ring.push('c', 1), 3);
  assert.deepEqual(ring.read(2, 10), { items: ['b', 'c'], lost: 0, next: 4 });
  assert.deepEqual(ring.read(1, 2), { items: ['a', 'b'], lost: 0, next: 3 });
  assert.deepEqual(ring.readBack(4, 2), ['c', 'b']);
  assert.deepEqual(ring.readBack(2, 5), ['a']);
});

test('evicts the oldest by count, and a reader behind them learns how many it lost', () => {
  const ring = new SeqRing<number>({ maxItems: 3, maxBytes: 1000 });
  for (let i = 0; i < 5; i++) ring.push(i, 1);
  assert.equal(ring.size, 3);
  assert.equal(ring.first, 2);
  assert.deepEqual(ring.read(0, 10), { items: [2, 3, 4], lost: 2, next: 5 });
  assert.deepEqual(ring.read(3, 10), { items: [3, 4], lost: 0, next: 5 });
});

test('evicts the oldest by bytes; an item larger than the bound alone is kept alone', () => {
  const ring = new SeqRing<string>({ maxItems: 100, maxBytes: 10 });
  ring.push('a', 4);
  ring.push('b', 4);
  assert.equal(ring.bytes, 8);
  ring.push('c', 4); // 12 > 10: 'a' goes
  assert.deepEqual(ring.read(0, 10), { items: ['b', 'c'], lost: 1, next: 3 });
  assert.equal(ring.bytes, 8);
  ring.push('big', 50);
  assert.equal(ring.size, 1);
  assert.equal(ring.bytes, 50);
  assert.deepEqual(ring.read(0, 10), { items: ['big'], lost: 3, next: 4 });
});

test('says when a cursor is ahead of the newest item', () => {
  const ring = new SeqRing<number>({ maxItems: 3, maxBytes: 100, firstSeq: 1 });
  ring.push(1, 1);
  assert.equal(ring.ahead(2), false);
  assert.equal(ring.ahead(3), true);
});

test('stays in order across many evictions (the compaction of the array)', () => {
  const ring = new SeqRing<number>({ maxItems: 100, maxBytes: 1e9 });
  for (let i = 0; i < 5000; i++) ring.push(i, 1);
  assert.equal(ring.first, 4900);
  const r = ring.read(4950, 1000);
  assert.equal(r.items.length, 50);
  assert.equal(r.items[0], 4950);
  assert.equal(r.items[49], 4999);
  assert.deepEqual(ring.readBack(4902, 10), [4901, 4900]);
});

test('wait resolves on the next push or on abort', async () => {
  const ring = new SeqRing<number>({ maxItems: 3, maxBytes: 100 });
  let woken = false;
  const waiting = ring.wait(0, new AbortController().signal).then(() => (woken = true));
  await Promise.resolve();
  assert.equal(woken, false);
  ring.push(7, 1);
  await waiting;
  assert.equal(woken, true);
  await ring.wait(0, new AbortController().signal); // an item is there already
  const stop = new AbortController();
  const aborted = ring.wait(5, stop.signal);
  stop.abort();
  await aborted;
});
