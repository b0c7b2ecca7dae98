// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The page tracker of the computer controls keeps the current page between actions while nothing
// changed, and asks the pages again after each kind of change (unit test: a scripted stand-in for
// the CDP client counts the probes; the same rules through the HTTP API against a real Chromium are
// in screen.test.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { CdpClient } from '../../daemon/cdp/client.js';
import { Deadline } from '../../daemon/core/deadline.js';
import { createLogger } from '../../daemon/core/log.js';
import { CHANGED_BINDING, NO_PAGE_GRACE_MS, PageTracker } from '../../daemon/computer/pages.js';

type Listener = (params: unknown, sessionId: string | undefined) => void;

/** A browser of scripted pages: each answers the probe with its visibility; `watching`: the probe finds the binding. */
class FakeBrowser {
  readonly listeners = new Map<string, Set<Listener>>();
  readonly visible = new Map<string, boolean>();
  /** Commands every client sent (the tracker's included), as the multiplexer counts them. */
  commands = 0;
  probes = 0;
  watching = true;
  /** Called while a probe is answered (an event during the round). */
  duringProbe: (() => void) | null = null;

  readonly client = {
    on: (event: string, fn: Listener) => {
      let set = this.listeners.get(event);
      if (set === undefined) this.listeners.set(event, (set = new Set()));
      set.add(fn);
      return () => set.delete(fn);
    },
    browserCommands: () => this.commands,
    send: async (method: string, params: Record<string, unknown> = {}, opts: { sessionId?: string } = {}) => {
      this.commands++;
      await Promise.resolve();
      switch (method) {
        case 'Target.setDiscoverTargets':
          for (const id of this.visible.keys()) this.emit('Target.targetCreated', { targetInfo: info(id) });
          return {};
        case 'Target.attachToTarget':
          return { sessionId: `S-${String(params.targetId)}` };
        case 'Browser.getWindowForTarget':
          return { windowId: 1, bounds: {} };
        case 'Page.createIsolatedWorld':
          return { executionContextId: 7 };
        case 'Runtime.evaluate': {
          this.probes++;
          this.duringProbe?.();
          const id = (opts.sessionId ?? '').slice(2);
          return { result: { type: 'object', value: [this.visible.get(id) === true, 800, 600, 1, 0, 0, 1, this.watching] } };
        }
        default:
          return {};
      }
    },
  };

  emit(event: string, params: unknown, sessionId?: string): void {
    for (const fn of this.listeners.get(event) ?? []) fn(params, sessionId);
  }
}

const info = (targetId: string) => ({ targetId, type: 'page', title: '', url: 'http://127.0.0.1/', attached: false, canAccessOpener: false });

async function setup(pages: Record<string, boolean>): Promise<{ b: FakeBrowser; tracker: PageTracker; lookups: string[]; current: (opts?: { fresh?: boolean }) => Promise<string> }> {
  const b = new FakeBrowser();
  for (const [id, v] of Object.entries(pages)) b.visible.set(id, v);
  const lookups: string[] = [];
  const tracker = new PageTracker(b.client as unknown as CdpClient, createLogger('silent'), (how) => lookups.push(how));
  const deadline = Deadline.in(5000, 'test');
  await tracker.start(deadline);
  const current = async (opts: { fresh?: boolean } = {}): Promise<string> => (await tracker.currentPage(deadline, opts)).targetId;
  return { b, tracker, lookups, current };
}

test('nothing changed: the page of the last probe round is kept, no page is asked again', async () => {
  const { b, lookups, current } = await setup({ A: false, B: true });
  assert.equal(await current(), 'B');
  assert.equal(b.probes, 2, 'the first action asks both pages');
  for (let i = 0; i < 5; i++) assert.equal(await current(), 'B');
  assert.equal(b.probes, 2, 'no probe while nothing changed');
  assert.deepEqual(lookups, ['probed', 'kept', 'kept', 'kept', 'kept', 'kept']);
});

