// 8. Terminal keystrokes. One byte sent through the attach WebSocket of a process spawned with
// allocate_tty (`stty raw -echo; exec cat`, so the program itself echoes it) until it comes back
// through the same socket, vs the same program on a bare node-pty terminal in this process (write
// one byte, wait for the echo): what the daemon (HTTP upgrade, auth, WebSocket frames, the stdin
// queue, the replay buffer) adds to a keystroke on loopback. A second peer has the socket: a bare
// `ws` server in its own process (pty-peer.ts) with the same program on a node-pty terminal, reached
// by the same client code (what any daemon reached over a WebSocket pays at least).
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type * as NodePty from '@lydell/node-pty';
import WebSocket from 'ws';
import { checkRunning, onCleanup } from '../../test/kit/cleanup.js';
import { signalGroup } from '../../test/kit/procs.js';
import { TEST_TOKEN, startDaemon, startPeerServer } from '../daemon.js';
import { median, percentile, progress, type Bench, type Row } from '../lib.js';

const KEYS = 500;
const WARMUP = 50;
const PROGRAM = ['-c', 'stty raw -echo; echo READY; exec cat'];
const wsPeerScript = path.join(path.dirname(fileURLToPath(import.meta.url)), 'pty-peer.js');

/** A source of bytes and a way to send one: the round trip of each key until it is echoed. */
interface Echo {
  send(key: Buffer): void;
  onData(cb: (data: Buffer) => void): void;
}

async function roundTrips(echo: Echo, n: number): Promise<number[]> {
  let waiting: ((data: Buffer) => void) | null = null;
  echo.onData((data) => waiting?.(data));
  const out: number[] = [];
  for (let i = 0; i < n + WARMUP; i++) {
    const key = Buffer.from([97 + (i % 26)]);
    const t0 = process.hrtime.bigint();
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no echo within 5 s')), 5000);
      waiting = (data) => {
        if (!data.includes(key[0] as number)) return;
        clearTimeout(timer);
        waiting = null;
        resolve();
      };
      echo.send(key);
    });
    if (i >= WARMUP) out.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  return out;
}

/** The peer: node-pty in this process. */
async function bare(): Promise<number[]> {
  const pty = createRequire(import.meta.url)('@lydell/node-pty') as typeof NodePty;
  checkRunning();
  const term = pty.spawn('sh', PROGRAM, { cols: 80, rows: 24, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, encoding: null });
  const stop = (): void => signalGroup(term.pid, 'SIGKILL');
  const unregister = onCleanup(stop);
  try {
    let buf = '';
    const listeners: ((d: Buffer) => void)[] = [];
    term.onData((d) => {
      const data = Buffer.from(d as unknown as Buffer);
      buf += data.toString('latin1');
      for (const l of listeners) l(data);
    });
    await new Promise<void>((resolve) => {
      const check = setInterval(() => {
        if (buf.includes('READY')) {
          clearInterval(check);
          resolve();
        }
      }, 5);
    });
    return await roundTrips({ send: (k) => term.write(k.toString('latin1')), onData: (cb) => listeners.push(cb) }, KEYS);
  } finally {
    stop();
    unregister();
  }
}

/** The keystrokes through a WebSocket at `url` whose far end is the program on a terminal. */
async function overSocket(url: string, headers: Record<string, string>): Promise<number[]> {
    const ws = new WebSocket(url, { headers });
    ws.on('error', () => {});
    let buf = '';
    const listeners: ((d: Buffer) => void)[] = [];
    ws.on('message', (data: Buffer) => {
      buf += data.toString('latin1');
      for (const l of listeners) l(data);
    });
    await new Promise<void>((resolve, reject) => {
      ws.once('error', reject);
      const check = setInterval(() => {
        if (buf.includes('READY')) {
          clearInterval(check);
          resolve();
        }
      }, 5);
    });
    const times = await roundTrips({ send: (k) => ws.send(k), onData: (cb) => listeners.push(cb) }, KEYS);
    ws.terminate();
    return times;
}

/** browserd: spawn with allocate_tty, attach, the same keystrokes. */
async function attached(): Promise<number[]> {
  const d = await startDaemon();
  try {
    const { process_id } = await d.call<{ process_id: string }>('/browsers/local/process/spawn', {
      method: 'POST',
      json: { command: 'sh', args: PROGRAM, allocate_tty: true },
    });
    return await overSocket(`${d.url.replace(/^http/, 'ws')}/browsers/local/process/${process_id}/attach`, { authorization: `Bearer ${TEST_TOKEN}` });
  } finally {
    await d.cleanup();
  }
}

/** The socket peer: a bare ws server with node-pty in its own process. */
async function wsPeer(): Promise<number[]> {
  const peer = await startPeerServer([wsPeerScript, 'sh', ...PROGRAM]);
  try {
    return await overSocket(`ws://127.0.0.1:${peer.port}/`, {});
  } finally {
    await peer.stop();
  }
}

export async function benchPty(): Promise<Row[]> {
  const peer = await bare();
  const ours = await attached();
  const socket = await wsPeer();
  progress(`terminal keystroke: attach p50 ${median(ours).toFixed(3)} ms, bare node-pty p50 ${median(peer).toFixed(3)} ms, bare ws + node-pty p50 ${median(socket).toFixed(3)} ms`);
  const peerName = 'node-pty in the benchmark process: write one byte to the terminal, wait for the echo of the same program';
  const note = `${KEYS} keystrokes each after ${WARMUP} of warm-up; \`sh -c 'stty raw -echo; exec cat'\` echoes; browserd: through the attach WebSocket on loopback`;
  return [
    { name: '11. terminal keystroke round trip, p50', unit: 'ms', browserd: median(ours), peer: median(peer), peerName, note },
    { name: '11. terminal keystroke round trip, p99', unit: 'ms', browserd: percentile(ours, 99), peer: percentile(peer, 99), peerName, note },
    {
      name: '11. terminal keystroke vs a bare WebSocket terminal, p50',
      unit: 'ms',
      browserd: median(ours),
      peer: median(socket),
      peerName: 'a bare `ws` server in its own process (bench/cases/pty-peer.ts) with the same program on a node-pty terminal, the same client',
      note: `the same ${KEYS} keystrokes after ${WARMUP} of warm-up; p99 ${percentile(ours, 99).toFixed(2)} vs ${percentile(socket, 99).toFixed(2)} ms`,
    },
  ];
}

export const ptyBench: Bench = { name: 'pty', what: '11. terminal keystroke round trip through attach vs bare node-pty', run: benchPty };
