// Unit tests of the strict base64 decoder and the replay buffer (the HTTP behaviour they give is
// tested through the daemon in the other processes-*.test.ts files).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { ReplayBuffer } from '../daemon/processes/replay-buffer.js';
import { Base64Error, base64Length, decodeStrictBase64, decodedLength } from '../daemon/processes/strict-base64.js';

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

  test('keeps both streams interleaved in arrival order with absolute offsets', () => {
    const b = new ReplayBuffer(1024);
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
    const b = new ReplayBuffer(10);
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
    const b = new ReplayBuffer(4);
    b.append('stdout', Buffer.from('abcdefgh'));
    const r = b.read(0);
    assert.equal(r.lost, 4);
    assert.equal(text(r.chunks), 'efgh');
    assert.equal(r.next, 8);
  });

  test('many small chunks: the count of bytes lost plus bytes read is every byte written', () => {
    const b = new ReplayBuffer(1000);
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

  test('wait resolves on new output, on finish and on abort; nothing is appended after finish', async () => {
    const b = new ReplayBuffer(100);
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