test('each kind of change makes the next lookup ask the pages again, and it finds the new current page', async () => {
  const { b, tracker, current } = await setup({ A: false, B: true });
  assert.equal(await current(), 'B');
  const probesAfter = async (what: string, change: () => void, want: string): Promise<void> => {
    change();
    const before = b.probes;
    assert.equal(await current(), want, what);
    assert.equal(b.probes, before + b.visible.size, `${what}: every page asked`);
    assert.equal(await current(), want, what);
    assert.equal(b.probes, before + b.visible.size, `${what}: then kept`);
  };
  // A page said its visibility changed (the binding of the daemon's world).
  await probesAfter('binding', () => {
    b.visible.set('A', true);
    b.visible.set('B', false);
    b.emit('Runtime.bindingCalled', { name: CHANGED_BINDING, payload: '', executionContextId: 7 }, 'S-A');
  }, 'A');
  // Another client sent a command (Page.bringToFront): the multiplexer's count moved.
  await probesAfter('another client', () => {
    b.visible.set('A', false);
    b.visible.set('B', true);
    b.commands++;
  }, 'B');
  // A Target event (a tab opened, navigated, closed).
  await probesAfter('Target event', () => {
    b.visible.set('C', true);
    b.visible.set('B', false);
    b.emit('Target.targetCreated', { targetInfo: info('C') });
  }, 'C');
  // A new document in a page (its listeners are gone).
  const before = b.probes;
  b.emit('Runtime.executionContextsCleared', {}, 'S-C');
  assert.equal(await current(), 'C');
  assert.ok(b.probes > before, 'new document: asked again');
  // The page closed.
  b.visible.delete('C');
  b.visible.set('A', true);
  b.emit('Target.targetDestroyed', { targetId: 'C' });
  assert.equal(await current(), 'A');
  // A binding of another name, or on a session that is not a page's, changes nothing.
  const n = b.probes;
  b.emit('Runtime.bindingCalled', { name: 'somethingElse', payload: '', executionContextId: 7 }, 'S-A');
  b.emit('Runtime.bindingCalled', { name: CHANGED_BINDING, payload: '', executionContextId: 7 }, 'S-unknown');
  assert.equal(await current(), 'A');
  assert.equal(b.probes, n);
  // A browser-level command of the computer controls (the live view's tab switch).
  const page = await tracker.currentPage(Deadline.in(5000, 'test'));
  await page.sendBrowser('Target.activateTarget', { targetId: 'B' }, Deadline.in(5000, 'test'));
  await current();
  assert.ok(b.probes > n, 'a tab switch of the controls: asked again');
});

test('fresh lookups (screenshots) always ask; a round is not kept when something changed while it ran, or a page cannot tell of its changes', async () => {
  const { b, lookups, current } = await setup({ A: true });
  await current();
  await current({ fresh: true });
  assert.equal(b.probes, 2);
  assert.deepEqual(lookups, ['probed', 'probed']);
  let once = true;
  b.duringProbe = () => {
    if (once) b.emit('Runtime.bindingCalled', { name: CHANGED_BINDING, payload: '', executionContextId: 7 }, 'S-A');
    once = false;
  };
  b.commands++;
  await current();
  await current();
  assert.equal(b.probes, 4, 'the round with a change in it was not kept');
  await current();
  assert.equal(b.probes, 4);
  b.watching = false;
  b.commands++;
  await current();
  await current();
  assert.equal(b.probes, 6, 'a page without its listeners is asked every time');
});

test('a tab switch in flight (the old tab hidden, the new one not yet visible): the lookup waits for the new one to show; none shows within NO_PAGE_GRACE_MS: 409 no_page', async () => {
  const { b, current } = await setup({ A: true, B: false });
  assert.equal(await current(), 'A');
  // A is hidden, B not yet shown; B's listener reports its change after the first probes of the lookup.
  b.visible.set('A', false);
  b.commands++;
  let probed = 0;
  b.duringProbe = () => {
    if (++probed !== 2) return;
    setTimeout(() => {
      b.visible.set('B', true);
      b.emit('Runtime.bindingCalled', { name: CHANGED_BINDING, payload: '', executionContextId: 7 }, 'S-B');
    }, 20);
  };
  assert.equal(await current(), 'B', 'the page that showed, not 409');
  assert.ok(b.probes > 4, 'the pages were asked again after the round that found none visible');
  b.duringProbe = null;
  b.visible.set('B', false);
  b.commands++;
  const before = b.probes;
  await assert.rejects(current(), (err: Error & { code?: string }) => err.code === 'no_page' && /no page is visible \(2 pages open/.test(err.message));
  assert.ok(b.probes - before >= 4, `asked again within the grace (${NO_PAGE_GRACE_MS} ms) before the 409: ${b.probes - before} probes`);
});
