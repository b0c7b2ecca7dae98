// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// Unit tests of the strict base64 decoder, the replay buffer, the stdin writer and the set of
// process groups (the HTTP behaviour they give is tested through the daemon in the other
// processes-*.test.ts files).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { after, before, describe, test } from 'node:test';
import { BrowserdError } from '../../daemon/core/errors.js';
import { statusOf } from '../../daemon/http/errors.js';
import { GroupSet } from '../../daemon/processes/groups/groups.js';
import { CHUNK_OVERHEAD_BYTES, ReplayBuffer } from '../../daemon/processes/output/replay-buffer.js';
import { createMetrics } from '../../daemon/core/metrics.js';
import type { ManagedProcess } from '../../daemon/processes/managed-process.js';
import { ProcessTable } from '../../daemon/processes/process-table.js';
import { StdinBudget } from '../../daemon/processes/stdin/stdin-budget.js';
import { SLICE_BYTES, StdinWriter, type StdinWriterOptions } from '../../daemon/processes/stdin/stdin-writer.js';
import { Base64Error, base64Length, decodeStrictBase64, decodedLength } from '../../daemon/core/strict-base64.js';
import { launchPty, loadPty } from '../../daemon/core/process/pty.js';
import { tempDir } from '../kit/cleanup.js';
import { groupMembers, killGroup, waitGroupGone } from '../kit/procs.js';
import { until, waitFile } from '../kit/wait.js';

const dir = tempDir('browserd-units-');

/** A full garbage collection on demand (for measuring what a structure holds). */
function collector(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}
// The timers of the stdin writer and of the group set are unref'd (in the daemon its server keeps
// the event loop alive): this one does it here.
let keepAlive: NodeJS.Timeout;
before(() => (keepAlive = setInterval(() => {}, 60_000)));
after(() => {
  clearInterval(keepAlive);
  rmSync(dir, { recursive: true, force: true });
});

describe('strict base64', () => {
  test('decodes every length of random bytes exactly like the standard encoder produced them', () => {
    for (let n = 0; n < 64; n++) {
      const bytes = randomBytes(n);
      const text = bytes.toString('base64');
      assert.deepEqual(decodeStrictBase64(text), bytes, `length ${n}`);
      assert.equal(decodedLength(text), n);
      assert.equal(base64Length(n), text.length);
    }
    assert.deepEqual(decodeStrictBase64('+/+/'), Buffer.from([0xfb, 0xff, 0xbf]));
  });

  const bad: [string, string, RegExp][] = [
    ['a character outside the alphabet', 'aGVs*G8=', /'\*' \(U\+002A\) at position 4 is not in the base64 alphabet/],
    ['a space inside', 'aGVs bG8=', /a space at position 4: whitespace/],
    ['a line break inside', 'aGVsbG8g\nd29ybGQ=', /a line feed \(\\n\) at position 8/],
    ['a trailing line break', 'aGVsbG8=\n', /a line feed \(\\n\) at position 8/],
    ['a carriage return', 'aGVs\r\nbG8=', /a carriage return \(\\r\) at position 4/],
    ['a tab', '\taGVsbG8=', /a tab \(\\t\) at position 0/],
    ['base64url characters', 'aGV-bG8_', /'-' \(U\+002D\) at position 3 .*base64url is not accepted/],
    ['a non-ASCII character', 'aGVsbG8é', /U\+00E9 at position 7/],
    ['missing padding', 'aGVsbG8', /length 7 is not a multiple of 4/],
    ['a length not a multiple of 4', 'aGVsbG8gd', /length 9 is not a multiple of 4/],
    ['padding in the middle', 'aG==bG8=', /'b' at position 4 follows the padding '=' at position 2/],
    ['three padding characters', 'aG===', /too much padding: 3/],
    ['only padding', '====', /too much padding: 4/],
    ['a lone =', '=', /length 1 is not a multiple of 4/],
    ['non-zero bits before one =', 'aGVsbG9=', /'9' at position 6 has unused bits set/],
    ['non-zero bits before ==', 'aR==', /'R' at position 1 has unused bits set/],
  ];
  for (const [what, text, message] of bad) {
    test(`refuses ${what}, naming what and where`, () => {
      assert.throws(() => decodeStrictBase64(text), (err: unknown) => {
        assert.ok(err instanceof Base64Error);
        assert.match(err.message, message);
        return true;
      });
    });
  }

  test('the empty text is zero bytes', () => {
    assert.equal(decodeStrictBase64('').length, 0);
  });
});

