// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The CDP send budget (unit): a client is closed when what it had unsent before a message passes
// its own limit (slow_client), or when every client together passed the total (cdp_queue_full: the
// one holding the most goes); one large message to a client that reads trips neither.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { SendBudget, type QueuedClient } from '../../daemon/cdp/send-budget.js';

class Fake implements QueuedClient {
  closing = false;
  constructor(
    readonly name: string,
    public bufferedAmount: number,
  ) {}
}

describe('CDP send budget', () => {
  const budget = new SendBudget<Fake>({ clientBytes: 1000, totalBytes: 2500 });

  test('one large message to a client that had nothing unsent passes, also past both limits', () => {
    const big = new Fake('big', 10_000);
    assert.equal(budget.check(big, 10_000, [big]), null);
  });

  test('a client that had more than its limit unsent before the message: slow_client, naming the setting', () => {
    const slow = new Fake('slow', 1200);
    const v = budget.check(slow, 100, [slow]);
    assert.equal(v?.client, slow);
    assert.equal(v?.code, 'slow_client');
    assert.equal(v?.reason, 'slow_client: 1100 bytes unsent to this client (limit 1000, BROWSERD_CDP_CLIENT_QUEUE_BYTES)');
    assert.equal(budget.check(new Fake('at-limit', 1100), 100, []), null, 'at the limit is still within it');
  });

  test('every client within its own limit but together past the total: the one holding the most goes, not the one sent to', () => {
    const a = new Fake('a', 900);
    const b = new Fake('b', 1000);
    const c = new Fake('c', 800);
    const v = budget.check(c, 100, [a, b, c]);
    assert.equal(v?.client, b);
    assert.equal(v?.code, 'cdp_queue_full');
    assert.equal(v?.reason, 'cdp_queue_full: 2600 bytes unsent over all CDP clients (limit 2500, BROWSERD_CDP_QUEUE_TOTAL_BYTES)');
    assert.ok(Buffer.byteLength(v?.reason ?? '') <= 123, 'fits a close frame');
    // Within the total before this message: nothing.
    assert.equal(budget.check(c, 200, [a, b, c]), null);
    // A client whose message went to the socket whole adds nothing: no check of the others.
    assert.equal(budget.check(new Fake('drained', 0), 100, [a, b, c]), null);
  });

  test('a client already closing still counts (its bytes are held) and may be the one chosen again', () => {
    const closing = new Fake('closing', 2000);
    closing.closing = true;
    const other = new Fake('other', 700);
    const v = budget.check(other, 100, [closing, other]);
    assert.equal(v?.client, closing);
    assert.equal(v?.code, 'cdp_queue_full');
  });

  test('the total over every client', () => {
    assert.equal(SendBudget.total([new Fake('a', 3), new Fake('b', 4)]), 7);
  });
});
