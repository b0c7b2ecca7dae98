// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// Session tokens (JWTs) through the real daemon: the control plane's keys (a JWKS of EdDSA, ES256
// and RS256 keys, re-read on SIGHUP), the daemon's own tokens (cdp_ws_url), both token sources
// (Authorization: Bearer and ?jwt=), each refusal 401 naming its fault, and no token in the log.
import assert from 'node:assert/strict';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { SignJWT, base64url, type JWTPayload } from 'jose';
import { expectError } from '../helpers/http.js';
import { tempDir } from '../kit/cleanup.js';
import { keysFile, startDaemon, type Daemon } from '../kit/daemon.js';

const ed = generateKeyPairSync('ed25519');
const es = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
const later = generateKeyPairSync('ed25519');
const stranger = generateKeyPairSync('ed25519');

const jwk = (key: KeyObject, kid: string): Record<string, unknown> => ({ ...(key.export({ format: 'jwk' }) as object), kid });
const jwksFile = path.join(tempDir('browserd-jwks-'), 'jwks.json');
const writeJwks = (extra: Record<string, unknown>[] = []): void =>
  writeFileSync(jwksFile, JSON.stringify({ keys: [jwk(ed.publicKey, 'cp-ed'), jwk(es.publicKey, 'cp-es'), jwk(rsa.publicKey, 'cp-rsa'), ...extra] }));
writeJwks();
const READER = 'reader-token-aaaaaaaaaaaaaaaa';
const ADMIN = 'admin-token-bbbbbbbbbbbbbbbbbb';
const keys = keysFile([
  { id: 'reader', token: READER, scopes: ['browser:read'] },
  { id: 'admin', token: ADMIN, scopes: ['browser:read', 'cdp', 'browser:fetch', 'proxies:read'] },
]);

let d: Daemon;
before(async () => {
  d = await startDaemon({ token: null, bearer: ADMIN, env: { BROWSERD_KEYS_FILE: keys, BROWSERD_JWT_KEYS_FILE: jwksFile } });
});
after(() => d.cleanup());

const now = (): number => Math.floor(Date.now() / 1000);
const good = (): JWTPayload => ({ sub: 'local', aud: 'browserd', scope: 'browser:read proxies:read', exp: now() + 300, iat: now() });

async function sign(claims: JWTPayload, key: KeyObject = ed.privateKey, header: { alg: string; kid?: string } = { alg: 'EdDSA', kid: 'cp-ed' }): Promise<string> {
  return new SignJWT(claims).setProtectedHeader(header).sign(key);
}

const issued: string[] = [];
async function token(claims: JWTPayload, key?: KeyObject, header?: { alg: string; kid?: string }): Promise<string> {
  const t = await sign(claims, key, header);
  issued.push(t);
  return t;
}

const whoami = (t: string, via: 'header' | 'query' = 'header'): Promise<Response> =>
  via === 'header' ? fetch(`${d.url}/whoami`, { headers: { authorization: `Bearer ${t}` } }) : fetch(`${d.url}/whoami?jwt=${t}`);

test('a control-plane token of each alg (EdDSA, ES256, RS256) is accepted, as Bearer and as ?jwt=, with its scopes', async () => {
  for (const [key, header] of [
    [ed.privateKey, { alg: 'EdDSA', kid: 'cp-ed' }],
    [es.privateKey, { alg: 'ES256', kid: 'cp-es' }],
    [rsa.privateKey, { alg: 'RS256', kid: 'cp-rsa' }],
  ] as const) {
    const t = await token({ ...good(), scope: 'browser:read proxies:read not:a-scope', project: 'p9' }, key, header);
    for (const via of ['header', 'query'] as const) {
      const res = await whoami(t, via);
      assert.equal(res.status, 200, `${header.alg} via ${via}: ${await res.clone().text()}`);
      assert.deepEqual(await res.json(), { key_id: `jwt:${header.kid}`, scopes: ['browser:read', 'proxies:read'], project: 'p9' });
    }
  }
  // Scopes apply: a token without `cdp` is 403 there; the query parameter is not a route's parameter.
  const t = await token(good());
  await expectError(await fetch(`${d.url}/browsers/local/cdp/json/version?jwt=${t}`), 403, 'forbidden');
  assert.equal((await fetch(`${d.url}/proxies?jwt=${t}`)).status, 200);
  assert.equal((await fetch(`${d.url}/browsers/local/process?jwt=${t}`)).status, 200);
});

