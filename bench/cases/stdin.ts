// 4. stdin. Requests per second of 1 KiB writes with 16 connections (autocannon) to
// POST /browsers/local/process/{id}/stdin of a spawned `cat > /dev/null`, vs the bare node:http
// server of stdin-peer.ts (its own process, like the daemon) doing the same decode and pipe write.
// Throughput of 8 MiB writes (the default BROWSERD_STDIN_LIMIT_BYTES), one after another, vs the
// same bare server (and, in the note, `sh -c 'cat file | cat > /dev/null'` moving the same bytes
// through a pipe). Both sides are measured in alternation (rounds of each), so that the load of a
// shared machine falls on both alike; the note gives the range of the per-round ratios.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import autocannon from 'autocannon';
import { onCleanup, tempDir } from '../../test/kit/cleanup.js';
import { signalGroup } from '../../test/kit/procs.js';
import { startDaemon, startPeerServer, TEST_TOKEN, type Daemon } from '../daemon.js';
import { median, processCpuMs, progress, timed, type Bench, type Row } from '../lib.js';

const CONNECTIONS = 16;
const ROUNDS = 3;
const DURATION_S = 4;
const WARMUP_S = 2;
const SMALL = 1024;
const BIG = 8 * 1024 * 1024;
const BIG_N = 9;
const MB = 1e6;
const run = promisify(execFile);
const peerScript = path.join(path.dirname(fileURLToPath(import.meta.url)), 'stdin-peer.js');

interface Target {
  url: string;
  headers: Record<string, string>;
  /** The server's process. */
  pid: number;
}

/**
 * autocannon against `target` with this body: the mean requests per second (every answer must be
 * 2xx) and the µs of CPU its server process (`target.pid`) spent per request meanwhile.
 */
async function load(target: Target, body: string, seconds: number): Promise<{ rps: number; cpuUs: number }> {
  const cpu0 = processCpuMs(target.pid);
  const r = await autocannon({
    url: target.url,
    method: 'POST',
    connections: CONNECTIONS,
    duration: seconds,
    headers: { ...target.headers, 'content-type': 'application/json' },
    body,
  });
  if (r.non2xx > 0 || r.errors > 0 || r.timeouts > 0) throw new Error(`${target.url}: ${r.non2xx} non-2xx, ${r.errors} errors, ${r.timeouts} timeouts`);
  return { rps: r.requests.average, cpuUs: ((processCpuMs(target.pid) - cpu0) * 1000) / Math.max(1, r.requests.total) };
}

/** MB/s of `n` sequential writes of `bytes` decoded bytes (after one unmeasured write when `warm`). */
async function bigWrites(target: Target, body: string, bytes: number, n: number, warm: boolean): Promise<number[]> {
  const out: number[] = [];
  for (let i = warm ? 0 : 1; i <= n; i++) {
    const r = await timed(async () => {
      const res = await fetch(target.url, { method: 'POST', headers: { ...target.headers, 'content-type': 'application/json' }, body });
      const text = await res.text();
      if (res.status !== 200) throw new Error(`${target.url}: ${res.status} ${text.slice(0, 300)}`);
      return JSON.parse(text) as { written_bytes: number };
    });
    if (r.value.written_bytes !== bytes) throw new Error(`written_bytes ${r.value.written_bytes}, expected ${bytes}`);
    if (i > 0) out.push(bytes / MB / (r.ms / 1000));
  }
  return out;
}

async function startPeer(): Promise<{ target: Target; stop(): Promise<void> }> {
  const peer = await startPeerServer([peerScript]);
  return { target: { url: `http://127.0.0.1:${peer.port}/stdin`, headers: {}, pid: peer.pid }, stop: peer.stop };
}

async function spawnCat(d: Daemon): Promise<{ id: string; pid: number }> {
  const r = await d.call<{ process_id: string; pid: number }>('/browsers/local/process/spawn', {
    method: 'POST',
    json: { command: 'sh', args: ['-c', 'cat > /dev/null'] },
  });
  return { id: r.process_id, pid: r.pid };
}

/** `sh -c 'cat file | cat > /dev/null'`, spawn to exit, in MB/s. */
async function catPipe(file: string, bytes: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i <= BIG_N; i++) {
    const r = await timed(() => run('sh', ['-c', 'cat "$1" | cat > /dev/null', 'sh', file]));
    if (i > 0) out.push(bytes / MB / (r.ms / 1000));
  }
  return out;
}

const body = (bytes: number): string => JSON.stringify({ data_b64: randomBytes(bytes).toString('base64') });

