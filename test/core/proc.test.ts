// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// /proc scans (daemon/core/process/proc.ts): asynchronous, shared by the callers of one turn of the
// event loop, never older than the call they answer.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { test } from 'node:test';
import { scanProcesses } from '../../daemon/core/process/proc.js';

test('calls in the same turn share one scan; a later call gets a new one', async () => {
  const a = scanProcesses();
  const b = scanProcesses();
  assert.equal(a, b, 'one scan for both');
  const list = await a;
  assert.ok(list.some((p) => p.pid === process.pid));
  const c = scanProcesses();
  assert.notEqual(c, a, 'a call after the scan ended starts another');
  await c;
});

test('a shared scan starts after the call it answers: a process started before the call is in it', async () => {
  const early = scanProcesses(); // a scan asked for first, still to start
  const child = spawn('sleep', ['60'], { stdio: 'ignore' });
  await once(child, 'spawn');
  try {
    const joined = scanProcesses();
    assert.equal(joined, early, 'joined the scan asked for before the child existed');
    assert.ok((await joined).some((p) => p.pid === child.pid), 'yet the child is in it');
  } finally {
    child.kill('SIGKILL');
  }
});

test('the event loop turns while a scan runs', async () => {
  const events: string[] = [];
  const scan = scanProcesses().then(() => events.push('scan done'));
  setImmediate(() => events.push('immediate ran'));
  await scan;
  assert.deepEqual(events, ['immediate ran', 'scan done']);
});
