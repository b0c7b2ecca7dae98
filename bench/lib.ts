// Shared parts of the benchmarks: statistics, the rows of the report, the cleanup registry (every
// process a benchmark starts is registered and ended, even on error or Ctrl-C), temp dirs, process
// groups and tools on PATH. The daemon itself is started by daemon.ts.
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const mainJs = path.join(repoRoot, 'dist', 'daemon', 'browserd.js');
export const fixtures = path.join(repoRoot, 'fixtures');
export const CHROMIUM = process.env.BROWSERD_CHROMIUM ?? '/usr/lib/chromium/chromium';

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

/** true when `p` settled within `ms`, false when the time ran out first (the timer never outlives the wait). */
export async function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([p.then(() => true, () => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Milliseconds that `fn` took, with its result. */
export async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const t0 = performance.now();
  const value = await fn();
  return { ms: performance.now() - t0, value };
}

// ---------------------------------------------------------------- report rows

export type Unit = 'ms' | 'req/s' | 'MB/s' | 'MiB';

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

// ---------------------------------------------------------------- cleanup registry

type Cleanup = () => Promise<void> | void;
const cleanups = new Set<Cleanup>();
let interrupted = false;

/** Registers `fn` to run at exit (Ctrl-C included) unless unregistered first; returns the unregister. */
export function onCleanup(fn: Cleanup): () => void {
  cleanups.add(fn);
  return () => cleanups.delete(fn);
}

/** After a signal: no benchmark may start anything new (its cleanup could be missed). */
export function interrupt(): void {
  interrupted = true;
}

/** Throws once the run was interrupted; called before every spawn and after every await that yields a resource. */
export function checkRunning(): void {
  if (interrupted) throw new Error('interrupted');
}

/** Runs every registered cleanup (newest first) until none is left; used by run.ts on signals and at the end. */
export async function runCleanups(): Promise<void> {
  while (cleanups.size > 0) {
    for (const fn of [...cleanups].reverse()) {
      cleanups.delete(fn);
      try {
        await fn();
      } catch (err) {
        process.stderr.write(`cleanup failed: ${(err as Error).message}\n`);
      }
    }
  }
}

export function tempDir(prefix: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

// ---------------------------------------------------------------- process groups

function procStat(pid: string): { state: string; pgid: number } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: f[0] ?? '?', pgid: Number(f[2]) };
  } catch {
    return null;
  }
}

/** true while the group has a member that is not a zombie. */
export function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
  } catch {
    return false;
  }
  for (const name of readdirProc()) {
    const s = procStat(name);
    if (s !== null && s.pgid === pgid && s.state !== 'Z') return true;
  }
  return false;
}

function readdirProc(): string[] {
  return readdirSync('/proc').filter((n) => /^\d+$/.test(n));
}

export function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // gone already
  }
}

/**
 * SIGTERM to the group, SIGKILL after `graceMs`; resolves once no member is left (polled every
 * `pollMs`). `exited` is the leader's exit, awaited first when given.
 */
export async function stopGroup(pgid: number, opts: { graceMs?: number; pollMs?: number; exited?: Promise<unknown> } = {}): Promise<void> {
  const grace = opts.graceMs ?? 5000;
  const poll = opts.pollMs ?? 5;
  signalGroup(pgid, 'SIGTERM');
  const until = performance.now() + grace;
  if (opts.exited) await within(opts.exited, grace);
  while (groupAlive(pgid)) {
    if (performance.now() > until) {
      signalGroup(pgid, 'SIGKILL');
      await sleep(50);
      if (performance.now() > until + 10_000) throw new Error(`process group ${pgid} survives SIGKILL`);
    } else await sleep(poll);
  }
}

/** Live processes (not zombies) whose command line names `dir`: Chromiums left on a profile. */
export function processesNaming(dir: string): { pid: number; pgid: number }[] {
  const out: { pid: number; pgid: number }[] = [];
  for (const name of readdirProc()) {
    if (Number(name) === process.pid) continue;
    let cmd: string;
    try {
      cmd = readFileSync(`/proc/${name}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    if (!cmd.includes(dir)) continue;
    const s = procStat(name);
    if (s !== null && s.state !== 'Z') out.push({ pid: Number(name), pgid: s.pgid });
  }
  return out;
}

/** SIGKILL to every process naming `dir` and to its group. */
export function killNaming(dir: string): void {
  for (const p of processesNaming(dir)) {
    if (p.pgid > 1 && p.pgid !== process.pid) signalGroup(p.pgid, 'SIGKILL');
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
}

/** Resolves with the child's exit (immediately when it already exited). */
export function exitOf(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

// ---------------------------------------------------------------- peer servers

/**
 * Runs a peer server script (its own process group, as the daemon is) that prints
 * `{"event":"listening","port":N}` on stdout; `stop()` ends it (also registered as a cleanup).
 */
export async function startPeerServer(script: string): Promise<{ port: number; stop(): Promise<void> }> {
  checkRunning();
  const proc = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'inherit'], detached: true });
  const exited = exitOf(proc);
  const kill = async (): Promise<void> => {
    signalGroup(proc.pid as number, 'SIGKILL');
    await exited;
  };
  const unregister = onCleanup(kill);
  try {
    const port = await new Promise<number>((resolve, reject) => {
      let buf = '';
      proc.stdout?.setEncoding('utf8').on('data', (c: string) => {
        buf += c;
        const m = /"port":(\d+)/.exec(buf);
        if (m) resolve(Number(m[1]));
      });
      void exited.then(() => reject(new Error(`${path.basename(script)} exited before listening`)));
    });
    return {
      port,
      stop: async () => {
        unregister();
        await kill();
      },
    };
  } catch (err) {
    unregister();
    await kill();
    throw err;
  }
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
