// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The crash policy (daemon/main.ts, docs/operations.md), through the real daemon and its test
// hooks: a promise rejected with no handler is logged at error with its stack and counted, and the
// daemon serves on; an exception thrown outside every handler still ends it (exit 1, one fatal line).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startDaemon } from '../kit/daemon.js';

test('a stray rejection: logged at error with its stack, counted in /metrics, the daemon serves on', async () => {
  const d = await startDaemon({ env: { BROWSERD_TEST_HOOKS: 'stray-rejection' } });
  try {
    const line = await d.waitLog((l) => l.event === 'unhandled_rejection');
    assert.equal(line.level, 50, 'logged at error');
    const err = line.err as { message?: string; stack?: string };
    assert.match(err.message ?? '', /test hook stray-rejection/);
    assert.match(err.stack ?? '', /main\.ts|browserd(-test)?(-main)?\.js/);
    const health = await d.fetch('/healthz');
    assert.equal(health.status, 200);
    await health.text();
    const metrics = await (await d.fetch('/metrics')).text();
    assert.match(metrics, /^browserd_unhandled_rejections_total 1$/m);
    assert.equal(d.proc.exitCode, null);
  } finally {
    await d.cleanup();
  }
});

test('an uncaught exception still ends the daemon: one fatal crash line, exit 1', async () => {
  const d = await startDaemon({ env: { BROWSERD_TEST_HOOKS: 'uncaught-exception' } });
  try {
    const exit = await d.waitExit();
    assert.deepEqual(exit, { code: 1, signal: null });
    const crash = d.logs.find((l) => l.event === 'crash');
    assert.equal(crash?.level, 60, 'logged at fatal');
    assert.equal(crash?.kind, 'uncaughtException');
  } finally {
    await d.cleanup();
  }
});
