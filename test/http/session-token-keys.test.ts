// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// Units: the control plane's key file (BROWSERD_JWT_KEYS_FILE) as JWKS or PEM, and what it refuses;
// the log's token redaction.
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { redactTokens } from '../../daemon/core/log.js';
import { readPublicKeys, thumbprint } from '../../daemon/http/jwt/public-keys.js';
import { scratchDirs } from '../kit/cleanup.js';

const scratch = scratchDirs('browserd-jwt-keys-');
const write = (name: string, text: string): string => {
  const file = path.join(scratch(), name);
  writeFileSync(file, text);
  return file;
};

test('PEM: several public keys, each with its alg and its thumbprint as kid', () => {
  const ed = generateKeyPairSync('ed25519').publicKey;
  const es = generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).publicKey;
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey;
  const file = write('keys.pem', [ed, es, rsa].map((k) => k.export({ format: 'pem', type: 'spki' })).join('\n'));
  assert.deepEqual(readPublicKeys(file).map((k) => [k.alg, k.kid]), [['EdDSA', thumbprint(ed)], ['ES256', thumbprint(es)], ['RS256', thumbprint(rsa)]]);
});

test('refused, naming the entry: private keys, HMAC secrets, weak RSA, other curves, a wrong alg, garbage', () => {
  const ed = generateKeyPairSync('ed25519');
  const cases: [string, string, RegExp][] = [
    ['priv.pem', String(ed.privateKey.export({ format: 'pem', type: 'pkcs8' })), /PEM block 1 \(PRIVATE KEY\): a private key/],
    ['oct.json', JSON.stringify({ keys: [{ kty: 'oct', k: 'c2VjcmV0' }] }), /keys\.0: a symmetric \(oct\) key/],
    ['d.json', JSON.stringify({ keys: [ed.privateKey.export({ format: 'jwk' })] }), /keys\.0: a private key/],
    ['rsa1024.pem', String(generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ format: 'pem', type: 'spki' })), /RSA key of 1024 bits/],
    ['p384.pem', String(generateKeyPairSync('ec', { namedCurve: 'secp384r1' }).publicKey.export({ format: 'pem', type: 'spki' })), /secp384r1/],
    ['alg.json', JSON.stringify({ keys: [{ ...ed.publicKey.export({ format: 'jwk' }), alg: 'RS256' }] }), /alg RS256 does not fit the key/],
    ['garbage.txt', 'hello', /neither a JWKS \(JSON\) nor PEM/],
    ['notjwks.json', '{"a":1}', /not a JWKS/],
  ];
  for (const [name, text, why] of cases) assert.throws(() => readPublicKeys(write(name, text)), why, name);
});

test('redactTokens: a JWT anywhere, and the value of jwt= in a URL', () => {
  const jwt = 'eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJsb2NhbCJ9.c2lnbmF0dXJl';
  assert.equal(redactTokens(`{"url":"http://h/x?a=1&jwt=${jwt}&b=2"}`), '{"url":"http://h/x?a=1&jwt=[redacted]&b=2"}');
  assert.equal(redactTokens(`{"msg":"Bearer ${jwt}"}`), '{"msg":"Bearer [redacted]"}');
  assert.equal(redactTokens('{"url":"/x?jwt=opaque-value"}'), '{"url":"/x?jwt=[redacted]"}');
  assert.equal(redactTokens('{"msg":"nothing here"}'), '{"msg":"nothing here"}');
});
