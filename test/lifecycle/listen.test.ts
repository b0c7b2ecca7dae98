// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The HTTP listener cannot be opened: one log line naming BROWSERD_LISTEN. A port in use
// (EADDRINUSE, e.g. the previous instance still stopping) is worth a restart: exit 1, which the
// unit's Restart= retries; an address that can never work (not on this host) is a bad setting:
// exit 2, which RestartPreventExitStatus=2 keeps from looping.
import assert from 'node:assert/strict';
import net from 'node:net';
import { test } from 'node:test';
import { startDaemon } from '../kit/daemon.js';

async function failedStart(listen: string): Promise<{ code: number | null; fatal: Record<string, unknown>[]; listening: number }> {
  const d = await startDaemon({ env: { BROWSERD_LISTEN: listen }, waitListening: false });
  const { code } = await d.waitExit();
  await d.cleanup();
  return { code, fatal: d.logs.filter((l) => l.level === 60), listening: d.logs.filter((l) => l.event === 'listening').length };
}

test('a port in use (EADDRINUSE): exit 1 (restartable) with one line naming BROWSERD_LISTEN', async () => {
  const occupier = net.createServer();
  await new Promise<void>((resolve) => occupier.listen(0, '127.0.0.1', resolve));
  try {
    const port = (occupier.address() as net.AddressInfo).port;
    const r = await failedStart(`127.0.0.1:${port}`);
    assert.equal(r.code, 1);
    assert.equal(r.fatal.length, 1, JSON.stringify(r.fatal));
    assert.equal(r.fatal[0]?.event, 'listen_failed');
    assert.equal(r.fatal[0]?.setting, 'BROWSERD_LISTEN');
    assert.match(String(r.fatal[0]?.msg), /^BROWSERD_LISTEN: cannot listen: .*EADDRINUSE/);
    assert.equal(r.listening, 0);
  } finally {
    await new Promise<void>((resolve) => occupier.close(() => resolve()));
  }
});

test('an address not on this host (EADDRNOTAVAIL): exit 2 (a bad setting) with one line naming BROWSERD_LISTEN', async () => {
  // 192.0.2.1 is TEST-NET-1 (RFC 5737): never assigned to a host.
  const r = await failedStart('192.0.2.1:0');
  assert.equal(r.code, 2);
  assert.equal(r.fatal.length, 1, JSON.stringify(r.fatal));
  assert.equal(r.fatal[0]?.setting, 'BROWSERD_LISTEN');
  assert.match(String(r.fatal[0]?.msg), /^BROWSERD_LISTEN: cannot listen: .*EADDRNOTAVAIL/);
  assert.equal(r.listening, 0);
});
