// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// Unit tests of core/deadline.ts: a deadline lets go of its parent signal once disposed (the
// supervisor's parent is the shutdown signal, which lives as long as the daemon), and a parent's
// abort still reaches a deadline that is not disposed. The supervisor makes one deadline per launch
// on its shutdown signal and disposes it when the launch ends; no test counts that through the
// daemon: 20 restarts take ~50 s on a loaded machine, and Node 24 gives no sign outside the process
// (no leak warning for an AbortSignal's listeners), so the count is asserted here, where it is exact.
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { test } from 'node:test';
import { Deadline, DeadlineError } from '../../daemon/core/deadline.js';

test('20 deadlines created and disposed on one parent leave its abort listeners as they were', () => {
  const parent = new AbortController();
  const before = getEventListeners(parent.signal, 'abort').length;
  for (let i = 0; i < 20; i++) {
    const d = Deadline.in(60_000, `launch ${i}`, parent.signal);
    const child = d.child(1000, `step ${i}`);
    child.dispose();
    assert.equal(getEventListeners(d.signal, 'abort').length, 0, 'a disposed child lets go of its deadline');
    d.dispose();
    d.dispose(); // idempotent
  }
  assert.equal(getEventListeners(parent.signal, 'abort').length, before);
});

test("a parent's abort ends a live deadline and its child with a DeadlineError; a disposed one is left alone", () => {
  const parent = new AbortController();
  const live = Deadline.in(60_000, 'live', parent.signal);
  const child = live.child(60_000, 'step');
  const disposed = Deadline.in(60_000, 'disposed', parent.signal);
  disposed.dispose();
  parent.abort(new Error('shutting down'));
  assert.ok(live.expired);
  assert.ok(child.expired);
  assert.ok(live.signal.reason instanceof DeadlineError);
  assert.equal((live.signal.reason as DeadlineError).timedOut, false);
  assert.match((child.signal.reason as Error).message, /^step: /);
  assert.equal(disposed.expired, false);
  live.dispose();
  child.dispose();
});
