// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// Decoding stdin bodies: the strict base64 decoder (core/strict-base64.ts) decides without
// re-encoding, so it is checked to accept exactly what re-encoding gives back (every text of up to
// 4 characters of an alphabet with each kind of trouble, and random corruptions of longer ones);
// and the fast path of bodies with one big base64 field (http/body.ts, parseWithBigField) answers
// only what the general path (strict UTF-8, JSON.parse, strict base64) gives, else null.
import assert from 'node:assert/strict';
import { randomBytes, randomInt } from 'node:crypto';
import { describe, test } from 'node:test';
import { decodeStrictBase64 } from '../../daemon/core/strict-base64.js';
import { MIN_BYTES, parseWithBigField } from '../../daemon/http/body.js';

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

const utf8 = new TextDecoder('utf-8', { fatal: true });
const fast = (text: string | Buffer): ReturnType<typeof parseWithBigField> =>
  parseWithBigField(typeof text === 'string' ? Buffer.from(text, 'utf8') : text, 'data_b64', (b) => utf8.decode(b), 0);

const b64 = randomBytes(3000).toString('base64');

describe('parseWithBigField', () => {
  test('takes the bodies a client sends, with the same value as JSON.parse and the decoded bytes', () => {
    for (const body of [
      { data_b64: b64 },
      { data_b64: b64, close: true },
      { close: false, data_b64: b64 },
      { data_b64: '' },
      { data_b64: 'QQ==' },
      { data_b64: b64, other: 'é ☃', n: [1, { x: null }] },
    ]) {
      const text = JSON.stringify(body);
      const got = fast(text);
      assert.notEqual(got, null, text.slice(0, 80));
      assert.deepEqual(got?.value, JSON.parse(text));
      assert.deepEqual(got?.decoded, Buffer.from(body.data_b64, 'base64'));
    }
  });

  test('leaves to the general path what it cannot be sure of', () => {
    const cases = [
      '{"data_b64":"QQ"}', // not strict base64 (padding)
      '{"data_b64":"QR=="}', // not canonical
      '{"data_b64":"QQ==\\n"}', // an escape in the string
      '{"data_b64":"QQ== "}', // a space in the string
      '{"data_b64":"QQ==",}', // the rest is not JSON
      '["data_b64":"QQ=="]',
      '{"n":{"data_b64":"QQ=="}}', // not at the top level
      '{"n":{"data_b64":"QQ=="},"data_b64":""}', // the top-level one is another
      '{"data_b64":"QQ==","data_b64":"QUE="}', // repeated: JSON.parse keeps the last
      '{"data_b64":"QQ==","data\\u005fb64":""}', // the same key spelled with an escape
      '{"x\\"data_b64":"QQ==","data_b64":""}', // inside another key
      '{"data_b64":"QQ==","s":"data_b64"}', // the name twice
      '{"data_b64" : "QQ=="}', // not the compact form (JSON.stringify's): the general path reads it
      JSON.stringify({ data_b64: 'QQ==' }, null, 2),
      '{"data_b64":"QQ==',
      '',
    ];
    for (const text of cases) assert.equal(fast(text), null, text);
    // Bytes that are not UTF-8 outside the string: the general path reports them.
    const bad = Buffer.concat([Buffer.from('{"data_b64":"QQ==","x":"'), Buffer.from([0xff]), Buffer.from('"}')]);
    assert.equal(fast(bad), null);
  });

  test('leaves small bodies to the general path (the fast one saves nothing there)', () => {
    const small = Buffer.from(JSON.stringify({ data_b64: 'QQ==' }));
    assert.equal(parseWithBigField(small, 'data_b64', (b) => utf8.decode(b)), null);
    const big = Buffer.from(JSON.stringify({ data_b64: randomBytes(MIN_BYTES).toString('base64') }));
    assert.notEqual(parseWithBigField(big, 'data_b64', (b) => utf8.decode(b)), null);
  });
});
