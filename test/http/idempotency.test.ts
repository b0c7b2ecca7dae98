// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The idempotency store (unit): a full store of many keys refuses a new one with 429 limit_exceeded
// and a Retry-After from its oldest expiry (no RangeError from spreading every entry), and the purge
// forgets exactly the keys whose TTL is over, in the order their answers came in.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { LimitExceededError } from '../../daemon/core/errors.js';
import { createMetrics } from '../../daemon/core/metrics.js';
import { IdempotencyStore, type StoredAnswer } from '../../daemon/http/idempotency.js';

const answer = (text: string): StoredAnswer => ({ status: 200, headers: {}, body: Buffer.from(text) });

/** Claims `key` as a first request and returns its settle (throws when the key is known). */
function first(store: IdempotencyStore, key: string): (a: StoredAnswer | null) => void {
  const c = store.claim('scope', key, 'POST /x');
  assert.equal(c.kind, 'first', `${key} is new`);
  return (a) => c.settle(a, 'digest');
}

describe('idempotency store', () => {
  test('a full store of 200,000 keys refuses the next key with 429 and the oldest expiry as Retry-After', () => {
    const ttlMs = 600_000;
    const metrics = createMetrics();
    const maxKeys = 200_000;
    const store = new IdempotencyStore({ maxKeys, maxBytes: 4096 * 1024 * 1024, ttlMs, metrics });
    for (let i = 0; i < maxKeys; i++) first(store, `k${i}`)(answer('ok'));
    let refused: unknown = null;
    try {
      store.claim('scope', 'one-more', 'POST /x');
    } catch (err) {
      refused = err;
    }
    assert.ok(refused instanceof LimitExceededError, `a LimitExceededError, got ${String(refused)}`);
    assert.equal(refused.code, 'limit_exceeded');
    assert.ok(refused.retryAfterMs !== undefined && refused.retryAfterMs > 1000 && refused.retryAfterMs <= ttlMs, `Retry-After from the oldest key: ${refused.retryAfterMs}`);
    // A known key is still a repeat, not refused.
    assert.equal(store.claim('scope', 'k0', 'POST /x').kind, 'repeat');
  });

  test('the purge forgets exactly the expired keys, in the order their answers came in', async (t) => {
    t.mock.timers.enable({ apis: ['Date'], now: 1_000_000 });
    const ttlMs = 10_000;
    const metrics = createMetrics();
    const store = new IdempotencyStore({ maxKeys: 3, maxBytes: 1024 * 1024, ttlMs, metrics });
    const keys = async (): Promise<number> => (await metrics.idempotencyKeys.get()).values[0]?.value ?? -1;
    const bytes = async (): Promise<number> => (await metrics.idempotencyBytes.get()).values[0]?.value ?? -1;

    const settleB = first(store, 'b'); // claimed first, answered last
    const settleA = first(store, 'a');
    settleA(answer('aaaa')); // expires at +10 s
    t.mock.timers.tick(4000);
    settleB(answer('bb')); // expires at +14 s
    first(store, 'running'); // never answered: never expires
    assert.equal(await keys(), 3);
    assert.equal(await bytes(), 4 + 512 + 2 + 512);

    // Full: the Retry-After is the time to a's expiry (the oldest answer), not b's.
    assert.throws(() => store.claim('scope', 'c', 'POST /x'), (err: unknown) => err instanceof LimitExceededError && err.retryAfterMs === 6000);

    t.mock.timers.tick(6000); // a's TTL is over, b's is not
    first(store, 'c')(answer('c')); // a is purged first, which makes room for c
    assert.equal(await keys(), 3);
    assert.equal(await bytes(), 2 + 512 + 1 + 512);
    assert.equal(store.claim('scope', 'b', 'POST /x').kind, 'repeat', 'b is kept');
    assert.equal(store.claim('scope', 'running', 'POST /x').kind, 'repeat', 'a running request is kept');

    t.mock.timers.tick(4000); // b's TTL is over
    first(store, 'a')(null); // a new claim under a's old key runs (a is forgotten); not kept
    assert.equal(await keys(), 2, 'running and c');
    assert.equal(await bytes(), 1 + 512);

    t.mock.timers.tick(ttlMs);
    first(store, 'b')(null); // b's old key is free again; c has expired too
    assert.equal(await keys(), 1, 'only the running request');
    assert.equal(await bytes(), 0);
  });
});
