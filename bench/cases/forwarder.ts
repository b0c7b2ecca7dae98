// 8. The browser's forwarding proxy: the daemon's forwarder with tinyproxy as the active proxy
// (client → forwarder → tinyproxy → origin) vs the same client straight at tinyproxy (client →
// tinyproxy → origin), both on loopback, interleaved. A 50 MB download (time and throughput, curl's
// own time_total: no process start) as plain http:// in absolute-form and through a CONNECT tunnel,
// and a small request's round trip (node:http, p50) both ways. The targets: ≤ 1.05× the
// time, ≥ 0.9× the throughput.
//
// The target must be no loopback name (the forwarder sends loopback targets straight to them, past
// the proxy): tinyproxy runs in a mount namespace of its own (unshare, as root) whose /etc/hosts
// says `bench.test` is 127.0.0.1; the host's /etc/hosts is not touched.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { PeerLookup } from '../../daemon/proxies/forwarder/peer.js';
import { startViaOrigin, type ViaOrigin } from '../../test/helpers/proxies/forwarder.js';
import { freePort, waitForPort } from '../../test/helpers/proxies/servers.js';
import { checkRunning, onCleanup, tempDir } from '../../test/kit/cleanup.js';
import { exitOf } from '../../test/kit/wait.js';
import { startDaemon, startPeerServer, type Daemon } from '../daemon.js';
import { median, notInstalled, percentile, progress, skippedRow, which, type Bench, type Row } from '../lib.js';

const MB50 = 50 * 1024 * 1024;
const DOWNLOADS = 9;
const SMALL = 300;
const TUNNELS = 100;
const PEER = 'straight to tinyproxy';
const relayScript = path.join(path.dirname(fileURLToPath(import.meta.url)), 'forwarder-peer.js');
const run = promisify(execFile);

/** tinyproxy on a free port, in its own mount namespace with `bench.test` → 127.0.0.1. */
export async function privateTinyproxy(originPort: number): Promise<{ port: number; close: () => Promise<void> }> {
  const dir = tempDir('browserd-bench-tinyproxy-');
  const port = await freePort();
  const hosts = path.join(dir, 'hosts');
  const conf = path.join(dir, 'tinyproxy.conf');
  writeFileSync(hosts, '127.0.0.1 localhost\n127.0.0.1 bench.test\n');
  writeFileSync(conf, [`Port ${port}`, 'Listen 127.0.0.1', 'Timeout 60', 'MaxClients 50', 'Allow 127.0.0.1', `ConnectPort ${originPort}`, 'DisableViaHeader Yes', 'LogLevel Warning', ''].join('\n'));
  checkRunning();
  const proc: ChildProcess = spawn('unshare', ['--mount', 'sh', '-c', `mount --bind '${hosts}' /etc/hosts && exec tinyproxy -d -c '${conf}'`], { stdio: 'ignore' });
  const close = async (): Promise<void> => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
    await exitOf(proc);
  };
  const unregister = onCleanup(close);
  await waitForPort(port, 20_000);
  return {
    port,
    close: async () => {
      unregister();
      await close();
    },
  };
}

/** curl's own time (ms) and speed (MB/s) for one 50 MB download through `proxy`. */
async function download(curl: string, proxy: number, url: string, tunnel: boolean): Promise<{ ms: number; mbps: number }> {
  const args = ['-sS', '-o', '/dev/null', '-w', '%{http_code} %{size_download} %{time_total}', ...(tunnel ? ['-p'] : []), '-x', `http://127.0.0.1:${proxy}`, url];
  const { stdout } = await run(curl, args, { timeout: 120_000 });
  const [code, size, total] = stdout.trim().split(' ');
  if (code !== '200' || Number(size) !== MB50) throw new Error(`curl: ${stdout}`);
  const ms = Number(total) * 1000;
  return { ms, mbps: MB50 / 1e6 / (ms / 1000) };
}

/**
 * One small absolute-form request through `proxy` on `agent`; its round trip in ms. A request on a
 * reused keep-alive socket that the proxy closed meanwhile (tinyproxy does) is sent again once, as
 * browsers do (node's documented pattern); the time of both attempts counts.
 */
function smallRequest(proxy: number, url: string, agent: http.Agent, t0 = performance.now(), retried = false): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: proxy, path: url, agent, headers: { host: new URL(url).host } }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve(performance.now() - t0) : reject(new Error(`status ${res.statusCode}`))));
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (!retried && req.reusedSocket && err.code === 'ECONNRESET') resolve(smallRequest(proxy, url, agent, t0, true));
      else reject(new Error(`small request through port ${proxy}: ${err.message}`));
    });
    req.end();
  });
}