describe('replay buffer', () => {
  const text = (chunks: { data: Buffer }[]): string => Buffer.concat(chunks.map((c) => c.data)).toString();
  /** Offsets and losses in payload bytes, as a buffer counted without overhead or slabs. */
  const PAYLOAD_ONLY = { chunkOverheadBytes: 0, slabBytes: 0 };

  test('keeps both streams interleaved in arrival order with absolute offsets', () => {
    const b = new ReplayBuffer(1024, PAYLOAD_ONLY);
    b.append('stdout', Buffer.from('one '));
    b.append('stderr', Buffer.from('two '));
    b.append('stdout', Buffer.from('three'));
    const r = b.read(0);
    assert.equal(r.lost, 0);
    assert.deepEqual(r.chunks.map((c) => [c.stream, c.start, c.data.toString()]), [
      ['stdout', 0, 'one '],
      ['stderr', 4, 'two '],
      ['stdout', 8, 'three'],
    ]);
    assert.equal(r.next, 13);
    assert.deepEqual(b.read(13).chunks, []);
    // A reader in the middle of a chunk gets the rest of it.
    assert.deepEqual(b.read(6).chunks.map((c) => [c.start, c.data.toString()]), [[6, 'o '], [8, 'three']]);
  });

  test('past its capacity it drops the oldest bytes and a reader behind learns how many it lost', () => {
    const b = new ReplayBuffer(10, PAYLOAD_ONLY);
    b.append('stdout', Buffer.from('0123456789'));
    b.append('stderr', Buffer.from('abcd'));
    assert.equal(b.keptBytes, 10);
    assert.equal(b.startOffset, 4);
    assert.equal(b.endOffset, 14);
    const r = b.read(0);
    assert.equal(r.lost, 4);
    assert.equal(text(r.chunks), '456789abcd');
    assert.equal(r.chunks[0]?.start, 4);
    // A reader that kept up loses nothing.
    const r2 = b.read(10);
    assert.equal(r2.lost, 0);
    assert.equal(text(r2.chunks), 'abcd');
  });

  test('one chunk larger than the capacity keeps its tail', () => {
    const b = new ReplayBuffer(4, PAYLOAD_ONLY);
    b.append('stdout', Buffer.from('abcdefgh'));
    const r = b.read(0);
    assert.equal(r.lost, 4);
    assert.equal(text(r.chunks), 'efgh');
    assert.equal(r.next, 8);
  });

  test('many small chunks: the count of bytes lost plus bytes read is every byte written', () => {
    const b = new ReplayBuffer(1000, PAYLOAD_ONLY);
    let written = 0;
    let offset = 0;
    let got = 0;
    let lost = 0;
    for (let i = 0; i < 5000; i++) {
      const chunk = randomBytes(1 + (i % 97));
      b.append(i % 3 === 0 ? 'stderr' : 'stdout', chunk);
      written += chunk.length;
      if (i % 50 === 0) {
        const r = b.read(offset, 300);
        lost += r.lost;
        got += r.chunks.reduce((n, c) => n + c.data.length, 0);
        offset = r.next;
      }
    }
    for (;;) {
      const r = b.read(offset, 300);
      lost += r.lost;
      got += r.chunks.reduce((n, c) => n + c.data.length, 0);
      offset = r.next;
      if (r.chunks.length === 0) break;
    }
    assert.equal(offset, written);
    assert.equal(lost + got, written);
    assert.ok(lost > 0);
  });

  test('1-byte chunks: the memory held stays within the capacity in real bytes (heap and buffers measured)', () => {
    const capacity = 1024 * 1024;
    const gc = collector();
    gc();
    const before = process.memoryUsage();
    const b = new ReplayBuffer(capacity);
    const one = Buffer.from('x');
    // Each chunk its own Buffer, as a pipe's reads give them.
    for (let i = 0; i < 1_200_000; i++) b.append(i % 1000 === 999 ? 'stderr' : 'stdout', Buffer.from(one));
    gc();
    const after = process.memoryUsage();
    const held = after.heapUsed - before.heapUsed + (after.arrayBuffers - before.arrayBuffers);
    // What the buffer holds, measured: near its capacity (the margin is the measurement's noise, up to
    // a MiB; counted by payload, one Buffer per byte held ~170 times the capacity).
    assert.ok(held < 4 * capacity, `held ${held} bytes for a capacity of ${capacity}`);
    assert.ok(b.memoryBytes <= capacity, `accounted ${b.memoryBytes} <= ${capacity}`);
    // Every byte is still addressed right: the newest ones are readable, the older ones counted as lost.
    const r = b.read(0);
    assert.equal(r.lost + r.chunks.reduce((n, c) => n + c.data.length, 0), 1_200_000);
    assert.equal(r.next, 1_200_000);
    assert.ok(b.keptBytes > capacity / 2, `most of the capacity holds bytes: ${b.keptBytes}`);
  });

  test('the accounting counts every chunk\'s overhead, whole slabs while used, and large chunks by their bytes', () => {
    const b = new ReplayBuffer(64 * 1024, { slabBytes: 1024 });
    b.append('stdout', Buffer.from('ab'));
    b.append('stdout', Buffer.from('cd')); // extends the chunk before it (same stream, same slab)
    assert.equal(b.chunkCount, 1);
    assert.equal(b.memoryBytes, 1024 + CHUNK_OVERHEAD_BYTES);
    b.append('stderr', Buffer.from('ef')); // same slab, a chunk of its own
    assert.equal(b.chunkCount, 2);
    assert.equal(b.memoryBytes, 1024 + 2 * CHUNK_OVERHEAD_BYTES);
    b.append('stdout', Buffer.alloc(4096, 1)); // larger than a quarter slab: kept as it is
    assert.equal(b.memoryBytes, 1024 + 3 * CHUNK_OVERHEAD_BYTES + 4096);
    assert.deepEqual(b.read(0).chunks.map((c) => [c.stream, c.start, c.data.length]), [
      ['stdout', 0, 4],
      ['stderr', 4, 2],
      ['stdout', 6, 4096],
    ]);
    // Past the capacity the oldest chunks go, and the slab with the last of them.
    for (let i = 0; i < 16; i++) b.append('stdout', Buffer.alloc(4096, 2));
    assert.ok(b.memoryBytes <= 64 * 1024);
    assert.equal(b.read(0).chunks[0]?.data[0], 2, 'the slab\'s chunks were dropped first');
  });

  test('wait resolves on new output, on finish and on abort; nothing is appended after finish', async () => {
    const b = new ReplayBuffer(100, PAYLOAD_ONLY);
    const waiting = b.wait(0);
    b.append('stdout', Buffer.from('x'));
    await waiting;
    const ac = new AbortController();
    const aborted = b.wait(1, ac.signal);
    ac.abort();
    await aborted;
    const finishing = b.wait(1);
    b.finish({ exit_code: 0, signal: null });
    await finishing;
    assert.deepEqual(b.exit, { exit_code: 0, signal: null });
    b.append('stdout', Buffer.from('late'));
    assert.equal(b.endOffset, 1);
    b.finish({ exit_code: 1, signal: null });
    assert.deepEqual(b.exit, { exit_code: 0, signal: null }, 'finish is idempotent');
  });
});

