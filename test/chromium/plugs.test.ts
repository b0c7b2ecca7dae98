// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The browser's extension points (daemon/chromium/plugs.ts): a slot has one owner and a second claim
// throws, naming both, with nothing of the refused plug added; lists take every module's in order.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BrowserPlugs, SlotTakenError } from '../../daemon/chromium/plugs.js';

const noop = async (): Promise<void> => undefined;

test('a slot claimed by a second module throws, naming the holder and the claimant', () => {
  const plugs = new BrowserPlugs();
  plugs.use({ name: 'profiles', stopWork: () => null });
  assert.throws(
    () => plugs.use({ name: 'other', stopWork: () => null }),
    (err: unknown) => err instanceof SlotTakenError && err.slot === 'stopWork' && err.holder === 'profiles' && err.claimant === 'other' && /profiles/.test(err.message) && /other/.test(err.message),
  );
  assert.equal(plugs.owner('stopWork'), 'profiles');
  for (const slot of ['launchExtras', 'proxyPort'] as const) {
    const p = new BrowserPlugs();
    p.use({ name: 'first', [slot]: () => null });
    assert.throws(() => p.use({ name: 'second', [slot]: () => null }), SlotTakenError, slot);
  }
});

test('CDP policies are a list, composed in the order of use(): the first refusal wins, rewrites apply in turn, every module hears a client leave', () => {
  const plugs = new BrowserPlugs();
  const left: string[] = [];
  plugs.use({ name: 'downloads', cdpPolicy: { rewrite: (_c, m, p) => (m === 'X.y' ? { ...p, a: 1 } : undefined), released: () => left.push('downloads') } });
  plugs.use({ name: 'egress', cdpPolicy: { refuse: (_c, m) => (m === 'Target.createBrowserContext' ? 'egress says no' : null), rewrite: (_c, m, p) => (m === 'X.y' ? { ...p, b: 2 } : undefined), released: () => left.push('egress') } });
  const policy = plugs.cdpPolicy();
  assert.ok(policy !== undefined);
  const channel = {} as Parameters<NonNullable<typeof policy.refuse>>[0];
  assert.equal(policy.refuse?.(channel, 'Target.createBrowserContext', {}), 'egress says no');
  assert.equal(policy.refuse?.(channel, 'Page.navigate', {}), null);
  assert.deepEqual(policy.rewrite?.(channel, 'X.y', {}), { a: 1, b: 2 });
  assert.equal(policy.rewrite?.(channel, 'Other.z', {}), undefined);
  policy.released?.(channel);
  assert.deepEqual(left, ['downloads', 'egress']);
});

test('a refused plug adds nothing: not its other slots, not its list entries', () => {
  const plugs = new BrowserPlugs();
  plugs.use({ name: 'proxies', proxyPort: () => 1234 });
  assert.throws(() => plugs.use({ name: 'late', proxyPort: () => 1, stopWork: () => null, onLaunch: noop, snapshot: () => ({ late: true }) }), SlotTakenError);
  assert.equal(plugs.proxyPort(), 1234, 'the holder keeps the slot');
  assert.equal(plugs.owner('stopWork'), null, 'the refused plug took no other slot');
  assert.equal(plugs.onLaunch.length, 0);
  assert.equal(plugs.snapshot.length, 0);
});

test('empty slots answer their defaults; lists keep every module in the order of use()', () => {
  const plugs = new BrowserPlugs();
  assert.deepEqual(plugs.launchExtras(), { extensionPaths: [], allowBackgroundNetworking: false });
  assert.equal(plugs.stopWork(), null);
  assert.equal(plugs.proxyPort(), null);
  assert.equal(plugs.cdpPolicy(), undefined);
  const seen: string[] = [];
  plugs.use({ name: 'telemetry', onLaunch: noop, cdpClients: { connected: () => seen.push('telemetry'), closed: () => undefined } });
  plugs.use({ name: 'downloads', onLaunch: noop, cdpClients: { connected: () => seen.push('downloads'), closed: () => undefined } });
  plugs.use({ name: 'extensions', launchExtras: () => ({ extensionPaths: ['/x'], allowBackgroundNetworking: true }) });
  assert.equal(plugs.onLaunch.length, 2);
  plugs.cdpClientEvents.connected({ remote: '127.0.0.1:1', target: undefined, pid: 1 });
  assert.deepEqual(seen, ['telemetry', 'downloads']);
  assert.deepEqual(plugs.launchExtras(), { extensionPaths: ['/x'], allowBackgroundNetworking: true });
});