/** A new CONNECT tunnel through `proxy`, one GET inside; the whole round trip in ms. */
function tunnelRequest(proxy: number, authority: string): Promise<number> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: proxy, method: 'CONNECT', path: authority, agent: false });
    req.on('error', reject);
    req.on('connect', (res, socket: net.Socket) => {
      if (res.statusCode !== 200) return reject(new Error(`CONNECT ${res.statusCode}`));
      const inner = http.request({ createConnection: () => socket, path: '/via', headers: { host: authority, connection: 'close' } }, (r) => {
        r.resume();
        r.on('end', () => resolve(performance.now() - t0));
      });
      inner.on('error', reject);
      inner.end();
    });
    req.end();
  });
}

const PEER_CHECKS = 300;

/**
 * The forwarder's peer-uid check alone, per new connection: sock_diag (the native module) vs the
 * /proc/net/tcp fallback, on live loopback connections of this process, interleaved, right after
 * the tunnel rows (their TIME_WAIT sockets still in the tables, as on a busy machine).
 */
async function peerCheckRow(): Promise<Row> {
  const byDiag = new PeerLookup();
  const byProc = new PeerLookup({ owners: null });
  const name = '8. peer-uid check of a new connection, p50';
  if (byDiag.method !== 'sock_diag') return skippedRow(name, 'ms', '/proc/net/tcp', `no sock_diag: ${byDiag.fallbackReason ?? ''}`);
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as net.AddressInfo).port;
  const diag: number[] = [];
  const proc: number[] = [];
  try {
    for (let i = 0; i < PEER_CHECKS; i++) {
      const accepted = new Promise<net.Socket>((r) => srv.once('connection', r));
      const client = net.connect(port, '127.0.0.1');
      const socket = await accepted;
      const order: [PeerLookup, number[]][] = i % 2 === 0 ? [[byDiag, diag], [byProc, proc]] : [[byProc, proc], [byDiag, diag]];
      for (const [lookup, out] of order) {
        const t0 = performance.now();
        const uid = await lookup.uidOf(socket, t0);
        out.push(performance.now() - t0);
        if (uid !== process.getuid?.()) throw new Error(`peer check: uid ${uid}`);
      }
      client.destroy();
      socket.destroy();
    }
  } finally {
    srv.close();
  }
  const tcp = readFileSync('/proc/net/tcp', 'latin1').split('\n').length - 2;
  return {
    name,
    unit: 'ms',
    browserd: median(diag),
    peer: median(proc),
    peerName: 'the /proc/net/tcp read it replaced (the fallback without the native module)',
    note: `N=${PEER_CHECKS} each on live loopback connections, interleaved; p95 ${percentile(diag, 95).toFixed(3)} vs ${percentile(proc, 95).toFixed(2)} ms; ${tcp} sockets in /proc/net/tcp at the end (the kernel walks its whole connection hash for that file however few)`,
  };
}