describe('process table', () => {
  test('finished processes are forgotten oldest first once their output buffers pass BROWSERD_OUTPUT_RETAINED_BYTES together', async () => {
    const table = new ProcessTable({ maxLive: 10, retentionMs: 600_000, retainedBytes: 2500, metrics: createMetrics() });
    const proc = (id: string, bytes: number): { id: string; done: Promise<void>; output: { memoryBytes: number } } => ({ id, done: Promise.resolve(), output: { memoryBytes: bytes } });
    for (const [id, bytes] of [['a', 1000], ['b', 1000], ['c', 400]] as const) table.add(proc(id, bytes) as unknown as ManagedProcess);
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(['a', 'b', 'c'].map((id) => table.get(id).id), ['a', 'b', 'c'], '2400 bytes: all kept');
    table.add(proc('d', 900) as unknown as ManagedProcess);
    await new Promise((resolve) => setImmediate(resolve));
    assert.throws(() => table.get('a'), apiError(404, 'not_found'));
    assert.deepEqual(['b', 'c', 'd'].map((id) => table.get(id).id), ['b', 'c', 'd'], '2300 bytes once a is forgotten');
    assert.equal(table.outputMemoryBytes, 2300);
    table.close();
  });
});

/** A stand-in for a pipe: records every chunk; while `holding`, write callbacks wait for release(). */
class FakePipe extends Writable {
  readonly chunks: Buffer[] = [];
  private held: (() => void)[] = [];
  holding = false;
  failWith: Error | null = null;

