// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// Malformed messages from Chromium (not JSON, the wrong shape, an answer to an id never sent):
// neither the multiplexer nor the CDP client throws or waits on them. Each is dropped, counted and
// logged with a short excerpt at a bounded rate; one that starts like the answer to a pending
// command fails that command at once. The mux is fed bytes on a stream pair (a stand-in for
// Chromium's pipe), the client through a channel of its own.
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { Counter, Registry } from 'prom-client';
import { Channel } from '../../daemon/cdp/channel.js';
import { CdpCallError, CdpClient } from '../../daemon/cdp/client.js';
import { EXCERPT_BYTES, MALFORMED_LOGS_PER_MINUTE, MalformedReporter, type MalformedReport } from '../../daemon/cdp/malformed.js';
import { CdpMux } from '../../daemon/cdp/mux.js';
import { MALFORMED_ANSWER_CODE } from '../../daemon/cdp/wire.js';
import { createLogger } from '../../daemon/core/log.js';

/** A logger whose warnings the test reads, and a counter on a registry of its own. */
function reporter(now?: () => number): { reporter: MalformedReporter; lines: Record<string, unknown>[]; count: (reason: string) => Promise<number> } {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger('warn', new PassThrough().resume(), (line) => lines.push(JSON.parse(line) as Record<string, unknown>));
  const registry = new Registry();
  const counter = new Counter({ name: 'malformed_total', help: 'test', labelNames: ['reason'], registers: [registry] });
  const count = async (reason: string): Promise<number> => (await counter.get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;
  return { reporter: new MalformedReporter(log, counter, now), lines, count };
}

/** A stand-in Chromium end: answers attach commands with a session, records the rest for the test to answer. */
function pipe(): { mux: CdpMux; write(text: string): void; commands: Record<string, unknown>[]; next(): Promise<Record<string, unknown>> } & ReturnType<typeof reporter> {
  const toChromium = new PassThrough();
  const fromChromium = new PassThrough();
  const r = reporter();
  const commands: Record<string, unknown>[] = [];
  const waiters: ((m: Record<string, unknown>) => void)[] = [];
  let buf = '';
  const write = (text: string): void => void fromChromium.write(`${text}\0`);
  toChromium.setEncoding('utf8').on('data', (d: string) => {
    buf += d;
    let i: number;
    while ((i = buf.indexOf('\0')) >= 0) {
      const m = JSON.parse(buf.slice(0, i)) as Record<string, unknown>;
      buf = buf.slice(i + 1);
      if (m.method === 'Target.attachToBrowserTarget') write(JSON.stringify({ id: m.id, result: { sessionId: 'S1' } }));
      else {
        const w = waiters.shift();
        if (w) w(m);
        else commands.push(m);
      }
    }
  });
  const mux = new CdpMux(toChromium, fromChromium, { log: createLogger('silent'), maxMessageBytes: 1024 * 1024, onBrowserClose: () => undefined, malformed: r.reporter });
  const next = (): Promise<Record<string, unknown>> => {
    const m = commands.shift();
    return m ? Promise.resolve(m) : new Promise((resolve) => waiters.push(resolve));
  };
  return { mux, write, commands, next, ...r };
}

test('mux: messages that are not JSON or not of a DevTools message\'s shape are dropped, counted and logged; routing goes on', async () => {
  const p = pipe();
  const got: Record<string, unknown>[] = [];
  const channel = await p.mux.open({ kind: 'browser' }, { message: (d) => got.push(JSON.parse(d.toString()) as Record<string, unknown>), ended: () => undefined });
  const huge = `{"method":"Target.detachedFromTarget","params":{"x":"${'y'.repeat(100_000)}"`;
  for (const text of [
    'not json at all',
    '[1,2,3]',
    '{"id":"7","result":{}}',
    '{"method":5}',
    '{"method":"Target.detachedFromTarget","params":', // a root event cut short
    `{"method":"Target.attachedToTarget","params":{"sessionId":,"sessionId":"S1"}`, // a session's event, not JSON inside
    huge,
    '{"id":123456,"result":{}}', // never sent
  ]) {
    p.write(text);
  }
  // The pipe still routes: a client's command and its answer, then an event of its session.
  channel.send(JSON.stringify({ id: 1, method: 'Page.enable' }));
  const cmd = await p.next();
  p.write(JSON.stringify({ id: cmd.id, result: { ok: true }, sessionId: 'S1' }));
  p.write(JSON.stringify({ method: 'Page.loadEventFired', params: { timestamp: 1 }, sessionId: 'S1' }));
  const call = p.mux.call('Browser.getVersion');
  const root = await p.next();
  p.write(JSON.stringify({ id: root.id, result: { product: 'X' } }));
  assert.deepEqual(await call, { product: 'X' });
  assert.deepEqual(got, [{ id: 1, result: { ok: true } }, { method: 'Page.loadEventFired', params: { timestamp: 1 } }]);
  assert.equal(p.mux.isClosed, false);
  assert.deepEqual(
    p.lines.map((l) => [l.event, l.reason]),
    [
      ['cdp_malformed_message', 'not_json'],
      ['cdp_malformed_message', 'bad_shape'],
      ['cdp_malformed_message', 'bad_shape'],
      ['cdp_malformed_message', 'bad_shape'],
      ['cdp_malformed_message', 'not_json'],
      ['cdp_malformed_message', 'not_json'],
      ['cdp_malformed_message', 'not_json'],
      ['cdp_malformed_message', 'unknown_id'],
    ],
  );
  const cut = p.lines[6] as { excerpt: string; bytes: number };
  assert.equal(cut.bytes, huge.length);
  assert.equal(cut.excerpt, `${huge.slice(0, EXCERPT_BYTES)}…`, 'a short excerpt, never the whole line');
  assert.deepEqual([await p.count('not_json'), await p.count('bad_shape'), await p.count('unknown_id')], [4, 3, 1]);
});

test('mux: a malformed answer to a pending command fails it at once (the mux\'s own call, and a client\'s with code MALFORMED_ANSWER_CODE)', async () => {
  const p = pipe();
  const got: string[] = [];
  let wake: () => void = () => undefined;
  const channel = await p.mux.open({ kind: 'browser' }, {
    message: (d) => {
      got.push(d.toString());
      wake();
    },
    ended: () => undefined,
  });
  const cut = p.mux.call('Browser.getVersion');
  p.write(`{"id":${(await p.next()).id as number},"result":{"product":"X"`);
  await assert.rejects(cut, (err: CdpCallError) => err instanceof CdpCallError && err.malformed && err.method === 'Browser.getVersion' && /malformed answer/.test(err.text));
  const shape = p.mux.call('Browser.getVersion');
  p.write(JSON.stringify({ id: (await p.next()).id, result: 'a string' }));
  await assert.rejects(shape, (err: CdpCallError) => err.malformed && /result is not an object/.test(err.text));

  const answered = new Promise<void>((resolve) => (wake = resolve));
  channel.send(JSON.stringify({ id: 41, method: 'Page.captureScreenshot' }));
  p.write(`{"id":${(await p.next()).id as number},"result":{"data":"iVBOR`); // cut short (no closing brace)
  await answered;
  assert.equal(got.length, 1);
  const reply = JSON.parse(got[0] as string) as { id: number; error: { code: number; message: string } };
  assert.equal(reply.id, 41);
  assert.equal(reply.error.code, MALFORMED_ANSWER_CODE);
  assert.match(reply.error.message, /^browserd: Chromium sent a malformed answer/);
  assert.deepEqual(p.lines.map((l) => l.method), ['Browser.getVersion', 'Browser.getVersion', 'Page.captureScreenshot'], 'each logged with the command it answered');
});

test('client: malformed messages are reported and dropped; one that starts like a pending answer fails that command at once', async () => {
  const reports: MalformedReport[] = [];
  const sent: Record<string, unknown>[] = [];
  let channel: Channel | null = null;
  const client = await CdpClient.overChannel(async (sink) => {
    channel = new Channel({ kind: 'browser' }, 'S1', sink, {
      send: (_c, data) => sent.push(JSON.parse(data.toString()) as Record<string, unknown>) > 0,
      close: () => undefined,
      whenWritable: (cb) => cb(),
      malformed: (_data, report) => reports.push(report),
      commands: () => 0,
    });
    return channel;
  });
  const deliver = (text: string): void => (channel as unknown as Channel).deliver(Buffer.from(text));
  const events: unknown[] = [];
  client.on('Page.loadEventFired', (params) => events.push(params));

  const cut = client.send('Browser.getVersion', {}, { timeoutMs: 300_000 });
  deliver(`{"id":${sent[0]?.id as number},"result":{"product":`);
  await assert.rejects(cut, (err: CdpCallError) => err.malformed && !err.answered && /malformed answer/.test(err.text));
  const wrong = client.send('Browser.getVersion', {}, { timeoutMs: 300_000 });
  deliver(JSON.stringify({ id: sent[1]?.id, error: 'boom' }));
  await assert.rejects(wrong, (err: CdpCallError) => err.malformed && /error is not an object/.test(err.text));
  const stand = client.send('Browser.getVersion', {}, { timeoutMs: 300_000 });
  deliver(JSON.stringify({ id: sent[2]?.id, error: { code: MALFORMED_ANSWER_CODE, message: 'browserd: Chromium sent a malformed answer (x)' } }));
  await assert.rejects(stand, (err: CdpCallError) => err.malformed && !err.answered);

  deliver('garbage');
  deliver('{"id":-1,"result":{}}');
  deliver('{"id":9999,"result":{}}');
  deliver('{"method":"Page.loadEventFired","params":[1]}');
  deliver('{"result":{}}');
  deliver('{"method":"Page.loadEventFired","params":{"timestamp":2}}');
  assert.deepEqual(events, [{ timestamp: 2 }], 'the well-formed event after them still reaches its listener');
  assert.deepEqual(
    reports.map((r) => [r.reason, r.method]),
    [
      ['not_json', 'Browser.getVersion'],
      ['bad_shape', 'Browser.getVersion'],
      ['not_json', undefined],
      ['bad_shape', undefined],
      ['unknown_id', undefined],
      ['bad_shape', undefined],
      ['bad_shape', undefined],
    ],
  );
  const ok = client.send('Browser.getVersion', {}, { timeoutMs: 300_000 });
  deliver(JSON.stringify({ id: sent[3]?.id, result: { product: 'Y' } }));
  assert.deepEqual(await ok, { product: 'Y' });
  client.close();
});

test('reporter: at most MALFORMED_LOGS_PER_MINUTE lines a minute, the next one says how many were left out; every message counted', async () => {
  let now = 1_000_000;
  const r = reporter(() => now);
  for (let i = 0; i < MALFORMED_LOGS_PER_MINUTE + 15; i++) r.reporter.report(Buffer.from(`x${i}`), { reason: 'not_json', detail: 'd' });
  assert.equal(r.lines.length, MALFORMED_LOGS_PER_MINUTE);
  now += 60_000;
  r.reporter.report('y', { reason: 'bad_shape', detail: 'd' });
  assert.equal(r.lines.length, MALFORMED_LOGS_PER_MINUTE + 1);
  assert.equal(r.lines.at(-1)?.suppressed, 15);
  assert.equal(r.lines.at(-1)?.excerpt, 'y');
  assert.deepEqual([await r.count('not_json'), await r.count('bad_shape')], [MALFORMED_LOGS_PER_MINUTE + 15, 1]);
});

test('client: an event nobody listens to is dropped before it is parsed; once listened to, it is delivered', async () => {
  let channel: Channel | null = null;
  const client = await CdpClient.overChannel(async (sink) => {
    channel = new Channel({ kind: 'browser' }, 'S1', sink, { send: () => true, close: () => undefined, whenWritable: (cb) => cb(), malformed: () => undefined, commands: () => 0 });
    return channel;
  });
  const deliver = (text: string): void => (channel as unknown as Channel).deliver(Buffer.from(text));
  const event = JSON.stringify({ method: 'Network.dataReceived', params: { requestId: '1', dataLength: 10 }, sessionId: 'S2' });
  const parse = JSON.parse;
  let parsed = 0;
  JSON.parse = ((text: string, reviver?: Parameters<typeof JSON.parse>[1]) => {
    parsed++;
    return parse(text, reviver) as unknown;
  }) as typeof JSON.parse;
  const got: unknown[] = [];
  try {
    for (let i = 0; i < 100; i++) deliver(event);
    assert.equal(parsed, 0, 'no listener: not parsed');
    const off = client.on('Network.dataReceived', (params, sessionId) => got.push([params, sessionId]));
    deliver(event);
    off();
    deliver(event);
    assert.equal(parsed, 1, 'parsed only while listened to');
  } finally {
    JSON.parse = parse;
  }
  assert.deepEqual(got, [[{ requestId: '1', dataLength: 10 }, 'S2']]);
  client.close();
});
