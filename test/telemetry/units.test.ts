// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// Unit tests of the telemetry bus (ring bounds by count and bytes, seqs, the lost count of a reader
// that fell behind) and of the redaction (headers, URLs, long values).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TelemetryBus } from '../../daemon/telemetry/bus.js';
import { boundValue, redactHeaders, redactUrl, REDACTED } from '../../daemon/telemetry/redact.js';

const src = { kind: 'kernel_api' as const };

test('the ring keeps the newest events within its count; a reader behind it learns how many it lost', () => {
  const bus = new TelemetryBus({ maxEvents: 4, maxBytes: 1 << 20, maxEventBytes: 1 << 16 });
  for (let i = 0; i < 10; i++) assert.equal(bus.emit('x', 'control', src, { i }), i + 1);
  assert.equal(bus.size, 4);
  assert.equal(bus.first, 7);
  const r = bus.read(3, 100);
  assert.equal(r.lost, 4);
  assert.deepEqual(r.events.map((e) => e.seq), [7, 8, 9, 10]);
  assert.equal(r.next, 11);
  assert.deepEqual(bus.readBack(11, 2).map((e) => e.seq), [10, 9]);
  for (let i = 0; i < 5000; i++) bus.emit('x', 'control', src, { i });
  assert.equal(bus.size, 4);
  assert.deepEqual(bus.read(0, 100).events.map((e) => e.seq), [5007, 5008, 5009, 5010]);
});

test('the ring keeps within its bytes; an event past the per-event limit loses its data and says truncated', () => {
  const bus = new TelemetryBus({ maxEvents: 1000, maxBytes: 2000, maxEventBytes: 500 });
  for (let i = 0; i < 50; i++) bus.emit('x', 'control', src, { s: 'a'.repeat(100) });
  const kept = bus.read(0, 1000).events;
  assert.ok(kept.reduce((n, e) => n + e.bytes, 0) <= 2000);
  assert.ok(kept.length < 50 && kept.length > 5);
  const seq = bus.emit('x', 'control', src, { s: 'b'.repeat(1000) });
  const e = JSON.parse(bus.read(seq as number, 1).events[0]?.json ?? '{}') as { event: { data?: unknown; truncated?: boolean } };
  assert.equal(e.event.data, undefined);
  assert.equal(e.event.truncated, true);
});

test('switched-off categories are not recorded; monitor follows the CDP categories', async () => {
  const bus = new TelemetryBus({ maxEvents: 10, maxBytes: 1 << 20, maxEventBytes: 1 << 16 });
  assert.equal(bus.emit('c', 'console', src), null);
  assert.equal(bus.enabled('monitor'), false);
  await bus.setCategories({ console: true });
  assert.equal(bus.enabled('monitor'), true);
  assert.equal(bus.emit('c', 'console', src), 1);
});

test('redaction: credential headers, URL user info and secret query values; long values cut', () => {
  const cut = { truncated: false };
  const h = redactHeaders({ Cookie: 'a=1', Authorization: 'Bearer x', 'Proxy-Authorization': 'Basic y', 'X-Api-Key': 'k', 'x-goog-session': 's', Accept: 'text/html' }, cut);
  assert.deepEqual(h, { Cookie: REDACTED, Authorization: REDACTED, 'Proxy-Authorization': REDACTED, 'X-Api-Key': REDACTED, 'x-goog-session': REDACTED, Accept: 'text/html' });
  assert.equal(redactUrl('http://user:pw@h.example/p?jwt=abc&token=t&q=1', cut), `http://h.example/p?jwt=${encodeURIComponent(REDACTED)}&token=${encodeURIComponent(REDACTED)}&q=1`);
  assert.equal(cut.truncated, false);
  assert.equal(redactUrl('data:text/plain;base64,AAAA', cut), 'data:text/plain;base64,');
  // Remembered redactions (the same URL for every event of a page) say `truncated` each time too.
  for (let i = 0; i < 2; i++) {
    const again = { truncated: false };
    assert.equal(redactUrl('http://user:pw@h.example/p?jwt=abc&token=t&q=1', again), `http://h.example/p?jwt=${encodeURIComponent(REDACTED)}&token=${encodeURIComponent(REDACTED)}&q=1`);
    assert.equal(again.truncated, false);
    const cutAgain = { truncated: false };
    assert.equal(redactUrl(`http://h.example/${'p'.repeat(2100)}`, cutAgain).length, 2049);
    assert.equal(cutAgain.truncated, true, `a long URL, time ${i + 1}`);
    const dataAgain = { truncated: false };
    redactUrl('data:text/plain;base64,AAAA', dataAgain);
    assert.equal(dataAgain.truncated, true, `a data: URL, time ${i + 1}`);
  }
  const long = { truncated: false };
  const v = boundValue({ s: 'z'.repeat(3000), n: 1 }, long) as { s: string; n: number };
  assert.equal(long.truncated, true);
  assert.ok(v.s.length < 3000);
  assert.equal(v.n, 1);
});
