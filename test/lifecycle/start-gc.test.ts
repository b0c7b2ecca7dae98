// The collection after the start (daemon/core/start-gc.ts): V8's collector is reachable from the
// daemon's bundle, and the collection gives back the young generation a start grew.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { getHeapSpaceStatistics } from 'node:v8';
import { collectNow } from '../../daemon/core/start-gc.js';
import { startDaemon } from '../kit/daemon.js';

const youngBytes = (): number => getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.physical_space_size ?? 0;

test('collectNow shrinks a young generation grown by objects that survived, once they are garbage', () => {
  // Objects that survive scavenges make V8 grow its young generation (as the daemon's start does).
  let keep: object[][] = [];
  for (let round = 0; round < 40; round++) keep.push(Array.from({ length: 20_000 }, (_, i) => ({ i, round })));
  const grown = youngBytes();
  keep = [];
  assert.equal(keep.length, 0);
  const ms = collectNow();
  assert.equal(typeof ms, 'number', "V8's collector is reachable");
  const after = youngBytes();
  assert.ok(after < grown / 2, `young generation ${grown} bytes before, ${after} after`);
});

test('the daemon collects once after listening and says so (debug log start_gc with its duration)', async () => {
  const d = await startDaemon();
  try {
    const line = await d.waitLog((l) => l.event === 'start_gc', 30_000);
    assert.equal(typeof line.ms, 'number', JSON.stringify(line));
  } finally {
    await d.cleanup();
  }
});