export async function benchForwarder(): Promise<Row[]> {
  const curl = which('curl');
  const name = '8. 50 MB download through the forwarder';
  if (which('tinyproxy') === null) return [skippedRow(name, 'ms', PEER, notInstalled('tinyproxy'))];
  if (curl === null) return [skippedRow(name, 'ms', PEER, notInstalled('curl'))];
  if (which('unshare') === null || process.getuid?.() !== 0) return [skippedRow(name, 'ms', PEER, 'needs root and unshare (tinyproxy in its own mount namespace)')];

  let origin: ViaOrigin | null = null;
  let tiny: { port: number; close: () => Promise<void> } | null = null;
  let d: Daemon | null = null;
  const agents: http.Agent[] = [];
  const close = async (): Promise<void> => {
    for (const a of agents) a.destroy();
    await tiny?.close();
    await origin?.close();
  };
  const unregister = onCleanup(close);
  try {
    origin = await startViaOrigin();
    tiny = await privateTinyproxy(origin.port);
    // forwarder-uid=0: the benchmark's own clients (root) stand in for Chromium (the agent user); the peer check runs all the same.
    d = await startDaemon({ env: { BROWSERD_TEST_HOOKS: 'forwarder-uid=0' } });
    const fp = Number((await d.waitLog((l) => l.event === 'forwarder_listening')).port);
    const { id } = await d.call<{ id: string }>('/proxies', { method: 'POST', json: { type: 'custom', protocol: 'http', config: { host: '127.0.0.1', port: tiny.port } } }, 201);
    await d.call('/browsers/local', { method: 'PATCH', json: { proxy_id: id } });
    const base = `http://bench.test:${origin.port}`;
    const big = `${base}/bytes/${MB50}`;

    const rows: Row[] = [];
    for (const tunnel of [false, true]) {
      const how = tunnel ? 'CONNECT tunnel' : 'http:// absolute-form';
      const b: { ms: number; mbps: number }[] = [];
      const p: { ms: number; mbps: number }[] = [];
      for (let i = 0; i <= DOWNLOADS; i++) {
        const viaForwarder = await download(curl, fp, big, tunnel);
        const straight = await download(curl, tiny.port, big, tunnel);
        if (i === 0) continue; // warm-up
        b.push(viaForwarder);
        p.push(straight);
      }
      const bMs = median(b.map((x) => x.ms));
      const pMs = median(p.map((x) => x.ms));
      progress(`forwarder ${how}: ${bMs.toFixed(0)} ms vs ${pMs.toFixed(0)} ms straight (${(bMs / pMs).toFixed(3)}×)`);
      const note = `N=${DOWNLOADS} each, interleaved, curl time_total; ratio ${(bMs / pMs).toFixed(3)}× (target ≤ 1.05×)`;
      rows.push({ name: `8. 50 MB, ${how}: time, p50`, unit: 'ms', browserd: bMs, peer: pMs, peerName: `curl -x ${PEER}`, note });
      const bT = median(b.map((x) => x.mbps));
      const pT = median(p.map((x) => x.mbps));
      rows.push({
        name: `8. 50 MB, ${how}: throughput, p50`,
        unit: 'MB/s',
        browserd: bT,
        peer: pT,
        peerName: `curl -x ${PEER}`,
        higherIsBetter: true,
        note: `the same downloads; ratio ${(bT / pT).toFixed(3)}× (target ≥ 0.9×)`,
      });
    }

    const fAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const tAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    agents.push(fAgent, tAgent);
    const fSmall: number[] = [];
    const tSmall: number[] = [];
    for (let i = 0; i < SMALL + 20; i++) {
      const f = await smallRequest(fp, `${base}/via`, fAgent);
      const t = await smallRequest(tiny.port, `${base}/via`, tAgent);
      if (i < 20) continue;
      fSmall.push(f);
      tSmall.push(t);
    }
    rows.push({
      name: '8. small http:// request round trip, p50',
      unit: 'ms',
      browserd: median(fSmall),
      peer: median(tSmall),
      peerName: `node:http keep-alive client ${PEER}`,
      note: `N=${SMALL} each, interleaved; p95 ${percentile(fSmall, 95).toFixed(2)} vs ${percentile(tSmall, 95).toFixed(2)} ms; the forwarder opens a new connection to the proxy per request`,
    });
    const fTun: number[] = [];
    const tTun: number[] = [];
    const hTun: number[] = [];
    const hand = await startPeerServer([relayScript, String(tiny.port)]);
    try {
      for (let i = 0; i < TUNNELS + 10; i++) {
        const f = await tunnelRequest(fp, `bench.test:${origin.port}`);
        const t = await tunnelRequest(tiny.port, `bench.test:${origin.port}`);
        const h = await tunnelRequest(hand.port, `bench.test:${origin.port}`);
        if (i < 10) continue;
        fTun.push(f);
        tTun.push(t);
        hTun.push(h);
      }
    } finally {
      await hand.stop();
    }
    const spread = (xs: number[]): string => `p25–p75 ${percentile(xs, 25).toFixed(2)}–${percentile(xs, 75).toFixed(2)} ms`;
    rows.push({
      name: '8. new CONNECT tunnel + small request, p50',
      unit: 'ms',
      browserd: median(fTun),
      peer: median(tTun),
      peerName: `node:http client ${PEER}`,
      note: `N=${TUNNELS} each, interleaved; ${spread(fTun)} vs ${spread(tTun)}; includes the peer-uid check per connection (sock_diag, or /proc/net/tcp without the native module)`,
    });
    rows.push({
      name: '8. new CONNECT tunnel: the forwarder vs a minimal Node relay, p50',
      unit: 'ms',
      browserd: median(fTun),
      peer: median(hTun),
      peerName: 'a bare Node relay in a process of its own in front of the same tinyproxy (forwarder-peer.ts: reads the CONNECT head, connects, pipes; no peer check, no parsing)',
      note: `the same interleaved rounds; relay ${spread(hTun)}; its ratio to tinyproxy alone ${(median(hTun) / median(tTun)).toFixed(2)}×: the floor of one more hop in Node on this machine`,
    });
    rows.push(await peerCheckRow());
    return rows;
  } finally {
    await d?.cleanup();
    await close();
    unregister();
  }
}

export const forwarderBench: Bench = { name: 'forwarder', what: "8. the browser's forwarding proxy → tinyproxy vs straight to tinyproxy", run: benchForwarder };
