// 8. The files API. Throughput of a 1 GiB file read through GET …/fs/read_file (curl -o /dev/null
// as the client) vs `cat file > /dev/null`, and written through PUT …/fs/write_file (curl -T) vs
// `cp file dest`, each also vs the bare node:http server of fs-peer.ts doing the same over HTTP
// (the ceiling of a Node server on this machine); the time of GET …/fs/download_dir_zip of 2,000
// files (~27 MiB of text in 20 folders, curl -o out.zip) vs Info-ZIP `zip -qr out.zip .`. Same
// files, runs interleaved, the page cache warm; targets: ≥ 0.8× cat/cp throughput, ≤ 1.5× zip's time.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, openSync, rmSync, statSync, writeFileSync, writeSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { agentTempDir } from '../../test/kit/agent.js';
import { checkRunning } from '../../test/kit/cleanup.js';
import { startDaemon, startPeerServer, TEST_TOKEN, type Daemon } from '../daemon.js';
import { FILES, FOLDERS, QUICK, median, notInstalled, processCpuMs, progress, roundSpread, samples, skippedRow, textFiles, timed, which, type Bench, type Row } from '../lib.js';

const MiB = 1024 * 1024;
/** The big file (a smoke run, --quick, takes 64 MiB: its rows still say 1 GiB). */
const BIG = (QUICK ? 64 : 1024) * MiB;
const N = samples(3, 1);
const ZIP_N = samples(5);
const MB = 1e6;
const peerScript = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fs-peer.js');
/** The names of the rows. */
const ROW = {
  read: '12. read_file 1 GiB, MB/s (median)',
  readNode: '12. read_file 1 GiB vs bare node:http, MB/s',
  write: '12. write_file 1 GiB, MB/s (median)',
  writeNode: '12. write_file 1 GiB vs bare node:http, MB/s',
  zip: '12. download_dir_zip 2,000 files, p50',
};

