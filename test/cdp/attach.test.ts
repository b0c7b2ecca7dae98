// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The one way a part opens a tab or attaches a session (daemon/cdp/attach.ts), against a stand-in
// Chromium that answers late: what Chromium makes after the caller's deadline ended (a tab, a
// session) is undone when its answer comes, never left behind with nobody knowing of it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { attachPage, openPage } from '../../daemon/cdp/attach.js';
import type { Channel } from '../../daemon/cdp/channel.js';
import { CdpClient } from '../../daemon/cdp/client.js';
import { Deadline, DeadlineError } from '../../daemon/core/deadline.js';
import { until } from '../kit/wait.js';

interface Sent {
  id: number;
  method: string;
  params: Record<string, unknown>;
}

/** A client whose Chromium answers only when the test says so. */
async function slowChromium(): Promise<{ cdp: CdpClient; sent: Sent[]; answer(method: string, result: unknown): void }> {
  const sent: Sent[] = [];
  let deliver: (m: unknown) => void = () => undefined;
  const cdp = await CdpClient.overChannel((sink) => {
    deliver = (m) => sink.message(Buffer.from(JSON.stringify(m)));
    const send = (text: string): void => {
      const m = JSON.parse(text) as Sent;
      sent.push(m);
      // Closing and detaching are answered at once (nothing waits out their timeout); the rest when the test says.
      if (m.method === 'Target.closeTarget' || m.method === 'Target.detachFromTarget') setImmediate(() => deliver({ id: m.id, result: {} }));
    };
    const channel = { send, close: () => undefined, reportMalformed: () => undefined, browserCommands: () => 0 };
    return Promise.resolve(channel as unknown as Channel);
  });
  const answer = (method: string, result: unknown): void => {
    const m = sent.find((x) => x.method === method);
    assert.ok(m, `${method} was sent`);
    deliver({ id: m.id, result });
  };
  return { cdp, sent, answer };
}

const sentTo = (sent: Sent[], method: string, key: string, value: string): boolean => sent.some((m) => m.method === method && m.params[key] === value);

test('a tab Chromium opens after the deadline ended is closed, and never attached', async () => {
  const c = await slowChromium();
  await assert.rejects(openPage(c.cdp, { url: 'about:blank' }, { deadline: Deadline.in(20, 'opening a tab') }), DeadlineError);
  assert.ok(!sentTo(c.sent, 'Target.closeTarget', 'targetId', 'T1'), 'nothing to close before Chromium answers');
  c.answer('Target.createTarget', { targetId: 'T1' });
  await until('the late tab closed', () => sentTo(c.sent, 'Target.closeTarget', 'targetId', 'T1'), 5000, 5);
  assert.ok(!c.sent.some((m) => m.method === 'Target.attachToTarget'));
});

test('a session Chromium attaches after the deadline ended is detached', async () => {
  const c = await slowChromium();
  await assert.rejects(attachPage(c.cdp, 'T2', { deadline: Deadline.in(20, 'attaching') }), DeadlineError);
  c.answer('Target.attachToTarget', { sessionId: 'S2' });
  await until('the late session detached', () => sentTo(c.sent, 'Target.detachFromTarget', 'sessionId', 'S2'), 5000, 5);
});

test('a tab opened in time whose attach answers late: the session is detached and the tab closed', async () => {
  const c = await slowChromium();
  const caller = new AbortController();
  const deadline = Deadline.in(60_000, 'opening a tab', caller.signal);
  const opening = openPage(c.cdp, { url: 'about:blank' }, { deadline });
  await until('createTarget sent', () => c.sent.some((m) => m.method === 'Target.createTarget'), 5000, 5);
  c.answer('Target.createTarget', { targetId: 'T3' });
  await until('attachToTarget sent', () => c.sent.some((m) => m.method === 'Target.attachToTarget'), 5000, 5);
  caller.abort(new Error('the caller went away'));
  await assert.rejects(opening, DeadlineError);
  await until('the tab closed', () => sentTo(c.sent, 'Target.closeTarget', 'targetId', 'T3'), 5000, 5);
  c.answer('Target.attachToTarget', { sessionId: 'S3' });
  await until('the late session detached', () => sentTo(c.sent, 'Target.detachFromTarget', 'sessionId', 'S3'), 5000, 5);
});

test('with no deadline, both are plain commands', async () => {
  const c = await slowChromium();
  const opening = openPage(c.cdp, { url: 'about:blank' }, { timeoutMs: 60_000 });
  await until('createTarget sent', () => c.sent.some((m) => m.method === 'Target.createTarget'), 5000, 5);
  c.answer('Target.createTarget', { targetId: 'T4' });
  await until('attachToTarget sent', () => c.sent.some((m) => m.method === 'Target.attachToTarget'), 5000, 5);
  c.answer('Target.attachToTarget', { sessionId: 'S4' });
  const page = await opening;
  assert.equal(page.targetId, 'T4');
  assert.equal(page.sessionId, 'S4');
  assert.ok(!c.sent.some((m) => m.method === 'Target.closeTarget' || m.method === 'Target.detachFromTarget'));
});