test('each bad token is 401 and its message names the fault', async () => {
  const pem = ed.publicKey.export({ format: 'pem', type: 'spki' });
  const unsigned = `${base64url.encode(JSON.stringify({ alg: 'none', typ: 'JWT' }))}.${base64url.encode(JSON.stringify(good()))}.`;
  issued.push(unsigned);
  const hmac = await new SignJWT(good()).setProtectedHeader({ alg: 'HS256', kid: 'cp-ed' }).sign(new TextEncoder().encode(String(pem)));
  issued.push(hmac);
  const cases: [string, string, RegExp][] = [
    ['alg none', unsigned, /unsigned \(alg none\)/],
    // Signed with the public key's PEM as the HMAC secret (the classic key-confusion attack).
    ['HMAC with the public key', hmac, /HMAC \(HS256\)/],
    ['another session', await token({ ...good(), sub: 'other-session' }), /session "other-session", not this daemon's "local"/],
    ['another audience', await token({ ...good(), aud: 'someone-else' }), /audience "someone-else", not "browserd"/],
    ['expired', await token({ ...good(), exp: now() - 120, iat: now() - 600 }), /expired at \d{4}-/],
    ['not yet valid', await token({ ...good(), nbf: now() + 600 }), /not valid before \d{4}-/],
    ['no exp', await token({ sub: 'local', aud: 'browserd', scope: 'browser:read' }), /no exp/],
    ['bad signature', await token(good(), stranger.privateKey), /signature does not verify/],
    ['unknown kid', await token(good(), stranger.privateKey, { alg: 'EdDSA', kid: 'nobody' }), /no key has the kid "nobody"/],
    ['alg that does not fit the key', await token(good(), es.privateKey, { alg: 'ES256', kid: 'cp-ed' }), /verifies EdDSA, not ES256/],
    ['a header that is not JSON', 'eyJhbGci.eyJzdWIi.c2ln', /header is not base64url JSON/],
  ];
  for (const [name, t, why] of cases) {
    for (const via of ['header', 'query'] as const) {
      const res = await whoami(t, via);
      const body = await expectError(res, 401, 'unauthorized');
      assert.match(String(body.message), why, `${name} via ${via}: ${String(body.message)}`);
    }
  }
  await expectError(await fetch(`${d.url}/whoami?jwt=a&jwt=b`), 401, 'unauthorized');
});

test("the daemon's own token: in cdp_ws_url, the caller's scopes, short-lived; the key file is 0600", async () => {
  const b = (await d.call<{ cdp_ws_url: string; base_url: string; session_id: string }>('/browsers/local'));
  assert.equal(b.base_url, d.url);
  assert.equal(b.session_id, 'local');
  const url = new URL(b.cdp_ws_url);
  assert.equal(`${url.origin}${url.pathname}`, `${d.url.replace('http', 'ws')}/browsers/local/cdp`);
  const jwt = url.searchParams.get('jwt') ?? '';
  issued.push(jwt);
  const claims = JSON.parse(Buffer.from(jwt.split('.')[1] ?? '', 'base64url').toString()) as JWTPayload;
  assert.equal(claims.sub, 'local');
  assert.equal(claims.aud, 'browserd');
  assert.equal(claims.scope, 'browser:read proxies:read cdp browser:fetch');
  assert.ok((claims.exp as number) - now() <= 3600 && (claims.exp as number) > now());
  assert.deepEqual(await (await whoami(jwt, 'query')).json(), { key_id: 'jwt:self', scopes: ['browser:fetch', 'browser:read', 'cdp', 'proxies:read'], project: null });
  // Never more than the caller holds: a reader's token has only its scope.
  const asReader = await d.call<{ cdp_ws_url: string }>('/browsers/local', { headers: { authorization: `Bearer ${READER}` } });
  const readerJwt = new URL(asReader.cdp_ws_url).searchParams.get('jwt') ?? '';
  issued.push(readerJwt);
  assert.deepEqual(await (await whoami(readerJwt)).json(), { key_id: 'jwt:self', scopes: ['browser:read'], project: null });
  assert.equal(statSync(path.join(d.stateDir, 'jwt-signing-key.pem')).mode & 0o777, 0o600);
});

test('SIGHUP re-reads the keys file: a new kid is accepted after it', async () => {
  const t = await token(good(), later.privateKey, { alg: 'EdDSA', kid: 'cp-later' });
  await expectError(await whoami(t), 401, 'unauthorized');
  writeJwks([jwk(later.publicKey, 'cp-later')]);
  const seen = d.logs.length;
  d.proc.kill('SIGHUP');
  await d.waitLog((l) => l.event === 'jwt_keys_reload' && d.logs.indexOf(l) >= seen);
  assert.equal((await whoami(t)).status, 200);
});

/** The count of browserd_session_token_checks_total{outcome} in /metrics (0 when absent). */
async function checks(outcome: 'cached' | 'verified' | 'refused'): Promise<number> {
  const text = await (await d.fetch('/metrics')).text();
  const m = new RegExp(`^browserd_session_token_checks_total\\{outcome="${outcome}"\\} (\\d+)$`, 'm').exec(text);
  return m === null ? 0 : Number(m[1]);
}

test('a token sent again is answered from the cache of verified tokens, until a SIGHUP changes the keys', async () => {
  const first = generateKeyPairSync('ed25519');
  const second = generateKeyPairSync('ed25519');
  const reload = async (): Promise<void> => {
    const seen = d.logs.length;
    d.proc.kill('SIGHUP');
    await d.waitLog((l) => l.event === 'jwt_keys_reload' && d.logs.indexOf(l) >= seen);
  };
  writeJwks([jwk(first.publicKey, 'cp-rot')]);
  await reload();
  const t = await token(good(), first.privateKey, { alg: 'EdDSA', kid: 'cp-rot' });
  const [cached, verified] = [await checks('cached'), await checks('verified')];
  for (const via of ['query', 'header', 'query'] as const) {
    const res = await whoami(t, via);
    assert.equal(res.status, 200, await res.clone().text());
    assert.deepEqual(await res.json(), { key_id: 'jwt:cp-rot', scopes: ['browser:read', 'proxies:read'], project: null });
  }
  assert.equal(await checks('verified'), verified + 1, 'verified once');
  assert.equal(await checks('cached'), cached + 2, 'then answered from the cache');
  // The control plane rotates the key behind the kid: the cached verdict goes with the old key.
  writeJwks([jwk(second.publicKey, 'cp-rot')]);
  await reload();
  const body = await expectError(await whoami(t, 'query'), 401, 'unauthorized');
  assert.match(String(body.message), /signature does not verify with the key cp-rot/);
});

test('no session token appears in the log', async () => {
  // A request whose URL carries a token on a route that logs its failure, and one that is refused.
  const t = await token(good());
  await fetch(`${d.url}/no/such/route?jwt=${t}`);
  await fetch(`${d.url}/browsers/local?jwt=${t}&unknown=1`);
  await d.fetch('/healthz');
  const text = d.logs.map((l) => JSON.stringify(l)).join('\n');
  for (const tok of issued) {
    if (tok === '') continue;
    assert.ok(!text.includes(tok), 'a token is in the log');
    assert.ok(!text.includes(tok.split('.')[2] ?? '') || (tok.split('.')[2] ?? '') === '', 'a token signature is in the log');
  }
});

test('a keys file with a private key stops the start: exit 2, the setting named', async () => {
  const bad = path.join(tempDir('browserd-jwks-bad-'), 'keys.pem');
  writeFileSync(bad, ed.privateKey.export({ format: 'pem', type: 'pkcs8' }));
  const b = await startDaemon({ waitListening: false, env: { BROWSERD_JWT_KEYS_FILE: bad } });
  try {
    assert.deepEqual(await b.waitExit(), { code: 2, signal: null });
    const line = await b.waitLog((l) => l.event === 'bad_setting');
    assert.equal(line.setting, 'BROWSERD_JWT_KEYS_FILE');
    assert.match(String(line.msg), /a private key/);
  } finally {
    await b.cleanup();
  }
});
