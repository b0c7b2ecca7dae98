// Retry safety through the real daemon: every error answer says whether a retry is safe
// (x-should-retry, Retry-After and retry-after-ms where it is), and an Idempotency-Key makes a repeat
// replay the first answer instead of doing the work again — a concurrent repeat waits for the
// first, a client that gave up does not cancel the work, another request under the same key is 422,
// an answer a retry may redo (429) is not kept.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { expectError } from '../helpers/http.js';
import { agentScratchDirs } from '../kit/agent.js';
import { TEST_TOKEN, fixtures, startDaemon, type Daemon } from '../kit/daemon.js';
import { until } from '../kit/wait.js';

const scratch = agentScratchDirs('browserd-retry-'); // the API's processes (the agent user) write there
let d: Daemon;
let silent: Daemon;

before(async () => {
  [d, silent] = await Promise.all([
    startDaemon({ env: { BROWSERD_MAX_PROCESSES: '2' } }),
    // A browser that never becomes ready: the lock stays held by its launch for the ready timeout.
    startDaemon({ autostart: true, env: { BROWSERD_CHROMIUM: path.join(fixtures, 'chromium-silent.sh'), BROWSERD_READY_TIMEOUT_MS: '20000' } }),
  ]);
});
after(async () => {
  await Promise.all([d.cleanup(), silent.cleanup()]);
});

function retryHeaders(res: Response): { retry: string | null; after: string | null; afterMs: string | null } {
  return { retry: res.headers.get('x-should-retry'), after: res.headers.get('retry-after'), afterMs: res.headers.get('retry-after-ms') };
}

const keyed = (key: string, json: unknown, token = TEST_TOKEN): RequestInit & { json: unknown } => ({
  method: 'POST',
  headers: { 'idempotency-key': key, authorization: `Bearer ${token}` },
  json,
});

/**
 * SIGKILL to a spawned process, then waits until the daemon has seen it exit: a kill answers once the
 * signal is sent, and a process killed but not yet reaped still counts as running (toward the limit,
 * and in the next test's process list).
 */
async function killAndWait(processId: string): Promise<void> {
  await d.fetch(`/browsers/local/process/${processId}/kill`, { method: 'POST', json: { signal: 'KILL' } });
  await until(`process ${processId} to exit`, async () => ((await (await d.fetch(`/browsers/local/process/${processId}/status`)).json()) as { state: string }).state === 'exited');
}

describe('x-should-retry on every error answer', () => {
  test('false where a retry cannot succeed or would repeat work, without Retry-After', async () => {
    for (const res of [
      await d.fetch('/browsers/local/process/exec', { method: 'POST', json: { command: 'true', bogus: 1 } }), // 400
      await d.fetch('/no/such/route'), // 404
      await d.fetch('/browsers/local/process', { method: 'PUT' }), // 405
      await d.fetch('/whoami', { headers: { authorization: 'Bearer nope-nope-nope-nope' } }), // 401
    ]) {
      assert.deepEqual(retryHeaders(res), { retry: 'false', after: null, afterMs: null }, `${res.status}`);
      await res.arrayBuffer();
    }
    const spawned = (await (await d.fetch('/browsers/local/process/spawn', { method: 'POST', json: { command: 'true' } })).json()) as { process_id: string };
    let res: Response;
    do {
      res = await d.fetch(`/browsers/local/process/${spawned.process_id}/stdin`, { method: 'POST', json: { data_b64: 'eA==' } });
    } while (res.status === 200);
    await expectError(res, 409, 'process_exited');
    assert.equal(res.headers.get('x-should-retry'), 'false');
  });

  test('true with Retry-After where a retry is safe: 429, 409 busy, 503 while Chromium starts', async () => {
    const hold = ['sleep', '30'];
    const a = (await (await d.fetch('/browsers/local/process/spawn', { method: 'POST', json: { command: hold[0], args: hold.slice(1) } })).json()) as { process_id: string };
    const b = (await (await d.fetch('/browsers/local/process/spawn', { method: 'POST', json: { command: hold[0], args: hold.slice(1) } })).json()) as { process_id: string };
    const limited = await d.fetch('/browsers/local/process/spawn', { method: 'POST', json: { command: 'true' } });
    await expectError(limited, 429, 'limit_exceeded');
    assert.equal(limited.headers.get('x-should-retry'), 'true');
    assert.match(limited.headers.get('retry-after') ?? '', /^\d+$/);
    assert.match(limited.headers.get('retry-after-ms') ?? '', /^\d+$/);
    for (const p of [a, b]) await killAndWait(p.process_id);

    const starting = await silent.fetch('/readyz');
    await expectError(starting, 503, 'browser_unavailable');
    assert.equal(starting.headers.get('x-should-retry'), 'true');
    assert.ok(Number(starting.headers.get('retry-after')) >= 1);
    const busy = await silent.fetch('/browsers/local/restart?wait=false', { method: 'POST' });
    await expectError(busy, 409, 'busy');
    assert.equal(busy.headers.get('x-should-retry'), 'true');
    assert.ok(busy.headers.get('retry-after'));
  });
});

