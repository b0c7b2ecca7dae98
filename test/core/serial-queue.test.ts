// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The daemon's one serial queue (daemon/core/serial-queue.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { QueueClosedError, SerialQueue } from '../../daemon/core/serial-queue.js';

/** A task the test ends by hand: `started` resolves when the queue runs it. */
function gate<T>(value: T): { task: () => Promise<T>; started: Promise<void>; finish: () => void; fail: (err: Error) => void } {
  let markStarted!: () => void;
  const started = new Promise<void>((r) => (markStarted = r));
  let finish!: () => void;
  let fail!: (err: Error) => void;
  const done = new Promise<T>((resolve, reject) => {
    finish = () => resolve(value);
    fail = reject;
  });
  return {
    task: () => {
      markStarted();
      return done;
    },
    started,
    finish,
    fail,
  };
}

test('tasks run one at a time, in the order queued, each caller getting its own result', async () => {
  const q = new SerialQueue();
  const log: string[] = [];
  const a = gate('a');
  const pa = q.run(async () => {
    log.push('a start');
    const v = await a.task();
    log.push('a end');
    return v;
  });
  const pb = q.run(() => {
    log.push('b');
    return 'b';
  });
  const pc = q.run(async () => {
    log.push('c');
    return 'c';
  });
  await a.started;
  assert.deepEqual(log, ['a start']); // b waits for a, though b is synchronous
  assert.equal(q.size, 3);
  a.finish();
  assert.deepEqual(await Promise.all([pa, pb, pc]), ['a', 'b', 'c']);
  assert.deepEqual(log, ['a start', 'a end', 'b', 'c']);
  assert.equal(q.size, 0);
});

test('a failing task rejects its own caller and does not stop the next', async () => {
  const q = new SerialQueue();
  const a = gate('a');
  const pa = q.run(a.task);
  const pb = q.run(() => {
    throw new Error('b fails');
  });
  const pc = q.run(() => 'c');
  a.fail(new Error('a fails'));
  await assert.rejects(pa, /a fails/);
  await assert.rejects(pb, /b fails/);
  assert.equal(await pc, 'c');
});

test('drain resolves once every task queued so far has settled, failures included', async () => {
  const q = new SerialQueue();
  const a = gate('a');
  const b = gate('b');
  const pa = q.run(a.task);
  const pb = q.run(b.task);
  pb.catch(() => {});
  let drained = false;
  const drain = q.drain().then(() => (drained = true));
  await a.started;
  a.finish();
  await pa;
  await b.started;
  assert.equal(drained, false); // b still runs
  b.fail(new Error('b fails'));
  await drain;
  assert.equal(drained, true);
});

test('close refuses new tasks and resolves once the queued ones have settled', async () => {
  const q = new SerialQueue();
  const a = gate('a');
  const pa = q.run(a.task);
  let closed = false;
  const closing = q.close('stopping').then(() => (closed = true));
  let ran = false;
  await assert.rejects(
    q.run(() => (ran = true)),
    (err: unknown) => err instanceof QueueClosedError && err.message === 'stopping',
  );
  await a.started;
  assert.equal(closed, false);
  a.finish();
  assert.equal(await pa, 'a'); // what was queued before close still runs
  await closing;
  assert.equal(closed, true);
  assert.equal(ran, false);
});
