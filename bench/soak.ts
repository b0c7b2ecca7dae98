// `node dist/bench/soak.js [minutes] [--rate N] [--heap-snapshots] [--env NAME=value]…` (default 20 minutes): the
// daemon under mixed load for that long (issue 38: "memory grows under mixed load"): four clients loop
// over a mix of requests (browser state, exec, file write and read, screenshot, /curl through the
// daemon, telemetry pages, a short telemetry and log stream, /metrics, refused requests), against a
// local origin. The daemon runs as the shipped unit runs it (systemd/browserd.service: its `Environment=`
// lines, and its node flags as NODE_OPTIONS), then any `--env` given here (`--env NAME=` unsets one).
// Every 30 s it samples the daemon's memory and prints one JSON line per sample:
//   rss_mib, anon_mib, file_mib   /proc/<pid>/smaps_rollup: resident, of which anonymous (heap, malloc,
//                                 stacks) and file-backed (node's binary, libraries)
//   heap_used_mib, heap_total_mib V8's heap, used and reserved; external_mib: memory V8 objects hold
//                                 outside it (Buffers, ArrayBuffers), from the daemon's own /metrics
//   brk_mib                       of anon_mib, the brk heap (/proc/<pid>/smaps `[heap]`): glibc malloc's
//                                 main arena, where the main thread's small allocations live
//   threads                       the daemon's threads (glibc gives each a malloc arena as needed)
// then a summary: whether the last third's median is within 10% of the second third's (a plateau).
// --rate N: at most N requests a second in all (steady, as fast as the machine allows without it): RSS
// follows the busiest load seen so far (glibc and V8 keep memory for reuse: bench/ANALYSIS.md), so a
// plateau is judged at a constant rate.
// --heap-snapshots: the daemon also runs with --heapsnapshot-signal=SIGUSR2; one snapshot after
// warm-up (a quarter of the run) and one at the end, and the summary lists the top growers by
// constructor between them (writing a snapshot costs the daemon RSS of its own: that sample shows it).
// Not part of `npm run bench` (it takes 20 minutes); the numbers of a run are in bench/ANALYSIS.md.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { interrupt, onCleanup, runCleanups } from '../test/kit/cleanup.js';
import { repoRoot } from '../test/kit/daemon.js';
import { startDaemon, type Daemon } from './daemon.js';
import { groupsOf, growers, totalOf } from './heap-snapshot.js';

const MiB = 1024 * 1024;
const SAMPLE_MS = 30_000;
const CLIENTS = 4;

interface Sample {
  t_s: number;
  requests: number;
  rss_mib: number;
  anon_mib: number;
  file_mib: number;
  brk_mib: number;
  heap_used_mib: number;
  heap_total_mib: number;
  external_mib: number;
  threads: number;
}

const mib = (bytes: number): number => Math.round((bytes / MiB) * 10) / 10;

/** The daemon's gauges from its own /metrics (prom-client's default metrics), in bytes. */
async function gauges(d: Daemon): Promise<{ heapUsed: number; heapTotal: number; external: number }> {
  const text = await (await d.fetch('/metrics')).text();
  const gauge = (name: string): number => {
    const m = new RegExp(`^browserd_${name} (\\d+(?:\\.\\d+)?(?:e\\+\\d+)?)$`, 'm').exec(text);
    return m === null ? NaN : Number(m[1]);
  };
  return { heapUsed: gauge('nodejs_heap_size_used_bytes'), heapTotal: gauge('nodejs_heap_size_total_bytes'), external: gauge('nodejs_external_memory_bytes') };
}

/**
 * Resident bytes of a process from /proc/<pid>/smaps_rollup (kB lines): all, anonymous, and of the
 * `[heap]` mapping (the brk heap: glibc malloc's main arena) from /proc/<pid>/smaps; its thread count.
 */
function residentOf(pid: number): { rss: number; anon: number; brk: number; threads: number } {
  const kb = (text: string, field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN) * 1024;
  const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  const smaps = readFileSync(`/proc/${pid}/smaps`, 'utf8');
  const at = smaps.indexOf(' [heap]\n');
  const brk = at < 0 ? 0 : kb(smaps.slice(at), 'Rss');
  const threads = Number(/^Threads:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN);
  return { rss: kb(rollup, 'Rss'), anon: kb(rollup, 'Anonymous'), brk, threads };
}

/**
 * What the shipped unit gives the daemon (systemd/browserd.service): its `Environment=NAME=value` lines
 * (unquoted words only; the unit keeps them so), and the node flags of its ExecStart (between
 * `bin/node` and the script) as NODE_OPTIONS.
 */
