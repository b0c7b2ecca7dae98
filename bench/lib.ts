// Shared parts of the benchmarks: statistics, the rows of the report, the file corpus and tools on PATH. The
// daemon and peer servers are started by daemon.ts, Chromium by hand by chromium.ts; cleanup,
// temp dirs and process groups are the test kit's (test/kit/).
import { randomBytes } from 'node:crypto';
import { accessSync, constants, readFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { CLOCK_TICKS_PER_SEC } from '../daemon/core/process/proc.js';
import { startDaemon, type Daemon } from './daemon.js';

export const CHROMIUM = process.env.BROWSERD_CHROMIUM ?? '/usr/lib/chromium/chromium';

/** The daemon with its Chromium ready (the `chromium_ready` line, within 60 s); ended again when it does not get there. */
export async function readyDaemon(env?: Record<string, string>): Promise<Daemon> {
  const d = await startDaemon({ autostart: true, env });
  try {
    await d.waitLog((l) => l.event === 'chromium_ready', 60_000);
    return d;
  } catch (err) {
    await d.cleanup();
    throw err;
  }
}

// ---------------------------------------------------------------- statistics

/** The value below which `p` percent of the sorted samples lie (nearest rank). */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))] as number;
}

export function median(samples: readonly number[]): number {
  if (samples.length === 0) return NaN;
  const s = [...samples].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

/** A smoke run (`npm run bench -- --quick name…`, or BROWSERD_BENCH_QUICK=1): few samples, nothing written. */
export const QUICK = process.argv.includes('--quick') || process.env.BROWSERD_BENCH_QUICK === '1';

/** How many samples a case takes: `full`, or at most `quick` in a smoke run (cases that read it: run.ts's header). */
export function samples(full: number, quick = 2): number {
  return QUICK ? Math.min(full, quick) : full;
}

/**
 * The spread of the per-round ratios ours[i] / theirs[i] (the load of a shared machine moves both sides
 * of a round alike, so this moves less than either side): "per-round ratio p25–p75 a–b×, min–max c–d×".
 */
export function roundSpread(ours: readonly number[], theirs: readonly number[]): string {
  const r = ours.map((x, i) => x / (theirs[i] as number)).filter((x) => Number.isFinite(x));
  if (r.length === 0) return 'per-round ratio –';
  const f = (x: number): string => x.toFixed(2);
  return `per-round ratio p25–p75 ${f(percentile(r, 25))}–${f(percentile(r, 75))}×, min–max ${f(Math.min(...r))}–${f(Math.max(...r))}×`;
}

/** Milliseconds that `fn` took, with its result. */
export async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const t0 = performance.now();
  const value = await fn();
  return { ms: performance.now() - t0, value };
}

// ---------------------------------------------------------------- report rows

export type Unit = 'ms' | 'req/s' | 'MB/s' | 'MiB' | '% core';

/** One line of the report: browserd's figure and its peer's, measured in the same run. */
export interface Row {
  /** e.g. "1. restart to ready, p50". */
  name: string;
  unit: Unit;
  browserd: number | null;
  peer: number | null;
  /** What the peer is ("hand-started Chromium: stop + spawn + Browser.getVersion"). */
  peerName: string;
  /** Throughput: higher is better (the overhead is then peer/browserd − 1). */
  higherIsBetter?: boolean;
  /** Samples, goal, anything needed to read the figure. */
  note?: string;
  /** Set when the row could not be measured ("skipped: unzip not installed"). */
  skipped?: string;
}

/** One benchmark as `npm run bench` lists and runs it. */
export interface Bench {
  /** Its name on the command line. */
  name: string;
  /** What it measures, for the usage text and the progress lines. */
  what: string;
  run: () => Promise<Row[]>;
}

export function skippedRow(name: string, unit: Unit, peerName: string, why: string): Row {
  return { name, unit, browserd: null, peer: null, peerName, skipped: why };
}

/** browserd's extra cost per unit of work over the peer: +7% means 7% slower (or 7% more memory). */
export function overhead(r: Row): number | null {
  if (r.browserd === null || r.peer === null || r.browserd <= 0 || r.peer <= 0) return null;
  return r.higherIsBetter ? r.peer / r.browserd - 1 : r.browserd / r.peer - 1;
}

/** Runs one benchmark; an error becomes a row that says so instead of ending the whole run. */
export async function guard(name: string, fn: () => Promise<Row[]>): Promise<Row[]> {
  try {
    return await fn();
  } catch (err) {
    const msg = (err as Error).stack ?? String(err);
    process.stderr.write(`bench ${name} failed: ${msg}\n`);
    return [{ name, unit: 'ms', browserd: null, peer: null, peerName: '', skipped: `failed: ${(err as Error).message.split('\n')[0]}` }];
  }
}

export function progress(msg: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
}

// ---------------------------------------------------------------- file corpus

/** The corpus of the file benchmarks (unzip, download_dir_zip): this many files in FOLDERS folders. */
export const FILES = 2000;
export const FOLDERS = 20;
/** base64 text of random bytes deflates to ~76% (like minified code): 2,000 files of this size make a ~20 MiB archive. */
const FILE_CHARS = 13_700;

/** The corpus, fresh random text: `lib00/file0.js` … `lib19/file1999.js`. */
export function textFiles(): { name: string; data: string }[] {
  return Array.from({ length: FILES }, (_, i) => ({
    name: `lib${String(i % FOLDERS).padStart(2, '0')}/file${i}.js`,
    data: randomBytes(Math.ceil((FILE_CHARS * 3) / 4)).toString('base64').slice(0, FILE_CHARS),
  }));
}

// ---------------------------------------------------------------- tools

/** The path of `tool` on PATH (or in /usr/sbin, /usr/bin), else null. */
export function which(tool: string): string | null {
  const dirs = [...(process.env.PATH ?? '').split(':'), '/usr/sbin', '/usr/bin', '/sbin', '/bin'];
  for (const dir of dirs) {
    if (dir === '') continue;
    const p = path.join(dir, tool);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // not here
    }
  }
  return null;
}

export function notInstalled(tool: string): string {
  return `skipped: ${tool} not installed (bash .ci/setup --bench)`;
}

/**
 * CPU time (user + system) that process `pid` has used so far, in ms, from /proc/<pid>/stat. The
 * difference over a load, divided by the requests, is the process's CPU per request: on a shared
 * machine it moves less than requests/s (which also depend on who else had the cores).
 */
export function processCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / CLOCK_TICKS_PER_SEC;
}
