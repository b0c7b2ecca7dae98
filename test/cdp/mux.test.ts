// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The CDP multiplexer against a stand-in Chromium on a pair of streams (NUL-ended JSON, Chromium's
// layout): each channel its own session and its own ids, events and child sessions routed to their
// owner only, foreign sessions refused, Browser.close answered by the mux, a message over the bound
// dropped with its owner closed, a closed channel detached; and the wire rewriting on its own.
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import type { ChannelEnd } from '../../daemon/cdp/channel.js';
import { CdpMux } from '../../daemon/cdp/mux.js';
import { commandGuard, parseHead, parseTail, rewrite } from '../../daemon/cdp/wire.js';
import { Deadline, DeadlineError } from '../../daemon/core/deadline.js';
import { createLogger } from '../../daemon/core/log.js';
import { until } from '../kit/wait.js';

const log = createLogger('silent');

/** A stand-in for Chromium's pipe end: answers like Chromium and lets the test emit events. */
class FakeChromium {
  readonly toChromium = new PassThrough();
  readonly fromChromium = new PassThrough();
  readonly received: Record<string, unknown>[] = [];
  private buf = '';
  private sessions = 0;
  bigAnswer = 0;
  /** While set, attach commands are kept unanswered here (a Chromium slow to attach); `answerHeld` answers them. */
  holdAttach: (() => void)[] | null = null;

  constructor() {
    this.toChromium.setEncoding('utf8').on('data', (d: string) => {
      this.buf += d;
      let i: number;
      while ((i = this.buf.indexOf('\0')) >= 0) {
        const text = this.buf.slice(0, i);
        this.buf = this.buf.slice(i + 1);
        this.onCommand(JSON.parse(text) as Record<string, unknown>);
      }
    });
  }

  /** Writes one message exactly as Chromium lays it out: id first, sessionId last. */
  write(parts: { id?: number; method?: string; params?: unknown; result?: unknown; error?: unknown; sessionId?: string }): void {
    const o: Record<string, unknown> = {};
    if (parts.id !== undefined) o.id = parts.id;
    if (parts.method !== undefined) o.method = parts.method;
    if (parts.params !== undefined) o.params = parts.params;
    if (parts.result !== undefined) o.result = parts.result;
    if (parts.error !== undefined) o.error = parts.error;
    if (parts.sessionId !== undefined) o.sessionId = parts.sessionId;
    this.fromChromium.write(`${JSON.stringify(o)}\0`);
  }

  newSession(): string {
    return `S${String(++this.sessions).padStart(31, '0')}`;
  }

  private onCommand(m: Record<string, unknown>): void {
    this.received.push(m);
    if (this.holdAttach !== null && (m.method === 'Target.attachToBrowserTarget' || m.method === 'Target.attachToTarget')) this.holdAttach.push(() => this.answer(m));
    else this.answer(m);
  }

  private answer(m: Record<string, unknown>): void {
    const id = m.id as number;
    const sessionId = m.sessionId as string | undefined;
    const method = m.method as string;
    const params = (m.params ?? {}) as Record<string, unknown>;
    if (method === 'Target.attachToBrowserTarget' || method === 'Target.attachToTarget') {
      const child = this.newSession();
      this.write({ method: 'Target.attachedToTarget', params: { sessionId: child, targetInfo: { targetId: String(params.targetId ?? 'browser') } }, sessionId });
      this.write({ id, result: { sessionId: child }, sessionId });
    } else if (method === 'Target.detachFromTarget') {
      this.write({ method: 'Target.detachedFromTarget', params: { sessionId: params.sessionId }, sessionId });
      this.write({ id, result: {}, sessionId });
    } else if (method === 'Never.answered') {
      // no answer
    } else if (method === 'Big.answer') {
      this.write({ id, result: { data: 'x'.repeat(this.bigAnswer) }, sessionId });
    } else {
      this.write({ id, result: { echo: method, session: sessionId ?? null }, sessionId });
    }
  }
}

interface Client {
  messages: Record<string, unknown>[];
  ended: ChannelEnd | null;
  next(pred?: (m: Record<string, unknown>) => boolean): Promise<Record<string, unknown>>;
}

function sink(): Client & { message(d: Buffer): void; ended: ChannelEnd | null } {
  const waiters: { pred: (m: Record<string, unknown>) => boolean; resolve: (m: Record<string, unknown>) => void }[] = [];
  const c = {
    messages: [] as Record<string, unknown>[],
    ended: null as ChannelEnd | null,
    message(d: Buffer) {
      const m = JSON.parse(d.toString()) as Record<string, unknown>;
      c.messages.push(m);
      for (const w of waiters.splice(0)) {
        if (w.pred(m)) w.resolve(m);
        else waiters.push(w);
      }
    },
    next(pred: (m: Record<string, unknown>) => boolean = () => true) {
      const seen = c.messages.find(pred);
      if (seen) {
        c.messages.splice(c.messages.indexOf(seen), 1);
        return Promise.resolve(seen);
      }
      return new Promise<Record<string, unknown>>((resolve) =>
        waiters.push({
          pred,
          resolve: (m) => {
            c.messages.splice(c.messages.indexOf(m), 1);
            resolve(m);
          },
        }),
      );
    },
  };
  return Object.assign(c, { ended: null });
}