  constructor() {
    super({ highWaterMark: 1 });
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, cb: (err?: Error | null) => void): void {
    if (this.failWith !== null) return cb(this.failWith);
    this.chunks.push(chunk);
    if (this.holding) this.held.push(() => cb());
    else setImmediate(cb);
  }

  release(): void {
    this.holding = false;
    for (const f of this.held.splice(0)) f();
  }

  get received(): Buffer {
    return Buffer.concat(this.chunks);
  }
}

function writer(pipe: Writable, opts: Partial<StdinWriterOptions> = {}): StdinWriter {
  return new StdinWriter(pipe, { processId: 'p1', timeoutMs: 60_000, maxQueuedBytes: 64 * 1024 * 1024, exited: new Promise(() => {}), onWritten: () => {}, ...opts });
}

const apiError = (status: number, code: string, message?: RegExp) => (err: unknown): boolean => {
  assert.ok(err instanceof BrowserdError, String(err));
  assert.equal(statusOf(err.code), status);
  assert.equal(err.code, code);
  if (message) assert.match(err.message, message);
  return true;
};

describe('stdin writer', () => {
  test('requests land in the order accepted, each contiguous across its slices; close ends the stream after them', async () => {
    const pipe = new FakePipe();
    let counted = 0;
    const w = writer(pipe, { onWritten: (n) => (counted += n) });
    const payloads = [randomBytes(3 * SLICE_BYTES + 5), randomBytes(2 * SLICE_BYTES - 1), randomBytes(1000), randomBytes(SLICE_BYTES + 1)];
    const results = await Promise.all(payloads.map((p, i) => w.write(p, i === payloads.length - 1)));
    assert.deepEqual(results, payloads.map((p) => p.length));
    assert.deepEqual(pipe.received, Buffer.concat(payloads));
    assert.ok(pipe.chunks.length >= 8, 'large requests go out in several slices');
    for (const c of pipe.chunks) assert.ok(c.length <= SLICE_BYTES);
    assert.equal(counted, pipe.received.length);
    assert.equal(pipe.writableFinished, true, 'EOF after the data');
    assert.equal(w.currentState, 'closed');
    assert.throws(() => w.write(Buffer.from('x'), false), apiError(409, 'stdin_closed'));
  });

  test('a request after close: true is refused at once, even before the EOF went out', () => {
    const pipe = new FakePipe();
    pipe.holding = true;
    const w = writer(pipe);
    void w.write(Buffer.from('last'), true);
    assert.equal(w.currentState, 'closing');
    assert.throws(() => w.write(Buffer.from('more'), false), apiError(409, 'stdin_closed'));
    pipe.release();
  });

  test('past the deadline: 504 with the bytes still queued, which are written later, in order', async () => {
    const pipe = new FakePipe();
    pipe.holding = true;
    const w = writer(pipe, { timeoutMs: 20 });
    const a = randomBytes(2 * SLICE_BYTES);
    const b = randomBytes(1000);
    await assert.rejects(w.write(a, false), apiError(504, 'timeout', new RegExp(`^the child is not reading its stdin: ${a.length} of ${a.length} bytes`)));
    await assert.rejects(w.write(b, false), apiError(504, 'timeout', new RegExp(`${b.length} of ${b.length} bytes of this request stay queued \\(behind ${a.length} bytes`)));
    assert.equal(w.queuedBytes, a.length + b.length);
    const c = Buffer.from('after');
    const done = w.write(c, false);
    pipe.release();
    assert.equal(await done, c.length);
    assert.deepEqual(pipe.received, Buffer.concat([a, b, c]));
    assert.equal(w.queuedBytes, 0);
  });

  test('one deadline timer per writer, however many requests wait: each still gets its 504, in order', async () => {
    const pipe = new FakePipe();
    pipe.holding = true;
    const w = writer(pipe, { timeoutMs: 30 });
    // Counts the timers the writer makes while it queues (the real setTimeout underneath).
    const realSetTimeout = globalThis.setTimeout;
    let made = 0;
    globalThis.setTimeout = ((...args: Parameters<typeof setTimeout>) => {
      made++;
      return realSetTimeout(...args);
    }) as typeof setTimeout;
    let writes: Promise<number>[];
    try {
      writes = Array.from({ length: 50 }, (_, i) => w.write(Buffer.alloc(10, i), false));
    } finally {
      globalThis.setTimeout = realSetTimeout;
    }
    const outcomes = await Promise.allSettled(writes);
    assert.equal(made, 1, 'fifty waiting requests, one timer');
    for (const [i, o] of outcomes.entries()) {
      assert.equal(o.status, 'rejected', `request ${i}`);
      apiError(504, 'timeout', new RegExp(`10 of 10 bytes of this request stay queued \\(behind ${i * 10} bytes`))((o as PromiseRejectedResult).reason);
    }
    // A request answered in time leaves nothing behind that answers it again, and the bytes all land.
    const late = w.write(Buffer.from('late'), false);
    pipe.release();
    assert.equal(await late, 4);
    assert.equal(pipe.received.length, 504);
    assert.equal(w.queuedBytes, 0);
  });

  test('a request that would pass the queued-bytes cap is 429 and nothing of it is queued', async () => {
    const pipe = new FakePipe();
    pipe.holding = true;
    const w = writer(pipe, { maxQueuedBytes: 1000 });
    const first = w.write(Buffer.alloc(600, 1), false);
    assert.throws(() => w.write(Buffer.alloc(401, 2), false), apiError(429, 'limit_exceeded', /600 bytes of earlier requests .* limit of 1000 bytes queued per process/));
    assert.equal(w.queuedBytes, 600);
    assert.equal(w.currentState, 'open');
    const fits = w.write(Buffer.alloc(400, 3), true);
    pipe.release();
    assert.deepEqual(await Promise.all([first, fits]), [600, 400]);
    assert.deepEqual(pipe.received, Buffer.concat([Buffer.alloc(600, 1), Buffer.alloc(400, 3)]));
  });

  test('the bytes queued over every process are capped: 429 stdin_queue_total, nothing queued, room again once read or failed', async () => {
    const budget = new StdinBudget(1000);
    const [pa, pb] = [new FakePipe(), new FakePipe()];
    pa.holding = true;
    pb.holding = true;
    let exitB!: () => void;
    const a = writer(pa, { processId: 'pa', budget });
    const b = writer(pb, { processId: 'pb', budget, exited: new Promise<void>((resolve) => (exitB = resolve)) });
    const first = a.write(Buffer.alloc(600, 1), false);
    const second = b.write(Buffer.alloc(300, 2), false);
    assert.equal(budget.usedBytes, 900);
    // Each process is far below its own cap; together they would pass the shared one.
    assert.throws(() => a.write(Buffer.alloc(101, 3), false), (err: unknown) => {
      apiError(429, 'limit_exceeded', /900 bytes accepted .* 101 bytes of this request to process pa would pass the limit of 1000 bytes \(BROWSERD_STDIN_QUEUE_TOTAL_BYTES\)/)(err);
      assert.equal((err as BrowserdError).inner?.code, 'stdin_queue_total');
      return true;
    });
    assert.equal(budget.usedBytes, 900, 'nothing of the refused request was taken');
    assert.equal(a.queuedBytes, 600);
    // The child of a reads: its bytes leave the budget.
    pa.release();
    assert.equal(await first, 600);
    assert.equal(budget.usedBytes, 300);
    const third = a.write(Buffer.alloc(700, 3), false);
    assert.equal(budget.usedBytes, 1000);
    // b exits with its bytes queued: they fail and leave the budget.
    exitB();
    b.processExited();
    await assert.rejects(second, apiError(409, 'process_exited'));
    assert.equal(budget.usedBytes, 700);
    assert.equal(await third, 700);
    assert.equal(budget.usedBytes, 0);
    // A write callback that comes after the failure gives back nothing twice.
    pb.release();
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(budget.usedBytes, 0);
  });

  test('EPIPE from a process that exited: 409 process_exited, no uncaught error', async () => {
    const pipe = new FakePipe();
    pipe.failWith = Object.assign(new Error('write EPIPE'), { code: 'EPIPE' });
    let exit!: () => void;
    const w = writer(pipe, { exited: new Promise<void>((resolve) => (exit = resolve)) });
    const pending = w.write(Buffer.from('lost'), false);
    setImmediate(exit);
    await assert.rejects(pending, apiError(409, 'process_exited', /exited before reading 4 of the 4 bytes/));
    assert.throws(() => w.write(Buffer.from('x'), false), apiError(409, 'process_exited'));
  });

  test('EPIPE from a process that lives on (it closed its stdin): 409 stdin_closed', async () => {
    const pipe = new FakePipe();
    pipe.failWith = Object.assign(new Error('write EPIPE'), { code: 'EPIPE' });
    const w = writer(pipe);
    await assert.rejects(w.write(Buffer.from('lost'), false), apiError(409, 'stdin_closed', /closed its stdin before reading 4/));
    assert.throws(() => w.write(Buffer.from('x'), false), apiError(409, 'stdin_closed'));
  });

  test('the process exits with bytes queued: they fail with 409 process_exited', async () => {
    const pipe = new FakePipe();
    pipe.holding = true;
    const w = writer(pipe);
    const pending = w.write(Buffer.alloc(10), false);
    w.processExited();
    await assert.rejects(pending, apiError(409, 'process_exited'));
  });
});