function unitEnvironment(): Record<string, string> {
  const unit = readFileSync(path.join(repoRoot, 'systemd', 'browserd.service'), 'utf8');
  const out: Record<string, string> = {};
  for (const m of unit.matchAll(/^Environment=(.*)$/gm)) {
    for (const word of (m[1] as string).split(/\s+/)) {
      const eq = word.indexOf('=');
      if (eq > 0) out[word.slice(0, eq)] = word.slice(eq + 1);
    }
  }
  const argv = /^ExecStart=(.*)$/m.exec(unit)?.[1]?.split(/\s+/) ?? [];
  const node = argv.findIndex((w) => w.endsWith('/bin/node'));
  const flags = node < 0 ? [] : argv.slice(node + 1).filter((w) => w.startsWith('--'));
  if (flags.length > 0) out.NODE_OPTIONS = flags.join(' ');
  return out;
}

function parseArgs(argv: string[]): { minutes: number; rate: number | null; snapshots: boolean; env: Record<string, string | undefined> } {
  let minutes = 20;
  let rate: number | null = null;
  let snapshots = false;
  const env: Record<string, string | undefined> = unitEnvironment();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--heap-snapshots') snapshots = true;
    else if (a === '--rate') {
      rate = Number(argv[++i]);
      if (!(rate > 0)) throw new Error(`--rate N (requests a second, above 0), got ${argv[i]}`);
    } else if (a === '--env') {
      const kv = argv[++i] ?? '';
      const eq = kv.indexOf('=');
      if (eq <= 0) throw new Error(`--env NAME=value, got ${kv}`);
      env[kv.slice(0, eq)] = kv.slice(eq + 1) === '' ? undefined : kv.slice(eq + 1);
    } else if (/^\d+(\.\d+)?$/.test(a)) minutes = Number(a);
    else throw new Error(`unknown argument ${a}: [minutes] [--rate N] [--heap-snapshots] [--env NAME=value]…`);
  }
  return { minutes, rate, snapshots, env };
}

async function drain(res: Response): Promise<void> {
  await res.arrayBuffer().catch(() => undefined);
}

/** One short stream: open it, read its first chunk, let go. */
async function shortStream(d: Daemon, path: string): Promise<void> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), 500);
  try {
    const res = await d.fetch(path, { signal: ac.signal });
    const reader = res.body?.getReader();
    await reader?.read().catch(() => undefined);
    ac.abort();
  } catch {
    // aborted: the point
  } finally {
    clearTimeout(timer);
  }
}