function setup(maxMessageBytes = 1024 * 1024): { chromium: FakeChromium; mux: CdpMux; closes: number[] } {
  const chromium = new FakeChromium();
  const closes: number[] = [];
  const mux = new CdpMux(chromium.toChromium, chromium.fromChromium, { log, maxMessageBytes, onBrowserClose: () => closes.push(Date.now()) });
  return { chromium, mux, closes };
}

async function open(mux: CdpMux): Promise<{ client: ReturnType<typeof sink>; channel: Awaited<ReturnType<CdpMux['open']>> }> {
  const client = sink();
  const channel = await mux.open({ kind: 'browser' }, { message: (d) => client.message(d), ended: (e) => (client.ended = e) });
  return { client, channel };
}

test('each channel talks on its own session with its own ids; answers come back in its terms', async () => {
  const { chromium, mux } = setup();
  const a = await open(mux);
  const b = await open(mux);
  assert.notEqual(a.channel.session, b.channel.session);
  a.channel.send(JSON.stringify({ id: 1, method: 'Page.one' }));
  b.channel.send(JSON.stringify({ id: 1, method: 'Page.two' }));
  const ra = await a.client.next((m) => m.id === 1);
  const rb = await b.client.next((m) => m.id === 1);
  assert.deepEqual(ra, { id: 1, result: { echo: 'Page.one', session: a.channel.session } }, 'no sessionId of its top session on the way out');
  assert.deepEqual(rb, { id: 1, result: { echo: 'Page.two', session: b.channel.session } });
  const sent = chromium.received.filter((m) => m.method === 'Page.one' || m.method === 'Page.two');
  assert.notEqual(sent[0]?.id, sent[1]?.id, 'the mux gave each its own id on the pipe');
});

test('events of a session reach its owner only; child sessions (attached or auto-attached) are the owner\'s', async () => {
  const { chromium, mux } = setup();
  const a = await open(mux);
  const b = await open(mux);
  chromium.write({ method: 'Target.targetCreated', params: { targetInfo: { targetId: 'T1' } }, sessionId: a.channel.session });
  assert.deepEqual(await a.client.next((m) => m.method === 'Target.targetCreated'), { method: 'Target.targetCreated', params: { targetInfo: { targetId: 'T1' } } });
  // A child by command: the answer's sessionId is the client's to use.
  a.channel.send(JSON.stringify({ id: 7, method: 'Target.attachToTarget', params: { targetId: 'T1', flatten: true } }));
  const attached = await a.client.next((m) => m.id === 7);
  const child = (attached.result as { sessionId: string }).sessionId;
  a.channel.send(JSON.stringify({ id: 8, method: 'Runtime.evaluate', sessionId: child }));
  assert.deepEqual(await a.client.next((m) => m.id === 8), { id: 8, result: { echo: 'Runtime.evaluate', session: child }, sessionId: child });
  // An auto-attached grandchild, announced on the child session.
  const grandchild = chromium.newSession();
  chromium.write({ method: 'Target.attachedToTarget', params: { sessionId: grandchild, targetInfo: { targetId: 'W1' } }, sessionId: child });
  chromium.write({ method: 'Runtime.consoleAPICalled', params: { type: 'log' }, sessionId: grandchild });
  assert.equal((await a.client.next((m) => m.method === 'Runtime.consoleAPICalled')).sessionId, grandchild);
  // B names A's sessions: refused in Chromium's words, nothing reaches the pipe.
  const before = chromium.received.length;
  b.channel.send(JSON.stringify({ id: 3, method: 'Runtime.evaluate', sessionId: child }));
  assert.deepEqual(await b.client.next((m) => m.id === 3), { id: 3, error: { code: -32001, message: 'Session with given id not found.' } });
  b.channel.send(JSON.stringify({ id: 4, method: 'Target.detachFromTarget', params: { sessionId: a.channel.session } }));
  assert.equal(((await b.client.next((m) => m.id === 4)).error as { code: number }).code, -32602);
  assert.equal(chromium.received.length, before);
  assert.equal(b.client.messages.filter((m) => m.method !== undefined).length, 0, 'B saw none of A\'s events');
});

test('malformed commands are answered, not forwarded', async () => {
  const { chromium, mux } = setup();
  const a = await open(mux);
  const before = chromium.received.length;
  a.channel.send('{not json');
  assert.equal(((await a.client.next()).error as { code: number }).code, -32700);
  a.channel.send(JSON.stringify({ id: 'x', method: 'A.b' }));
  assert.match(((await a.client.next()).error as { message: string }).message, /integer 'id'/);
  a.channel.send(JSON.stringify({ id: 2 }));
  assert.match(((await a.client.next()).error as { message: string }).message, /string 'method'/);
  assert.equal(chromium.received.length, before);
});

