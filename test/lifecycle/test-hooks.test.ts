// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// BROWSERD_TEST_HOOKS exist only in the test build (dist/daemon/browserd-test.js, the one the kit
// starts): the production build (dist/daemon/browserd.js) has none of their code, and refuses the
// setting at start as a bad setting.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { mainCodeJs, productionCodeJs, startDaemon } from '../kit/daemon.js';

/** The hooks' names as the test build's code spells them (test/kit/test-hooks.ts). */
const HOOK_NAMES = ["'resolve'", "'dns'", "'direct-to'", "'pty_package'", "'fail-live-activation'", "'fail-activation'", "'hold-activation'", 'release-'];

test('the production build started with BROWSERD_TEST_HOOKS exits 2 naming the setting', async () => {
  const d = await startDaemon({ production: true, env: { BROWSERD_TEST_HOOKS: 'resolve=hooked.test:127.0.0.1' }, waitListening: false });
  const { code } = await d.waitExit();
  await d.cleanup();
  assert.equal(code, 2);
  const fatal = d.logs.filter((l) => l.level === 60);
  assert.equal(fatal.length, 1, JSON.stringify(d.logs));
  assert.equal(fatal[0]?.setting, 'BROWSERD_TEST_HOOKS');
  assert.match(String(fatal[0]?.msg), /^BROWSERD_TEST_HOOKS: .*production build/);
  assert.equal(d.logs.filter((l) => l.event === 'listening').length, 0);
});

test('the production build starts without BROWSERD_TEST_HOOKS', async () => {
  const d = await startDaemon({ production: true });
  try {
    assert.equal((await d.fetch('/healthz')).status, 200);
    assert.equal(d.logs.filter((l) => l.event === 'test_hook').length, 0);
  } finally {
    await d.cleanup();
  }
});

test("the production build's text holds none of the hook names; the test build's does", () => {
  // esbuild prints string literals with double quotes.
  const spelled = (name: string): string => name.replaceAll("'", '"');
  const production = readFileSync(productionCodeJs, 'utf8');
  const testBuild = readFileSync(mainCodeJs, 'utf8');
  for (const name of HOOK_NAMES) {
    assert.ok(testBuild.includes(spelled(name)), `the test build lacks ${name}: the list is stale`);
    assert.ok(!production.includes(spelled(name)), `the production build holds ${name}`);
  }
});

test('the test build honours the hooks', async () => {
  const d = await startDaemon({ env: { BROWSERD_TEST_HOOKS: 'resolve=hooked.test:127.0.0.1,dns=127.0.0.1:9' } });
  try {
    const line = await d.waitLog((l) => l.event === 'test_hook');
    assert.deepEqual(line.hooks, ['resolve', 'dns']);
  } finally {
    await d.cleanup();
  }
});