export async function benchStdin(): Promise<Row[]> {
  const small = body(SMALL);
  const big = body(BIG);
  const dir = tempDir('browserd-bench-stdin-');
  const file = path.join(dir, 'big.bin');
  writeFileSync(file, randomBytes(BIG));
  readFileSync(file); // in the page cache

  const d = await startDaemon();
  const peer = await startPeer();
  let cat: { id: string; pid: number } | null = null;
  // The daemon ends its spawned groups when it stops; this is for a daemon that could not.
  const killCat = (): void => {
    if (cat !== null && readCmd(cat.pid).includes('cat')) signalGroup(cat.pid, 'SIGKILL');
  };
  const unregister = onCleanup(killCat);
  try {
    cat = await spawnCat(d);
    const ours: Target = { url: `${d.url}/browsers/local/process/${cat.id}/stdin`, headers: { authorization: `Bearer ${TEST_TOKEN}` }, pid: d.pid };

    await load(ours, small, WARMUP_S);
    await load(peer.target, small, WARMUP_S);
    const oursRpsAll: number[] = [];
    const peerRpsAll: number[] = [];
    const oursCpuAll: number[] = [];
    const peerCpuAll: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      // Alternate which side goes first, so neither always follows the other's load.
      const [a, b] = r % 2 === 0 ? [ours, peer.target] : [peer.target, ours];
      const ra = await load(a, small, DURATION_S);
      const rb = await load(b, small, DURATION_S);
      const [o, p] = a === ours ? [ra, rb] : [rb, ra];
      oursRpsAll.push(o.rps);
      peerRpsAll.push(p.rps);
      oursCpuAll.push(o.cpuUs);
      peerCpuAll.push(p.cpuUs);
      progress(`stdin 1 KiB round ${r + 1}/${ROUNDS}: browserd ${o.rps.toFixed(0)} req/s (${o.cpuUs.toFixed(0)} µs CPU/req), bare ${p.rps.toFixed(0)} req/s (${p.cpuUs.toFixed(0)} µs CPU/req)`);
    }
    const oursRps = median(oursRpsAll);
    const peerRps = median(peerRpsAll);

    const oursMBs: number[] = [];
    const peerMBs: number[] = [];
    const perRound = BIG_N / ROUNDS; // 3
    for (let r = 0; r < ROUNDS; r++) {
      oursMBs.push(...(await bigWrites(ours, big, BIG, Math.ceil(perRound), r === 0)));
      peerMBs.push(...(await bigWrites(peer.target, big, BIG, Math.ceil(perRound), r === 0)));
    }
    const catMBs = await catPipe(file, BIG);
    progress(`stdin 8 MiB: browserd ${median(oursMBs).toFixed(0)} MB/s, bare server ${median(peerMBs).toFixed(0)} MB/s, cat ${median(catMBs).toFixed(0)} MB/s`);
    const ratios = oursRpsAll.map((o, i) => o / (peerRpsAll[i] as number));
    return [
      {
        name: '4. stdin 1 KiB writes, 16 connections',
        unit: 'req/s',
        browserd: oursRps,
        peer: peerRps,
        higherIsBetter: true,
        peerName: 'a bare node:http server (own process) decoding the same base64 into the pipe of a child `cat > /dev/null`',
        note:
          `autocannon, ${CONNECTIONS} connections, ${ROUNDS} alternated rounds of ${DURATION_S} s each after ${WARMUP_S} s of warm-up; median of the rounds' ` +
          `mean requests/s (per-round ratio ${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}×); browserd with auth, validation and an access log line per request; ` +
          `CPU per request (user + system of the server's process, median of the rounds): browserd ${median(oursCpuAll).toFixed(0)} µs, bare ${median(peerCpuAll).toFixed(0)} µs (${(median(oursCpuAll) / median(peerCpuAll)).toFixed(1)}×)`,
      },
      {
        name: '4. stdin 8 MiB writes, p50',
        unit: 'MB/s',
        browserd: median(oursMBs),
        peer: median(peerMBs),
        higherIsBetter: true,
        peerName: 'the bare node:http server of the row above',
        note:
          `${oursMBs.length} sequential writes of 8 MiB decoded (11.2 MB of JSON) each side, in ${ROUNDS} alternated rounds; ` +
          `\`sh -c 'cat file | cat > /dev/null'\` moving the same bytes (spawn to exit): ${median(catMBs).toFixed(0)} MB/s`,
      },
    ];
  } finally {
    if (cat !== null) await d.fetch(`/browsers/local/process/${cat.id}/kill`, { method: 'POST', json: { signal: 'KILL' } }).catch(() => undefined);
    await peer.stop();
    await d.cleanup();
    killCat();
    unregister();
  }
}

function readCmd(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return '';
  }
}

export const stdinBench: Bench = { name: 'stdin', what: '4. stdin requests/s and MB/s vs a bare node:http server and cat', run: benchStdin };
