// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The telemetry routes without a browser: the SSE frames as the SDK reads them at the root path
// the SDK's direct-to-VM calls use (`/telemetry/stream`), a small ring (BROWSERD_TELEMETRY_RING)
// and the gap said to a reader resuming from before it, the category switches, custom events and
// their limits, and the paged list through the SDK's auto-pagination.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { kernel } from '../helpers/fs.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';
import { checkShape } from './schemas.js';

const RING = 8;
let d: Daemon;

before(async () => {
  d = await startDaemon({ env: { BROWSERD_TELEMETRY_RING: String(RING) } });
});
after(async () => {
  await d.cleanup();
});

/** Reads raw SSE text from `res` until `done(text)` holds, then cancels the body. */
async function readUntil(res: Response, done: (text: string) => boolean): Promise<string> {
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const dec = new TextDecoder();
  let text = '';
  try {
    while (!done(text)) {
      const { value, done: end } = await reader.read();
      if (end) break;
      text += dec.decode(value, { stream: true });
    }
  } finally {
    await reader.cancel();
  }
  return text;
}

function frames(text: string): { id: string | undefined; data: Record<string, unknown>; lines: string[] }[] {
  return text
    .split('\n\n')
    .filter((f) => f.trim() !== '' && !f.startsWith(':'))
    .map((f) => {
      const lines = f.split('\n');
      const id = lines.find((l) => l.startsWith('id: '))?.slice(4);
      const data = JSON.parse(lines.find((l) => l.startsWith('data: '))?.slice(6) ?? 'null') as Record<string, unknown>;
      return { id, data, lines };
    });
}

async function custom(type: string, data?: unknown, category?: string): Promise<Response> {
  return d.fetch('/telemetry/events', { method: 'POST', json: { type, data, category } });
}

test('the category switches: the SDK defaults, PATCH changes the named ones, PUT resets the others; bad bodies are 400', async () => {
  const got = await d.call<{ browser: Record<string, { enabled: boolean }> }>('/telemetry');
  assert.deepEqual(
    Object.fromEntries(Object.entries(got.browser).map(([k, v]) => [k, v.enabled])),
    { console: false, network: false, page: false, interaction: false, control: true, connection: true, system: true, screenshot: false, captcha: true },
  );
  const patched = await d.call<{ browser: Record<string, { enabled: boolean }> }>('/browsers/local/telemetry', { method: 'PATCH', json: { browser: { console: { enabled: true } } } });
  assert.equal(patched.browser.console?.enabled, true);
  assert.equal(patched.browser.control?.enabled, true);
  const put = await d.call<{ browser: Record<string, { enabled: boolean }> }>('/telemetry', { method: 'PUT', json: { browser: { network: { enabled: true } } } });
  assert.equal(put.browser.console?.enabled, false, 'PUT sets the unnamed ones back to their defaults');
  assert.equal(put.browser.network?.enabled, true);
  await d.call('/telemetry', { method: 'PUT', json: {} });
  for (const body of [{ browser: { nosuch: { enabled: true } } }, { browser: { console: { enabled: 'yes' } } }, { other: 1 }]) {
    const res = await d.fetch('/telemetry', { method: 'PATCH', json: body });
    assert.equal(res.status, 400, JSON.stringify(body));
    assert.equal(((await res.json()) as { code: string }).code, 'bad_request');
  }
});

test('custom events: validated, size-limited, cut when long, dropped while their category is off', async () => {
  assert.equal((await custom('Bad Type')).status, 400);
  assert.equal((await custom('ok', 'not an object')).status, 400);
  assert.equal((await custom('ok', { big: 'x'.repeat(20_000) })).status, 413);
  const off = await custom('quiet', { a: 1 }, 'console');
  assert.equal(off.status, 202);
  assert.deepEqual(await off.json(), { seq: null });
  const long = await custom('long', { text: 'y'.repeat(5000) });
  assert.equal(long.status, 201);
  const { seq } = (await long.json()) as { seq: number };
  const res = await d.fetch(`/telemetry/events?offset=${seq}&limit=1`);
  const [e] = (await res.json()) as { seq: number; event: { truncated?: boolean; data: { text: string } } }[];
  assert.equal(e?.seq, seq);
  assert.equal(e?.event.truncated, true);
  assert.ok((e?.event.data.text.length ?? 0) < 5000);
});