/** Writes a heap snapshot of the daemon (SIGUSR2, --heapsnapshot-signal) into `dir` and returns its path. */
async function heapSnapshot(d: Daemon, dir: string): Promise<string> {
  const before = new Set(readdirSync(dir));
  process.kill(d.pid, 'SIGUSR2');
  // The snapshot is written on the daemon's main thread: once /metrics answers again, the file is whole.
  for (;;) {
    // A connection kept alive across the pause may be reset: ask again.
    await d
      .fetch('/metrics')
      .then(async (res) => res.arrayBuffer())
      .catch(() => undefined);
    const made = readdirSync(dir).filter((f) => f.endsWith('.heapsnapshot') && !before.has(f));
    if (made[0] !== undefined) return path.join(dir, made[0]);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

async function main(): Promise<number> {
  const { minutes, rate, snapshots, env } = parseArgs(process.argv.slice(2));
  const origin = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html', 'set-cookie': 'a=b' }).end(`<title>${req.url}</title><p>${'x'.repeat(4096)}</p>`);
  });
  await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
  const site = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
  const snapDir = mkdtempSync(path.join(os.tmpdir(), 'browserd-soak-snap-'));
  onCleanup(() => rmSync(snapDir, { recursive: true, force: true }));
  if (snapshots) env.NODE_OPTIONS = [env.NODE_OPTIONS, '--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${snapDir}`].filter(Boolean).join(' ');
  process.stdout.write(`${JSON.stringify({ daemon_env: env, cpus: os.cpus().length, loadavg: os.loadavg() })}\n`);
  const d = await startDaemon({ autostart: true, env });
  let requests = 0;
  let failures = 0;
  const steps: ((i: number) => Promise<void>)[] = [
    async () => drain(await d.fetch('/browsers/local')),
    async () => drain(await d.fetch('/browsers/local/process/exec', { method: 'POST', json: { command: 'echo', args: ['soak'] } })),
    async (i) => {
      const file = `/tmp/browserd-soak-${i % 8}.txt`;
      await drain(await d.fetch(`/browsers/local/fs/write_file?path=${encodeURIComponent(file)}`, { method: 'PUT', body: 'y'.repeat(16 * 1024), headers: { 'content-type': 'application/octet-stream' } }));
      await drain(await d.fetch(`/browsers/local/fs/read_file?path=${encodeURIComponent(file)}`));
    },
    async () => drain(await d.fetch('/browsers/local/computer/screenshot', { method: 'POST' })),
    async (i) => drain(await d.fetch('/curl', { method: 'POST', json: { url: `${site}/page-${i}?token=secret-${i}` } })),
    async () => drain(await d.fetch('/browsers/local/telemetry/events?limit=100')),
    async () => shortStream(d, '/browsers/local/telemetry/stream'),
    async () => shortStream(d, '/browsers/local/logs/stream?source=daemon'),
    async () => drain(await d.fetch('/metrics')),
    async () => drain(await d.fetch('/browsers/local/process/exec', { method: 'POST', json: { command: 'true', bogus: 1 } })), // 400
    async () => drain(await d.fetch('/browsers/nope/fs/list_files?path=/tmp')), // 404
  ];
  const t0 = Date.now();
  const end = t0 + minutes * 60_000;
  /** With --rate: the clients take turns at a steady pace (the n-th request not before t0 + n / rate). */
  let turn = 0;
  const pace = async (): Promise<void> => {
    if (rate === null) return;
    const wait = t0 + (turn++ * 1000) / rate - Date.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  };
  const client = async (c: number): Promise<void> => {
    for (let i = c; Date.now() < end; i += CLIENTS) {
      await pace();
      try {
        await (steps[i % steps.length] as (i: number) => Promise<void>)(i);
      } catch {
        failures++;
      }
      requests++;
    }
  };
  const samples: Sample[] = [];
  const sample = async (): Promise<void> => {
    const g = await gauges(d);
    const r = residentOf(d.pid);
    const s: Sample = {
      t_s: Math.round((Date.now() - t0) / 1000),
      requests,
      rss_mib: mib(r.rss),
      anon_mib: mib(r.anon),
      file_mib: mib(r.rss - r.anon),
      brk_mib: mib(r.brk),
      heap_used_mib: mib(g.heapUsed),
      heap_total_mib: mib(g.heapTotal),
      external_mib: mib(g.external),
      threads: r.threads,
    };
    samples.push(s);
    process.stdout.write(`${JSON.stringify(s)}\n`);
  };
  await sample();
  const sampler = setInterval(() => void sample().catch(() => undefined), SAMPLE_MS);
  let firstSnapshot: Promise<string> | undefined;
  const warmup = snapshots
    ? setTimeout(() => {
        firstSnapshot = heapSnapshot(d, snapDir);
      }, (minutes * 60_000) / 4)
    : undefined;
  await Promise.all(Array.from({ length: CLIENTS }, (_, c) => client(c)));
  clearInterval(sampler);
  clearTimeout(warmup);
  await sample();
  let heap: object | undefined;
  if (firstSnapshot !== undefined) {
    const before = groupsOf(await firstSnapshot);
    const after = groupsOf(await heapSnapshot(d, snapDir));
    const fmt = (g: { count: number; bytes: number }): string => `${g.count} / ${Math.round(g.bytes / 1024)} KiB`;
    heap = {
      before: fmt(totalOf(before)),
      after: fmt(totalOf(after)),
      top_growers: growers(before, after, 15).map((x) => ({ [x.key]: `${fmt(x.before)} -> ${fmt(x.after)}` })),
    };
  }
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
  const third = Math.max(1, Math.floor(samples.length / 3));
  const mid = samples.slice(third, 2 * third);
  const last = samples.slice(2 * third);
  const stat = (pick: (s: Sample) => number): { first: number; middle_third_median: number; last_third_median: number; max: number } => ({
    first: pick(samples[0] as Sample),
    middle_third_median: median(mid.map(pick)),
    last_third_median: median(last.map(pick)),
    max: Math.max(...samples.map(pick)),
  });
  const summary = {
    minutes,
    rate,
    requests,
    failures,
    rss_mib: stat((s) => s.rss_mib),
    anon_mib: stat((s) => s.anon_mib),
    heap_used_mib: stat((s) => s.heap_used_mib),
    heap_total_mib: stat((s) => s.heap_total_mib),
    external_mib: stat((s) => s.external_mib),
  };
  const plateau = (m: { middle_third_median: number; last_third_median: number }): boolean => m.last_third_median <= m.middle_third_median * 1.1;
  process.stdout.write(`${JSON.stringify({ summary, rss_plateau: plateau(summary.rss_mib), heap_plateau: plateau(summary.heap_used_mib), heap })}\n`);
  await d.cleanup();
  await new Promise<void>((resolve) => origin.close(() => resolve()));
  return 0;
}

process.on('SIGINT', interrupt);
void main()
  .catch((err: unknown) => {
    process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
    return 1;
  })
  .then(async (code) => {
    await runCleanups();
    process.exit(code);
  });
