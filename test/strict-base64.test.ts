// The strict base64 decoder (core/strict-base64.ts) decides without re-encoding; this checks that
// it accepts exactly what re-encoding gives back, on every text of up to 4 characters of an
// alphabet that holds each kind of trouble (padding, base64url, whitespace, another character),
// and on random longer texts with one such character put somewhere.
import assert from 'node:assert/strict';
import { randomBytes, randomInt } from 'node:crypto';
import { test } from 'node:test';
import { decodeStrictBase64 } from '../daemon/core/strict-base64.js';

const canonical = (s: string): boolean => Buffer.from(s, 'base64').toString('base64') === s;
const accepts = (s: string): boolean => {
  try {
    decodeStrictBase64(s);
    return true;
  } catch {
    return false;
  }
};

test('strict base64: accepts exactly the texts that re-encoding gives back', () => {
  const alphabet = ['A', 'Q', 'R', 'g', '/', '+', '=', '-', '_', ' ', '*', 'é'];
  let texts = [''];
  for (let len = 1; len <= 4; len++) {
    texts = texts.flatMap((t) => alphabet.map((c) => t + c));
    for (const s of texts) assert.equal(accepts(s), canonical(s), JSON.stringify(s));
  }
  for (let i = 0; i < 2000; i++) {
    const good = randomBytes(randomInt(1, 200)).toString('base64');
    const at = randomInt(0, good.length);
    const bad = good.slice(0, at) + (alphabet[randomInt(0, alphabet.length)] as string) + good.slice(at + 1);
    assert.equal(accepts(good), true);
    assert.equal(accepts(bad), canonical(bad), JSON.stringify(bad));
  }
});
