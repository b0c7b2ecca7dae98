// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// Units: the cache of verified session tokens (jwt/verified-cache.ts) inside SessionTokens, on a
// clock the test moves: a token sent again is answered from it; past its exp (or before its nbf) a
// cached token is refused with the verification's own message; a reload of the keys drops every
// entry (and a verification begun before the reload is not cached after it); only the exact
// string verified is a hit; the cache is bounded. The HTTP side is in session-tokens.test.ts.
import assert from 'node:assert/strict';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { SignJWT, base64url, type JWTPayload } from 'jose';
import { createLogger } from '../../daemon/core/log.js';
import { CLOCK_TOLERANCE_SEC, SessionTokens } from '../../daemon/http/jwt/session-tokens.js';
import { VERIFIED_CACHE_MAX_TOKEN_CHARS, VerifiedTokenCache } from '../../daemon/http/jwt/verified-cache.js';
import { scratchDirs } from '../kit/cleanup.js';

const scratch = scratchDirs('browserd-jwt-cache-');
const cp = generateKeyPairSync('ed25519');
const other = generateKeyPairSync('ed25519');
const jwk = (key: KeyObject, kid: string): Record<string, unknown> => ({ ...(key.export({ format: 'jwk' }) as object), kid });

/** A SessionTokens for session `local` with the control-plane key `cp`, on a clock the test sets (seconds). */
function tokens(): { t: SessionTokens; clock: { sec: number }; checks: string[]; keysFile: string } {
  const dir = scratch();
  const keysFile = path.join(dir, 'jwks.json');
  writeFileSync(keysFile, JSON.stringify({ keys: [jwk(cp.publicKey, 'cp')] }));
  const clock = { sec: 2_000_000_000 };
  const checks: string[] = [];
  const t = SessionTokens.create(
    { sessionId: 'local', audience: 'browserd', keysFile, stateDir: dir, ttlSec: 3600, now: () => clock.sec * 1000, onCheck: (o) => checks.push(o) },
    createLogger('silent'),
  );
  return { t, clock, checks, keysFile };
}

const sign = (claims: JWTPayload, key: KeyObject = cp.privateKey, kid = 'cp'): Promise<string> => new SignJWT(claims).setProtectedHeader({ alg: 'EdDSA', kid }).sign(key);
const claims = (sec: number, extra: JWTPayload = {}): JWTPayload => ({ sub: 'local', aud: 'browserd', scope: 'browser:read', iat: sec, exp: sec + 60, ...extra });

async function refusal(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    assert.equal((err as { code?: string }).code, 'unauthorized');
    return (err as Error).message;
  }
  assert.fail('the token was accepted');
}

test('a token verified once is answered from the cache, with the same grant', async () => {
  const { t, clock, checks } = tokens();
  const token = await sign(claims(clock.sec, { project: 'p1' }));
  assert.equal(t.cached(token), undefined);
  const first = await t.verify(token);
  assert.equal(t.cachedCount, 1);
  assert.deepEqual(t.cached(token), first);
  assert.deepEqual(await t.verify(token), first);
  assert.deepEqual(first, { keyId: 'jwt:cp', scopes: ['browser:read'], project: 'p1', expiresAt: clock.sec + 60 });
  assert.deepEqual(checks, ['verified', 'cached', 'cached']);
});

test('a cached token past its exp is refused as expired, and one before its nbf as not yet valid', async () => {
  const { t, clock, checks } = tokens();
  const start = clock.sec;
  const token = await sign(claims(start));
  await t.verify(token);
  // Within the leeway it still holds, from the cache.
  clock.sec = start + 60 + CLOCK_TOLERANCE_SEC - 1;
  assert.notEqual(t.cached(token), undefined);
  clock.sec = start + 60 + CLOCK_TOLERANCE_SEC;
  assert.equal(t.cached(token), undefined);
  assert.equal(t.cachedCount, 0, 'the expired entry is dropped');
  assert.match(await refusal(t.verify(token)), /the session token expired at/);

  // nbf: valid from start + 30 (leeway 5 s); verified then; a clock set back before it refuses it.
  clock.sec = start + 30;
  const later = await sign(claims(start, { nbf: start + 30 }));
  await t.verify(later);
  assert.equal(t.cachedCount, 1);
  clock.sec = start + 30 - CLOCK_TOLERANCE_SEC;
  assert.notEqual(t.cached(later), undefined);
  clock.sec = start + 30 - CLOCK_TOLERANCE_SEC - 1;
  assert.equal(t.cached(later), undefined);
  assert.match(await refusal(t.verify(later)), /not valid before/);
  assert.deepEqual(checks, ['verified', 'cached', 'refused', 'verified', 'cached', 'refused']);
});

