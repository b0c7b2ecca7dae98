// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The tokens the daemon derives for a caller (the record's jwt, cdp_ws_url, browser_live_view_url;
// POST /browsers/{id}/tokens) never hold a scope the caller lacks and never outlive it: for keys of
// several scope sets, for a control-plane token that expires in 30 s, and for a chain of tokens
// each derived from the one before. The SDK's direct telemetry stream works with the record's token.
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import Kernel from '@onkernel/sdk';
import { SignJWT, decodeJwt } from 'jose';
import { expectError } from '../helpers/http.js';
import { tempDir } from '../kit/cleanup.js';
import { keysFile, startDaemon, type Daemon } from '../kit/daemon.js';

const cp = generateKeyPairSync('ed25519');
const jwksFile = path.join(tempDir('browserd-jwks-'), 'jwks.json');
writeFileSync(jwksFile, JSON.stringify({ keys: [{ ...(cp.publicKey.export({ format: 'jwk' }) as object), kid: 'cp' }] }));

const TTL = 600; // BROWSERD_JWT_TTL_SEC here
const ADMIN = 'admin-token-aaaaaaaaaaaaaaaaaa';
const KEYS: { id: string; token: string; scopes: string[]; project?: string }[] = [
  { id: 'admin', token: ADMIN, scopes: ['browser:read', 'browser:write', 'cdp', 'browser:fetch', 'telemetry:read', 'telemetry:write', 'live:view', 'live:control', 'processes:exec'] },
  { id: 'reader', token: 'reader-token-bbbbbbbbbbbbbbbbb', scopes: ['browser:read'] },
  { id: 'watcher', token: 'watcher-token-cccccccccccccccc', scopes: ['browser:read', 'telemetry:read', 'live:view'] },
  { id: 'project', token: 'project-token-dddddddddddddddd', scopes: ['browser:read', 'cdp', 'fs:read'], project: 'p1' },
];

let d: Daemon;
before(async () => {
  d = await startDaemon({ token: null, bearer: ADMIN, env: { BROWSERD_KEYS_FILE: keysFile(KEYS), BROWSERD_JWT_KEYS_FILE: jwksFile, BROWSERD_JWT_TTL_SEC: String(TTL), BROWSERD_PROJECT_ID: 'p1' } });
});
after(() => d.cleanup());

const now = (): number => Math.floor(Date.now() / 1000);
const auth = (t: string): RequestInit => ({ headers: { authorization: `Bearer ${t}` } });

interface Whoami {
  key_id: string;
  scopes: string[];
  project: string | null;
}
const whoami = async (t: string): Promise<Whoami> => (await (await fetch(`${d.url}/whoami?jwt=${t}`)).json()) as Whoami;

interface Record {
  jwt: string;
  cdp_ws_url: string;
  browser_live_view_url: string;
  base_url: string;
}
async function record(credential: string): Promise<Record> {
  const res = await d.fetch('/browsers/local', auth(credential));
  assert.equal(res.status, 200, await res.clone().text());
  return (await res.json()) as Record;
}

/** The record's one token, the same in its three places. */
function recordToken(r: Record): string {
  assert.equal(new URL(r.cdp_ws_url).searchParams.get('jwt'), r.jwt);
  assert.equal(new URL(r.browser_live_view_url).searchParams.get('jwt'), r.jwt);
  return r.jwt;
}

async function controlPlaneToken(scopes: string[], lifeSec: number): Promise<{ token: string; exp: number }> {
  const exp = now() + lifeSec;
  const token = await new SignJWT({ sub: 'local', aud: 'browserd', scope: scopes.join(' '), project: 'p1' }).setProtectedHeader({ alg: 'EdDSA', kid: 'cp' }).setIssuedAt().setExpirationTime(exp).sign(cp.privateKey);
  return { token, exp };
}

test("the record's token holds exactly its reader's scopes and project, and a key's lasts BROWSERD_JWT_TTL_SEC", async () => {
  for (const k of KEYS) {
    const before = now();
    const jwt = recordToken(await record(k.token));
    const me = await whoami(jwt);
    assert.equal(me.key_id, 'jwt:self');
    assert.deepEqual(me.scopes, [...k.scopes].sort(), `${k.id}: the token's scopes`);
    assert.equal(me.project, k.project ?? null);
    const exp = decodeJwt(jwt).exp as number;
    assert.ok(exp >= before + TTL && exp <= now() + TTL, `${k.id}: a key has no expiry, so the token lives BROWSERD_JWT_TTL_SEC (${exp - before} s)`);
  }
});

test('a session token that expires in 30 s reads the record: its token expires no later, with no scope more', async () => {
  const reader = await controlPlaneToken(['browser:read', 'telemetry:read'], 30);
  for (const via of ['header', 'query'] as const) {
    const res = via === 'header' ? await d.fetch('/browsers/local', auth(reader.token)) : await fetch(`${d.url}/browsers/local?jwt=${reader.token}`);
    assert.equal(res.status, 200);
    const jwt = recordToken((await res.json()) as Record);
    assert.ok((decodeJwt(jwt).exp as number) <= reader.exp, `via ${via}: the token outlives its reader by ${(decodeJwt(jwt).exp as number) - reader.exp} s`);
    assert.deepEqual((await whoami(jwt)).scopes, ['browser:read', 'telemetry:read']);
  }
});

