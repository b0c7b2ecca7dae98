// 20. JWT verification per request. The same cheap authenticated route (GET /whoami: auth, the
// access log line, a small JSON answer) hit with autocannon, 16 connections, three ways in
// alternated rounds: with a bearer key (`Authorization: Bearer`, a sha256 and a map look-up), with
// the daemon's own session token (`?jwt=`, EdDSA, the token of `cdp_ws_url` in GET /browsers/local)
// and with a control-plane token (`?jwt=`, ES256, its public key in BROWSERD_JWT_KEYS_FILE). The
// peer of both JWT rows is the bearer key: the difference is the verification. The per-request
// cost is the daemon's CPU per request (user + system of its process over each load, per request)
// less the bearer key's: on a shared machine that moves less than the throughputs. The same token
// is sent on every request, so after its first use it is answered from the cache of verified
// tokens (jwt/verified-cache.ts), as a client's repeated requests are.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import autocannon from 'autocannon';
import { SignJWT, exportJWK, generateKeyPair } from 'jose';
import { tempDir } from '../../test/kit/cleanup.js';
import { startDaemon, TEST_TOKEN } from '../daemon.js';
import { median, processCpuMs, progress, type Bench, type Row } from '../lib.js';

const CONNECTIONS = 16;
const ROUNDS = 3;
const DURATION_S = 3;
const WARMUP_S = 1;

type Mode = 'bearer' | 'self' | 'control';

/** Mean requests/s, and the µs of CPU the daemon (`pid`) spent per request meanwhile. */
async function load(url: string, headers: Record<string, string>, seconds: number, pid: number): Promise<{ rps: number; cpuUs: number }> {
  const cpu0 = processCpuMs(pid);
  const r = await autocannon({ url, connections: CONNECTIONS, duration: seconds, headers });
  if (r.non2xx > 0 || r.errors > 0 || r.timeouts > 0) throw new Error(`${url.slice(0, 60)}: ${r.non2xx} non-2xx, ${r.errors} errors, ${r.timeouts} timeouts`);
  return { rps: r.requests.average, cpuUs: ((processCpuMs(pid) - cpu0) * 1000) / Math.max(1, r.requests.total) };
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
    const cpu: Record<Mode, number[]> = { bearer: [], self: [], control: [] };
    for (const m of Object.keys(targets) as Mode[]) await load(targets[m].url, targets[m].headers, WARMUP_S, d.pid);
    for (let round = 0; round < ROUNDS; round++) {
      const order: Mode[] = round % 2 === 0 ? ['bearer', 'self', 'control'] : ['control', 'self', 'bearer'];
      for (const m of order) {
        const r = await load(targets[m].url, targets[m].headers, DURATION_S, d.pid);
        rps[m].push(r.rps);
        cpu[m].push(r.cpuUs);
      }
      const at = (m: Mode): string => `${rps[m][round]?.toFixed(0)} req/s (${cpu[m][round]?.toFixed(0)} µs CPU/req)`;
      progress(`jwt round ${round + 1}/${ROUNDS}: bearer ${at('bearer')}, self ${at('self')}, control plane ${at('control')}`);
    }
    const ratios = (m: Mode): string => {
      const r = rps[m].map((v, i) => v / (rps.bearer[i] as number));
      return `${Math.min(...r).toFixed(2)}–${Math.max(...r).toFixed(2)}×`;
    };
    const extraUs = (m: Mode): string => {
      const d = median(cpu[m]) - median(cpu.bearer);
      return `${d >= 0 ? '+' : '−'}${Math.abs(d).toFixed(0)} µs`;
    };
    const cpuOf = (m: Mode): string => `${median(cpu[m]).toFixed(0)} µs (bearer ${median(cpu.bearer).toFixed(0)} µs)`;
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
        note: `${how} (per-round ratio ${ratios('self')}); the daemon's CPU per request ${cpuOf('self')}: ${extraUs('self')} against the key (the token answered from the cache of verified tokens after its first use)`,
      },
      {
        name: '20. ?jwt= (control plane, ES256) vs a bearer key',
        unit: 'req/s',
        browserd: median(rps.control),
        peer: median(rps.bearer),
        higherIsBetter: true,
        peerName,
        note: `the same rounds (per-round ratio ${ratios('control')}); the daemon's CPU per request ${cpuOf('control')}: ${extraUs('control')} against the key`,
      },
    ];
  } finally {
    await d.cleanup();
  }
}

export const jwtBench: Bench = { name: 'jwt', what: '20. JWT verification per request vs a bearer key', run: benchJwt };