test('a reload of the keys drops every cached token; a verification begun before the reload is not cached', async () => {
  const { t, clock, keysFile } = tokens();
  const token = await sign(claims(clock.sec));
  await t.verify(token);
  assert.equal(t.cachedCount, 1);
  // The control plane rotates its key: `cp` now names another key.
  writeFileSync(keysFile, JSON.stringify({ keys: [jwk(other.publicKey, 'cp')] }));
  t.reload();
  assert.equal(t.cachedCount, 0);
  assert.equal(t.cached(token), undefined);
  assert.match(await refusal(t.verify(token)), /signature does not verify with the key cp/);

  // Back to the first key; a verification still in flight when the keys change again is not kept.
  writeFileSync(keysFile, JSON.stringify({ keys: [jwk(cp.publicKey, 'cp')] }));
  t.reload();
  const pending = t.verify(token);
  writeFileSync(keysFile, JSON.stringify({ keys: [jwk(other.publicKey, 'cp')] }));
  t.reload();
  await pending;
  assert.equal(t.cachedCount, 0, 'a verdict of the old keys is not cached after the reload');
  assert.match(await refusal(t.verify(token)), /signature does not verify/);
});

test('only the exact token string verified is a hit: another signature, another payload, a prefix or a longer string is verified (and refused)', async () => {
  const { t, clock } = tokens();
  const token = await sign(claims(clock.sec));
  await t.verify(token);
  const [h, p, s] = token.split('.') as [string, string, string];
  const otherSig = (await sign(claims(clock.sec), other.privateKey)).split('.')[2] as string;
  const widened = base64url.encode(JSON.stringify({ ...claims(clock.sec), scope: 'browser:read processes:exec processes:root' }));
  const otherSession = base64url.encode(JSON.stringify({ ...claims(clock.sec), sub: 'another-session' }));
  for (const [name, forged] of [
    ['the same claims with another signature', `${h}.${p}.${otherSig}`],
    ['more scopes under the cached signature', `${h}.${widened}.${s}`],
    ['another session under the cached signature', `${h}.${otherSession}.${s}`],
    ['a prefix of the token', token.slice(0, -1)],
    ['the token and one more character', `${token}A`],
  ] as const) {
    assert.equal(t.cached(forged), undefined, name);
    await refusal(t.verify(forged));
  }
  // A token for another session, signed by the right key, is refused too (and never cached).
  assert.match(await refusal(t.verify(await sign(claims(clock.sec, { sub: 'another-session' })))), /session "another-session"/);
  assert.equal(t.cachedCount, 1);
});

test('bounded: the oldest entry goes first; a token longer than the limit is never cached', () => {
  const c = new VerifiedTokenCache<number>(5, 3);
  for (let i = 0; i < 5; i++) c.set(`token-${i}`, { exp: 100, nbf: undefined }, i);
  assert.equal(c.size, 3);
  assert.deepEqual([0, 1, 2, 3, 4].map((i) => c.get(`token-${i}`, 50)), [undefined, undefined, 2, 3, 4]);
  c.set('x'.repeat(VERIFIED_CACHE_MAX_TOKEN_CHARS + 1), { exp: 100, nbf: undefined }, 9);
  assert.equal(c.size, 3);
  assert.equal(c.get('x'.repeat(VERIFIED_CACHE_MAX_TOKEN_CHARS + 1), 50), undefined);
});