test('GET /telemetry/stream: id = seq, no event: line, JSON envelopes; replay=all; Last-Event-ID past the ring says the gap, then the events in order', async () => {
  for (let i = 0; i < 3 * RING; i++) assert.equal((await custom('filler', { i })).status, 201);
  const res = await d.fetch('/telemetry/stream?replay=all', { headers: { accept: 'text/event-stream' } });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
  const text = await readUntil(res, (t) => frames(t).length >= RING);
  const fs = frames(text).slice(0, RING);
  assert.equal(fs.length, RING, 'replay=all gives the whole ring');
  for (const f of fs) {
    assert.ok(!f.lines.some((l) => l.startsWith('event:')), 'no event: line');
    assert.equal(f.id, String(f.data.seq));
    checkShape(f.data);
  }
  const firstKept = Number(fs[0]?.id);
  assert.ok(firstKept > 1, 'older events were dropped from the ring');
  // Resuming after seq 1: everything from 2 to the ring's oldest is lost, and said.
  const resumed = await d.fetch('/browsers/local/telemetry/stream', { headers: { 'last-event-id': '1' } });
  const rf = frames(await readUntil(resumed, (t) => frames(t).length >= 3));
  const gap = rf[0]?.data as { seq: number; event: { type: string; data: { count: number; from_seq: number; to_seq: number } } };
  checkShape(gap);
  assert.equal(gap.event.type, 'events_dropped');
  assert.ok(gap.event.data.from_seq === 2 && gap.event.data.to_seq >= firstKept - 1, JSON.stringify(gap));
  assert.equal(gap.event.data.count, gap.event.data.to_seq - 1);
  assert.equal(rf[1]?.data.seq, gap.event.data.to_seq + 1, 'then the oldest event kept');
  assert.equal(rf[2]?.data.seq, gap.event.data.to_seq + 2, 'and on in order');
  const bad = await d.fetch('/telemetry/stream', { headers: { 'last-event-id': 'abc' } });
  assert.equal(bad.status, 400);
});

test('GET …/telemetry/events: pages through the ring with X-Next-Offset and X-Has-More (the SDK pages on its own), a category filter', async () => {
  const client = kernel(d);
  const all: number[] = [];
  for await (const e of client.browsers.telemetry.events('local', { offset: 1, limit: 3 } as never)) all.push(e.seq);
  assert.ok(all.length >= RING - 1, `got ${all.length}`);
  for (let i = 1; i < all.length; i++) assert.equal(all[i], (all[i - 1] as number) + 1);
  const res = await d.fetch('/browsers/local/telemetry/events?offset=1&limit=2&category=connection');
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), []);
  assert.equal(res.headers.get('x-has-more'), 'true');
  assert.ok(Number(res.headers.get('x-next-offset')) > 1);
  // The SDK's own list form (comma-separated): only custom events (control) and api calls here.
  const cats: string[] = [];
  for await (const e of client.browsers.telemetry.events('local', { offset: 1, limit: 50, category: ['control', 'monitor'] } as never)) cats.push(e.event.category);
  assert.ok(cats.length > 0 && cats.every((c) => c === 'control'), cats.join());
  assert.equal((await d.fetch('/telemetry/events?category=console,nosuch')).status, 400);
  const desc = await d.fetch('/telemetry/events?order=desc&limit=2');
  const items = (await desc.json()) as { seq: number }[];
  assert.equal(items.length, 2);
  assert.ok((items[0] as { seq: number }).seq > (items[1] as { seq: number }).seq);
  assert.equal((await d.fetch('/telemetry/events?order=desc&since=5m')).status, 400);
  assert.equal((await d.fetch('/telemetry/events?since=yesterday')).status, 400);
});
