// 20. JWT verification per request. The same cheap authenticated route (GET /whoami: auth, the
// access log line, a small JSON answer) hit with autocannon, 16 connections, three ways in
// alternated rounds: with a bearer key (`Authorization: Bearer`, a sha256 and a map look-up), with
// the daemon's own session token (`?jwt=`, EdDSA, the token of `cdp_ws_url` in GET /browsers/local)
// and with a control-plane token (`?jwt=`, ES256, its public key in BROWSERD_JWT_KEYS_FILE). The
// peer of both JWT rows is the bearer key: the difference is the verification. The per-request
// cost is derived from the throughputs (1/jwt − 1/bearer, on a daemon saturated by 16 connections).
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import autocannon from 'autocannon';
import { SignJWT, exportJWK, generateKeyPair } from 'jose';
import { tempDir } from '../../test/kit/cleanup.js';
import { startDaemon, TEST_TOKEN } from '../daemon.js';
import { median, progress, type Bench, type Row } from '../lib.js';

const CONNECTIONS = 16;
const ROUNDS = 3;
const DURATION_S = 3;
const WARMUP_S = 1;

type Mode = 'bearer' | 'self' | 'control';

async function load(url: string, headers: Record<string, string>, seconds: number): Promise<number> {
  const r = await autocannon({ url, connections: CONNECTIONS, duration: seconds, headers });
  if (r.non2xx > 0 || r.errors > 0 || r.timeouts > 0) throw new Error(`${url.slice(0, 60)}: ${r.non2xx} non-2xx, ${r.errors} errors, ${r.timeouts} timeouts`);
  return r.requests.average;
}

export async function benchJwt(): Promise<Row[]> {
  // A control plane's key pair: the daemon gets the public half as a JWKS.
  const dir = tempDir('browserd-bench-jwt-');
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'bench-cp', alg: 'ES256', use: 'sig' };
  const keysFile = path.join(dir, 'jwks.json');
  writeFileSync(keysFile, JSON.stringify({ keys: [jwk] }));
  const d = await startDaemon({ env: { BROWSERD_JWT_KEYS_FILE: keysFile } });
  try {
    const rec = (await d.call('/browsers/local')) as { cdp_ws_url: string };
    const selfJwt = new URL(rec.cdp_ws_url).searchParams.get('jwt');
    if (selfJwt === null) throw new Error(`no ?jwt= in cdp_ws_url ${rec.cdp_ws_url}`);
    const controlJwt = await new SignJWT({ scope: 'cdp browser:fetch', session_id: 'local' })
      .setProtectedHeader({ alg: 'ES256', kid: 'bench-cp' })
      .setAudience('browserd')
      .setSubject('local')
      .setIssuedAt()
      .setExpirationTime('1h')
      .sign(privateKey);
    const targets: Record<Mode, { url: string; headers: Record<string, string> }> = {
      bearer: { url: `${d.url}/whoami`, headers: { authorization: `Bearer ${TEST_TOKEN}` } },
      self: { url: `${d.url}/whoami?jwt=${selfJwt}`, headers: {} },
      control: { url: `${d.url}/whoami?jwt=${controlJwt}`, headers: {} },
    };
    // Each way answers 200 before anything is timed (a refused token would measure the refusal).
    for (const m of Object.keys(targets) as Mode[]) {
      const r = await fetch(targets[m].url, { headers: targets[m].headers });
      if (r.status !== 200) throw new Error(`${m}: /whoami answered ${r.status} ${await r.text()}`);
    }
    const rps: Record<Mode, number[]> = { bearer: [], self: [], control: [] };
    for (const m of Object.keys(targets) as Mode[]) await load(targets[m].url, targets[m].headers, WARMUP_S);
    for (let round = 0; round < ROUNDS; round++) {
      const order: Mode[] = round % 2 === 0 ? ['bearer', 'self', 'control'] : ['control', 'self', 'bearer'];
      for (const m of order) rps[m].push(await load(targets[m].url, targets[m].headers, DURATION_S));
      progress(`jwt round ${round + 1}/${ROUNDS}: bearer ${rps.bearer[round]?.toFixed(0)}, self ${rps.self[round]?.toFixed(0)}, control plane ${rps.control[round]?.toFixed(0)} req/s`);
    }
    const ratios = (m: Mode): string => {
      const r = rps[m].map((v, i) => v / (rps.bearer[i] as number));
      return `${Math.min(...r).toFixed(2)}–${Math.max(...r).toFixed(2)}×`;
    };
    const extraUs = (m: Mode): string => ((1 / median(rps[m]) - 1 / median(rps.bearer)) * 1e6).toFixed(0);
    const peerName = 'the same route with a bearer key (Authorization: Bearer)';
    const how = `GET /whoami, autocannon ${CONNECTIONS} connections, ${ROUNDS} alternated rounds of ${DURATION_S} s after ${WARMUP_S} s of warm-up each; median of the rounds' mean requests/s`;
    return [
      {
        name: "20. ?jwt= (the daemon's own, EdDSA) vs a bearer key",
        unit: 'req/s',
        browserd: median(rps.self),
        peer: median(rps.bearer),
        higherIsBetter: true,
        peerName,
        note: `${how} (per-round ratio ${ratios('self')}); ≈ ${extraUs('self')} µs of daemon time per request more than the key`,
      },
      {
        name: '20. ?jwt= (control plane, ES256) vs a bearer key',
        unit: 'req/s',
        browserd: median(rps.control),
        peer: median(rps.bearer),
        higherIsBetter: true,
        peerName,
        note: `the same rounds (per-round ratio ${ratios('control')}); ≈ ${extraUs('control')} µs per request more than the key`,
      },
    ];
  } finally {
    await d.cleanup();
  }
}

export const jwtBench: Bench = { name: 'jwt', what: '20. JWT verification per request vs a bearer key', run: benchJwt };