test('a chain of tokens, each read with the one before: the scopes never grow and the expiry never moves later', async () => {
  const first = await controlPlaneToken(['browser:read', 'cdp', 'live:view'], 45);
  let token = first.token;
  let exp = first.exp;
  for (let i = 0; i < 4; i++) {
    const next = recordToken(await record(token));
    const nextExp = decodeJwt(next).exp as number;
    assert.ok(nextExp <= exp, `link ${i}: ${nextExp} after ${exp}`);
    assert.deepEqual((await whoami(next)).scopes, ['browser:read', 'cdp', 'live:view']);
    token = next;
    exp = nextExp;
  }
});

test('POST /browsers/{id}/tokens mints a narrower token: only scopes the caller holds, never past its expiry', async () => {
  const mint = (credential: string, body: unknown): Promise<Response> => d.fetch('/browsers/local/tokens', { method: 'POST', json: body, ...auth(credential) });
  // A view-only live link from the admin key.
  const res = await mint(ADMIN, { scopes: ['live:view'], ttl_sec: 120 });
  assert.equal(res.status, 201);
  const view = (await res.json()) as { jwt: string; scopes: string[]; project: string | null; expires_at: string };
  assert.deepEqual(view.scopes, ['live:view']);
  assert.equal(view.project, null);
  const exp = decodeJwt(view.jwt).exp as number;
  assert.equal(new Date(view.expires_at).getTime(), exp * 1000);
  assert.ok(exp <= now() + 120 && exp >= now() + 110);
  assert.deepEqual((await whoami(view.jwt)).scopes, ['live:view']);
  await expectError(await fetch(`${d.url}/browsers/local/process?jwt=${view.jwt}`), 403, 'forbidden');
  // The view-only token cannot mint itself a wider one, nor can a key ask for a scope it lacks.
  const wider = await expectError(await mint(view.jwt, { scopes: ['live:control'] }), 403, 'forbidden');
  assert.match(String(wider.message), /live:control/);
  await expectError(await mint(KEYS[1]?.token ?? '', { scopes: ['cdp'] }), 403, 'forbidden');
  // Bad bodies: an unknown scope, a life out of range, an unknown field.
  await expectError(await mint(ADMIN, { scopes: ['root'] }), 400, 'bad_request');
  await expectError(await mint(ADMIN, { ttl_sec: 0 }), 400, 'bad_request');
  await expectError(await mint(ADMIN, { ttl_sec: 1.5 }), 400, 'bad_request');
  await expectError(await mint(ADMIN, { scope: 'cdp' }), 400, 'bad_request');
  // A life longer than BROWSERD_JWT_TTL_SEC is cut to it; from a token of 30 s, to that token's exp.
  const long = (await (await mint(ADMIN, { ttl_sec: 86_400 })).json()) as { jwt: string; scopes: string[] };
  assert.ok((decodeJwt(long.jwt).exp as number) <= now() + TTL);
  assert.deepEqual(long.scopes, KEYS[0]?.scopes.slice().sort((a, b) => order(a) - order(b)));
  const short = await controlPlaneToken(['browser:read', 'live:view'], 30);
  const fromShort = (await (await mint(short.token, { ttl_sec: 3600 })).json()) as { jwt: string; scopes: string[]; project: string };
  assert.ok((decodeJwt(fromShort.jwt).exp as number) <= short.exp);
  assert.deepEqual(fromShort.scopes, ['browser:read', 'live:view']);
  assert.equal(fromShort.project, 'p1');
});

/** The order tokens list scopes in (the daemon's table): the scopes' order in the keys above is the same but for these. */
function order(scope: string): number {
  return ['browser:read', 'browser:write', 'processes:exec', 'cdp', 'browser:fetch', 'telemetry:read', 'telemetry:write', 'live:view', 'live:control'].indexOf(scope);
}

test("the SDK after retrieve: its direct telemetry/stream goes to base_url with the record's token and is served (was 403)", async () => {
  const seen: string[] = [];
  const recording = (async (input: Request | string | URL, init?: RequestInit) => {
    seen.push(input instanceof Request ? input.url : String(input));
    return fetch(input, init);
  }) as typeof fetch;
  const sdk = new Kernel({ apiKey: KEYS[2]?.token ?? '', baseURL: d.url, maxRetries: 0, fetch: recording });
  await sdk.browsers.retrieve('local');
  const ac = new AbortController();
  const stream = await sdk.browsers.telemetry.stream('local', {}, { signal: ac.signal });
  await d.fetch('/telemetry/events', { method: 'POST', json: { type: 'derived_token_check' } });
  let got = false;
  for await (const ev of stream) {
    if ((ev.event.type as string) === 'derived_token_check') {
      got = true;
      break;
    }
  }
  ac.abort();
  assert.ok(got);
  const direct = new URL(seen.at(-1) ?? '');
  assert.equal(direct.pathname, '/telemetry/stream', 'the SDK went direct');
  assert.ok(direct.searchParams.get('jwt'), 'with the record\'s token');
});