test('Browser.close is answered by the mux and reported, never sent to Chromium', async () => {
  const { chromium, mux, closes } = setup();
  const a = await open(mux);
  a.channel.send(JSON.stringify({ id: 5, method: 'Browser.close' }));
  assert.deepEqual(await a.client.next((m) => m.id === 5), { id: 5, result: {} });
  assert.equal(closes.length, 1);
  assert.ok(!chromium.received.some((m) => m.method === 'Browser.close'));
});

test('a closed channel is detached in Chromium; Chromium going away ends every channel and fails the mux\'s own calls', async () => {
  const { chromium, mux } = setup();
  const a = await open(mux);
  const b = await open(mux);
  a.channel.close();
  assert.equal(a.client.ended?.code, 'client_closed');
  await new Promise((r) => setImmediate(r));
  assert.ok(chromium.received.some((m) => m.method === 'Target.detachFromTarget' && (m.params as { sessionId: string }).sessionId === a.channel.session));
  const pending = mux.call('Never.answered');
  chromium.fromChromium.end();
  await assert.rejects(pending, /Chromium went away/);
  assert.equal(b.client.ended?.code, 'browser_gone');
  await assert.rejects(open(mux), /Chromium went away/);
});

test('a session Chromium attaches after the opener\u2019s deadline ended is detached again, not left without a channel', async () => {
  const { chromium, mux } = setup();
  chromium.holdAttach = [];
  const deadline = Deadline.in(30, 'opening a channel');
  await assert.rejects(mux.open({ kind: 'browser' }, { message: () => undefined, ended: () => undefined }, deadline), DeadlineError);
  assert.equal(mux.channelCount, 0);
  const held = chromium.holdAttach;
  chromium.holdAttach = null;
  for (const answer of held) answer();
  const late = `S${'1'.padStart(31, '0')}`;
  await until('the late session detached', () => chromium.received.some((m) => m.method === 'Target.detachFromTarget' && (m.params as { sessionId: string }).sessionId === late), 5000, 5);
  const attached = chromium.received.filter((m) => m.method === 'Target.attachToBrowserTarget').length;
  assert.equal(attached, 1);
  // The mux goes on: the next channel opens.
  await open(mux);
  assert.equal(mux.channelCount, 1);
});

test('an answer over the message bound is dropped and its channel closed (too_big); the pipe goes on', async () => {
  const { chromium, mux } = setup(64 * 1024);
  const a = await open(mux);
  const b = await open(mux);
  chromium.bigAnswer = 200 * 1024;
  a.channel.send(JSON.stringify({ id: 1, method: 'Big.answer' }));
  b.channel.send(JSON.stringify({ id: 1, method: 'Small.answer' }));
  assert.deepEqual(await b.client.next((m) => m.id === 1), { id: 1, result: { echo: 'Small.answer', session: b.channel.session } });
  assert.equal(a.client.ended?.code, 'too_big');
});

test('wire: heads, tails and rewrites without parsing; other layouts are parsed', () => {
  const sid = 'ABCDEF0123456789ABCDEF0123456789';
  const answer = Buffer.from(`{"id":42,"result":{"x":{"sessionId":"nested"}},"sessionId":"${sid}"}`);
  assert.deepEqual(parseHead(answer), { kind: 'response', id: 42 });
  assert.equal(parseTail(answer), sid);
  assert.equal(rewrite(answer, { id: 3, stripSession: sid })?.toString(), '{"id":3,"result":{"x":{"sessionId":"nested"}}}');
  assert.equal(rewrite(answer, { id: 3, stripSession: 'OTHER' })?.toString(), `{"id":3,"result":{"x":{"sessionId":"nested"}},"sessionId":"${sid}"}`);
  const reused = Buffer.from(answer);
  assert.equal(rewrite(reused, { id: 3, stripSession: sid, reuse: true })?.toString(), '{"id":3,"result":{"x":{"sessionId":"nested"}}}', 'rewritten in place');
  assert.equal(rewrite(Buffer.from(answer), { id: 123456, reuse: true })?.toString(), `{"id":123456,"result":{"x":{"sessionId":"nested"}},"sessionId":"${sid}"}`, 'a longer id is copied');
  assert.equal(rewrite(Buffer.from(answer), { stripSession: sid, reuse: true })?.toString(), '{"id":42,"result":{"x":{"sessionId":"nested"}}}');
  const event = Buffer.from('{"method":"Target.attachedToTarget","params":{"sessionId":"CHILD"}}');
  assert.deepEqual(parseHead(event), { kind: 'event', method: 'Target.attachedToTarget' });
  assert.equal(parseTail(event), null, "a sessionId inside params is not the message's");
  const reordered = Buffer.from(`{"sessionId":"${sid}","id":9,"result":{}}`);
  assert.deepEqual(parseHead(reordered), { kind: 'response', id: 9 });
  assert.equal(parseTail(reordered), sid);
  assert.deepEqual(JSON.parse(String(rewrite(reordered, { id: 1, stripSession: sid }))), { id: 1, result: {} });
  assert.equal(commandGuard({ id: 1, method: 'A.b', sessionId: 'X' }, () => false)?.toString(), '{"id":1,"error":{"code":-32001,"message":"Session with given id not found."}}');
  assert.equal(commandGuard({ id: 1, method: 'A.b', params: {} }, () => false), null);
});