describe('process groups', () => {
  /** A detached child (its own group) whose exit is reported to the set, as the routes do. */
  function startGroup(set: GroupSet, script: string): { pgid: number; group: ReturnType<GroupSet['add']> } {
    const child = spawn('sh', ['-c', script], { detached: true, stdio: 'ignore' });
    const pgid = child.pid as number;
    const group = set.add(pgid);
    child.once('exit', () => void group.leaderExit());
    return { pgid, group };
  }

  test('a group outlives its leader until its last member is gone; then it is forgotten and never signalled', async () => {
    const set = new GroupSet(20);
    const { pgid, group } = startGroup(set, 'sleep 300 & exit 0');
    try {
      let goneCalls = 0;
      group.onGone(() => goneCalls++);
      await new Promise<void>((resolve) => {
        const check = setInterval(() => {
          if (group.leaderExited) {
            clearInterval(check);
            resolve();
          }
        }, 10);
      });
      assert.equal(await group.alive(), true, 'the background child lives on');
      assert.equal(set.size, 1);
      assert.equal(goneCalls, 0);
      assert.equal(await group.signal('SIGKILL'), true);
      await group.gone; // noticed by the periodic check
      assert.equal(goneCalls, 1);
      assert.equal(set.size, 0);
      assert.equal(await group.alive(), false);
      assert.equal(await group.signal('SIGKILL'), false, 'a gone group is not signalled (its number may be reused)');
      assert.deepEqual(groupMembers(pgid), []);
    } finally {
      set.close();
      killGroup(pgid);
    }
  });

  test('a group whose members all exit with the leader is forgotten at once', async () => {
    const set = new GroupSet();
    const { group } = startGroup(set, 'exit 0');
    await group.gone;
    assert.equal(set.size, 0);
    set.close();
  });

  test('killAll reaches the groups that endAll is still working on', async () => {
    const set = new GroupSet(20);
    const ready = path.join(dir, 'trapped');
    const termed = path.join(dir, 'termed');
    // SIGTERM is caught (and noted in a file), not obeyed.
    const { pgid, group } = startGroup(set, `trap ": > ${termed}" TERM; : > ${ready}; while :; do sleep 1; done`);
    try {
      await waitFile(ready, () => true); // the trap is set
      const ending = set.endAll(10_000);
      await waitFile(termed, () => true); // endAll has sent SIGTERM and waits out its grace
      set.killAll();
      await group.gone;
      const result = await ending;
      assert.deepEqual(result, { terminated: 1, killed: 0 }, 'killAll ended it, not endAll after its grace');
      await waitGroupGone(pgid, 5000);
    } finally {
      set.close();
      killGroup(pgid);
    }
  });
});