describe('Idempotency-Key', () => {
  test('a repeat replays the first answer; another request under the same key is 422; keys are per API key', async () => {
    const first = await d.fetch('/browsers/local/process/spawn', keyed('spawn-1', { command: 'sleep', args: ['5'] }));
    assert.equal(first.status, 200);
    const body = (await first.json()) as { process_id: string; pid: number };
    const again = await d.fetch('/browsers/local/process/spawn', keyed('spawn-1', { command: 'sleep', args: ['5'] }));
    assert.equal(again.status, 200);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(await again.json(), body, 'the same process, not a second one');
    const other = await d.fetch('/browsers/local/process/spawn', keyed('spawn-1', { command: 'sleep', args: ['6'] }));
    await expectError(other, 422, 'idempotency_key_reused');
    assert.equal(other.headers.get('x-should-retry'), 'false');
    const list = (await (await d.fetch('/browsers/local/process')).json()) as { processes: { process_id: string; state: string }[] };
    assert.equal(list.processes.filter((p) => p.state === 'running').length, 1);
    await killAndWait(body.process_id);
    await expectError(await d.fetch('/browsers/local/process/spawn', { ...keyed('bad key with spaces', { command: 'true' }) }), 400, 'bad_request');
  });

  test('a concurrent repeat waits for the first and the work happens once', async () => {
    const file = path.join(scratch(), 'ran');
    const json = { command: 'sh', args: ['-c', `echo ran >> ${file}; sleep 1; echo done`] };
    const [r1, r2] = await Promise.all([d.fetch('/browsers/local/process/exec', keyed('exec-1', json)), d.fetch('/browsers/local/process/exec', keyed('exec-1', json))]);
    const [b1, b2] = [(await r1.json()) as { stdout_b64: string; pid: number }, (await r2.json()) as { stdout_b64: string; pid: number }];
    assert.equal(Buffer.from(b1.stdout_b64, 'base64').toString(), 'done\n');
    assert.deepEqual(b2, b1);
    assert.equal(readFileSync(file, 'utf8'), 'ran\n', 'one execution');
  });

  test('a keyed exec whose client gives up goes on, and the retry gets its whole answer', async () => {
    const file = path.join(scratch(), 'ran');
    const json = { command: 'sh', args: ['-c', `echo ran >> ${file}; sleep 1; echo finished`] };
    const gaveUp = new AbortController();
    const abandoned = d.fetch('/browsers/local/process/exec', { ...keyed('exec-2', json), signal: gaveUp.signal }).catch((err: unknown) => err);
    setTimeout(() => gaveUp.abort(), 300);
    assert.ok((await abandoned) instanceof Error, 'the first client gave up');
    const retry = await d.fetch('/browsers/local/process/exec', keyed('exec-2', json));
    const body = (await retry.json()) as { stdout_b64: string; exit_code: number };
    assert.equal(body.exit_code, 0, 'the command was not killed when its first client went away');
    assert.equal(Buffer.from(body.stdout_b64, 'base64').toString(), 'finished\n');
    assert.equal(readFileSync(file, 'utf8'), 'ran\n', 'one execution');
  });

  test('an answer a retry may redo (429) is not kept: the repeat does the work', async () => {
    const holders = await Promise.all(
      [0, 1].map(async () => ((await (await d.fetch('/browsers/local/process/spawn', { method: 'POST', json: { command: 'sleep', args: ['30'] } })).json()) as { process_id: string }).process_id),
    );
    await expectError(await d.fetch('/browsers/local/process/spawn', keyed('spawn-429', { command: 'true' })), 429, 'limit_exceeded');
    for (const id of holders) await killAndWait(id);
    let res: Response;
    do {
      res = await d.fetch('/browsers/local/process/spawn', keyed('spawn-429', { command: 'true' }));
      if (res.status === 429) await res.arrayBuffer(); // the killed groups may take a moment to be gone
    } while (res.status === 429);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('idempotent-replayed'), null);
  });

  test('the keys kept and the replays are in /metrics', async () => {
    const text = await (await d.fetch('/metrics')).text();
    assert.match(text, /^browserd_idempotency_keys [1-9]\d*$/m);
    assert.match(text, /^browserd_idempotency_replays_total [1-9]\d*$/m);
  });
});