/** Runs a command with stdout to /dev/null; rejects on a non-zero exit. */
function quiet(cmd: string, args: string[], cwd?: string): Promise<void> {
  checkRunning();
  const devnull = openSync('/dev/null', 'w');
  return new Promise<void>((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', devnull, 'pipe'], cwd });
    let err = '';
    child.stderr?.setEncoding('utf8').on('data', (c: string) => (err += c));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${cmd} exited ${code}: ${err.slice(0, 300)}`))));
  }).finally(() => closeSync(devnull));
}

function bigFile(file: string): void {
  const block = randomBytes(MiB);
  const fd = openSync(file, 'w');
  for (let i = 0; i < BIG / MiB; i++) writeSync(fd, block);
  closeSync(fd);
}

/** Writes the corpus under `dir`; returns its bytes. */
function tree(dir: string): number {
  let bytes = 0;
  for (const f of textFiles()) {
    mkdirSync(path.dirname(path.join(dir, f.name)), { recursive: true });
    writeFileSync(path.join(dir, f.name), f.data);
    bytes += f.data.length;
  }
  return bytes;
}

const api = (d: Daemon, route: string, p: string): string => `${d.url}/browsers/local/fs/${route}?path=${encodeURIComponent(p)}`;
const auth = ['-H', `Authorization: Bearer ${TEST_TOKEN}`];

export async function benchFs(): Promise<Row[]> {
  const curl = which('curl');
  const zip = which('zip');
  if (curl === null) return Object.values(ROW).map((n) => skippedRow(n, n === ROW.zip ? 'ms' : 'MB/s', 'cat / cp / node:http / zip -r', notInstalled('curl')));
  // The agent user's folder: the files API acts with its rights (docs/security.md).
  const dir = agentTempDir('browserd-bench-fs-');
  const d = await startDaemon();
  const peer = await startPeerServer([peerScript]);
  const bare = (route: string, p: string): string => `http://127.0.0.1:${peer.port}/${route}?path=${encodeURIComponent(p)}`;
  try {
    const src = path.join(dir, 'big.bin');
    bigFile(src);
    const oursOut = path.join(dir, 'ours.bin');
    const peerOut = path.join(dir, 'peer.bin');
    const reads = { ours: [] as number[], peer: [] as number[], node: [] as number[] };
    const writes = { ours: [] as number[], peer: [] as number[], node: [] as number[] };
    const mbs = (ms: number): number => BIG / MB / (ms / 1000);
    for (let i = 0; i <= N; i++) {
      const r1 = await timed(() => quiet(curl, ['-sS', '--fail', ...auth, '-o', '/dev/null', api(d, 'read_file', src)]));
      const r2 = await timed(() => quiet('cat', [src]));
      const r3 = await timed(() => quiet(curl, ['-sS', '--fail', '-o', '/dev/null', bare('read', src)]));
      for (const f of [oursOut, peerOut]) rmSync(f, { force: true });
      const w1 = await timed(() => quiet(curl, ['-sS', '--fail', ...auth, '-T', src, api(d, 'write_file', oursOut)]));
      const w2 = await timed(() => quiet('cp', [src, peerOut]));
      rmSync(peerOut, { force: true });
      const w3 = await timed(() => quiet(curl, ['-sS', '--fail', '-T', src, bare('write', peerOut)]));
      if (statSync(oursOut).size !== BIG || statSync(peerOut).size !== BIG) throw new Error('a write left a short file');
      if (i === 0) continue; // warm-up
      reads.ours.push(mbs(r1.ms));
      reads.peer.push(mbs(r2.ms));
      reads.node.push(mbs(r3.ms));
      writes.ours.push(mbs(w1.ms));
      writes.peer.push(mbs(w2.ms));
      writes.node.push(mbs(w3.ms));
    }
    rmSync(src, { force: true });
    rmSync(oursOut, { force: true });
    rmSync(peerOut, { force: true });
    progress(`fs: read ${median(reads.ours).toFixed(0)} vs cat ${median(reads.peer).toFixed(0)} vs node ${median(reads.node).toFixed(0)} MB/s; write ${median(writes.ours).toFixed(0)} vs cp ${median(writes.peer).toFixed(0)} vs node ${median(writes.node).toFixed(0)} MB/s`);
    const how = `page cache warm; N=${N} each, interleaved`;
    /** The range of the per-round ratios ours/theirs (the machine's load moves both sides of a round alike). */
    const spread = (ours: number[], theirs: number[]): string => {
      const r = ours.map((x, i) => x / (theirs[i] as number));
      return `per-round ratio ${Math.min(...r).toFixed(2)}–${Math.max(...r).toFixed(2)}×`;
    };
    const rows: Row[] = [
      { name: ROW.read, unit: 'MB/s', browserd: median(reads.ours), peer: median(reads.peer), peerName: '`cat file > /dev/null`', higherIsBetter: true, note: `curl -o /dev/null as the client; ${how}; target ≥ 0.8× the peer` },
      { name: ROW.readNode, unit: 'MB/s', browserd: median(reads.ours), peer: median(reads.node), peerName: 'bare node:http createReadStream().pipe(res) (fs-peer.ts)', higherIsBetter: true, note: `the same client; ${how}; ${spread(reads.ours, reads.node)}` },
      { name: ROW.write, unit: 'MB/s', browserd: median(writes.ours), peer: median(writes.peer), peerName: '`cp file dest`', higherIsBetter: true, note: `curl -T (PUT, streamed from disk) as the client; a new destination each run; ${how}; target ≥ 0.8× the peer` },
      { name: ROW.writeNode, unit: 'MB/s', browserd: median(writes.ours), peer: median(writes.node), peerName: 'bare node:http req.pipe(createWriteStream) + rename (fs-peer.ts)', higherIsBetter: true, note: `the same client; ${how}; ${spread(writes.ours, writes.node)}` },
    ];

    if (zip === null) return [...rows, skippedRow(ROW.zip, 'ms', 'Info-ZIP `zip -qr`', notInstalled('zip'))];
    const src2 = path.join(dir, 'tree');
    const bytes = tree(src2);
    const ours: number[] = [];
    const theirs: number[] = [];
    const zipCpu: number[] = [];
    for (let i = 0; i <= ZIP_N; i++) {
      const a = path.join(dir, `ours-${i}.zip`);
      const b = path.join(dir, `theirs-${i}.zip`);
      const c0 = processCpuMs(d.proc.pid as number);
      const z1 = await timed(() => quiet(curl, ['-sS', '--fail', ...auth, '-o', a, api(d, 'download_dir_zip', src2)]));
      const c1 = processCpuMs(d.proc.pid as number) - c0;
      const z2 = await timed(() => quiet(zip, ['-qr', b, '.'], src2));
      const sizes = `${(statSync(a).size / MiB).toFixed(1)} vs ${(statSync(b).size / MiB).toFixed(1)} MiB`;
      rmSync(a);
      rmSync(b);
      if (i === 0) {
        progress(`fs: archives ${sizes}`);
        continue;
      }
      ours.push(z1.ms);
      theirs.push(z2.ms);
      zipCpu.push(c1);
    }
    progress(`fs: download_dir_zip ${median(ours).toFixed(0)} ms, zip -qr ${median(theirs).toFixed(0)} ms`);
    rows.push({
      name: ROW.zip,
      unit: 'ms',
      browserd: median(ours),
      peer: median(theirs),
      peerName: 'Info-ZIP `zip -qr out.zip .` of the same folder',
      note: `${FILES} files in ${FOLDERS} folders, ${(bytes / MiB).toFixed(1)} MiB of base64 text; deflate level 6 both; curl -o out.zip as the client; N=${ZIP_N} each, interleaved; ${roundSpread(ours, theirs)}; the daemon's CPU per download p50 ${median(zipCpu).toFixed(0)} ms; target ≤ 1.2× (issue 43)`,
    });
    return rows;
  } finally {
    await peer.stop();
    await d.cleanup();
  }
}

export const fsBench: Bench = { name: 'fs', what: '12. files API: 1 GiB read/write vs cat/cp, download_dir_zip of 2,000 files vs zip -r', run: benchFs };