describe('terminal input', () => {
  test('a write waiting for room in a terminal nobody reads fails (EIO) when the terminal goes away, instead of hanging', async () => {
    loadPty();
    const child = launchPty({ command: '/bin/sh', args: ['-c', 'stty raw -echo; echo ready; sleep 300'], env: { PATH: '/usr/bin:/bin' }, cwd: '/', rows: 24, cols: 80 });
    try {
      await new Promise<void>((resolve) => child.output.on('data', (d: Buffer) => d.toString().includes('ready') && resolve()));
      const result = new Promise<Error | null | undefined>((resolve) => child.input.write(Buffer.alloc(1024 * 1024), (err) => resolve(err)));
      await until('the write to wait for room', () => (child.input.writeQueueSize > 0 ? true : undefined));
      process.kill(-child.pgid, 'SIGKILL');
      const err = await result;
      assert.equal((err as NodeJS.ErrnoException | undefined)?.code, 'EIO');
      assert.equal((await child.exit).signal, 'SIGKILL');
      assert.equal(child.resize(30, 100), false, 'a closed terminal is not resized');
    } finally {
      killGroup(child.pgid);
    }
  });
});

describe('terminal output', () => {
  test('output still in the terminal when node-pty destroys its socket after the exit (200 ms timer) is read, not lost', async () => {
    loadPty();
    // The leader exits at once; a background job (deaf to the SIGHUP of the leader's end: ignored
    // before the fork) keeps the terminal open and writes 100 ms later.
    const child = launchPty({ command: '/bin/sh', args: ['-c', 'trap "" HUP; (sleep 0.1; printf late-output; sleep 300) & exit 0'], env: { PATH: '/usr/bin:/bin' }, cwd: '/', rows: 24, cols: 80 });
    const chunks: Buffer[] = [];
    child.output.on('data', (d: Buffer) => chunks.push(d));
    try {
      // Let node-pty see the exit (its 200 ms destroy timer starts then), then keep the event loop
      // busy past the job's write and the timer, from the check phase: the next loop turn runs the
      // due timer before it polls the terminal, so the write is still in the kernel at the destroy.
      await until('the leader reaped', () => {
        try {
          process.kill(child.pid, 0);
          return undefined;
        } catch {
          return true;
        }
      });
      await new Promise((resolve) => setTimeout(resolve, 20));
      await new Promise((resolve) => setImmediate(resolve));
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 800);
      await child.outputEnded;
      assert.match(Buffer.concat(chunks).toString(), /late-output/);
      assert.equal((await child.exit).code, 0);
    } finally {
      killGroup(child.pgid);
    }
  });
});
