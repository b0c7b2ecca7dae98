// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// Units of the live view: a slow viewer gets the newest frame, never a queue.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { NewestFrame, type FrameSocket } from '../../daemon/live/newest-frame.js';
import { until } from '../kit/wait.js';

/** A socket that completes writes only when the test says so. */
class SlowSocket implements FrameSocket {
  bufferedAmount = 0;
  open = true;
  readonly sent: string[] = [];
  private readonly dones: (() => void)[] = [];
  send(data: Buffer, done: () => void): void {
    this.sent.push(data.toString());
    this.dones.push(done);
  }
  /** Completes the oldest write. */
  drain(): void {
    (this.dones.shift() as () => void)();
  }
  get writing(): number {
    return this.dones.length;
  }
}

const f = (s: string): Buffer => Buffer.from(s);

test('one frame in flight; frames that come meanwhile replace each other; the newest goes once the write completes', () => {
  const socket = new SlowSocket();
  const slot = new NewestFrame(socket, 1024);
  slot.offer(f('1'));
  for (let i = 2; i <= 100; i++) slot.offer(f(String(i)));
  assert.deepEqual(socket.sent, ['1']);
  assert.equal(socket.writing, 1);
  socket.drain();
  assert.deepEqual(socket.sent, ['1', '100']);
  socket.drain();
  slot.offer(f('101'));
  assert.deepEqual(socket.sent, ['1', '100', '101']);
});

test('frames wait while the socket holds more than the high-water mark', () => {
  const socket = new SlowSocket();
  const slot = new NewestFrame(socket, 1024);
  socket.bufferedAmount = 4096;
  slot.offer(f('a'));
  slot.offer(f('b'));
  assert.deepEqual(socket.sent, []);
  socket.bufferedAmount = 0;
  slot.offer(f('c'));
  assert.deepEqual(socket.sent, ['c']);
  socket.drain();
  assert.deepEqual(socket.sent, ['c'], 'b was replaced by c, nothing else waits');
});

test('a frame held back by the high-water mark alone goes out once the socket drained, without a newer frame', async () => {
  const socket = new SlowSocket();
  const slot = new NewestFrame(socket, 1024);
  socket.bufferedAmount = 4096;
  slot.offer(f('a'));
  assert.deepEqual(socket.sent, []);
  socket.bufferedAmount = 0;
  await until('the held frame sent', () => socket.sent.length === 1);
  assert.deepEqual(socket.sent, ['a']);
});

test('a closed socket is sent nothing; clear() drops the waiting frame', () => {
  const socket = new SlowSocket();
  const slot = new NewestFrame(socket, 1024);
  slot.offer(f('1'));
  slot.offer(f('2'));
  slot.clear();
  socket.drain();
  assert.deepEqual(socket.sent, ['1']);
  socket.open = false;
  slot.offer(f('3'));
  assert.deepEqual(socket.sent, ['1']);
});
