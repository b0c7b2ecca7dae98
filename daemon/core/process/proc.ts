// What /proc says about processes (Linux): one parser of /proc/<pid>/stat for the whole daemon
// (process groups, the Chromium sweep, the recorded groups of the processes API).
//
// Reading all of /proc is hundreds of files: scans are asynchronous (fs/promises), so the event
// loop keeps answering meanwhile, and callers that ask in the same turn of the event loop share one
// scan (scanProcesses). A shared scan always starts after every call it answers, so none of them
// gets a picture older than its call. One process's own files (stat, cmdline, exe) are read by pid.
// The one synchronous scan of command lines is the start's, before the daemon serves
// (readCmdlinesBeforeServing).
import { readdirSync, readFileSync } from 'node:fs';
import { readdir, readFile, readlink } from 'node:fs/promises';

export interface ProcInfo {
  pid: number;
  ppid: number;
  pgid: number;
  /** Session id. */
  sid: number;
  /** R, S, D, Z (zombie), T, X, ... */
  state: string;
  /** Start time in clock ticks since boot: with the pid, it names one process across pid reuse. */
  starttime: number;
  /** CPU time in user and kernel mode, in clock ticks. */
  utime: number;
  stime: number;
  /** Resident set size in pages. */
  rss: number;
}

/** USER_HZ: the unit of the times in /proc/<pid>/stat (100 on every Linux architecture node runs on). */
export const CLOCK_TICKS_PER_SEC = 100;

/** One process's /proc/<pid>/stat, or null when it is gone (or unreadable). */
export function procInfo(pid: number): ProcInfo | null {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return null;
  }
  return parseStat(pid, stat);
}

/** "pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime priority nice threads itrealvalue starttime ..." */
function parseStat(pid: number, stat: string): ProcInfo {
  // comm may hold spaces and parentheses: the fields start after the last ')'.
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return {
    pid,
    state: f[0] ?? '?',
    ppid: Number(f[1]),
    pgid: Number(f[2]),
    sid: Number(f[3]),
    utime: Number(f[11]),
    stime: Number(f[12]),
    starttime: Number(f[19]),
    rss: Number(f[21]),
  };
}

/** One process's /proc/<pid>/stat read asynchronously, or null when it is gone (or unreadable). */
export async function readProcInfo(pid: number): Promise<ProcInfo | null> {
  try {
    return parseStat(pid, await readFile(`/proc/${pid}/stat`, 'latin1'));
  } catch {
    return null;
  }
}

let nextScan: Promise<ProcInfo[]> | null = null;

/**
 * Every process in /proc (those that vanish while reading are skipped), read asynchronously. Calls
 * made in the same turn of the event loop share one scan, which starts after all of them.
 */
export function scanProcesses(): Promise<ProcInfo[]> {
  nextScan ??= new Promise<void>((resolve) => setImmediate(resolve)).then(async () => {
    nextScan = null;
    const infos = await Promise.all((await scanPids()).map(readProcInfo));
    return infos.filter((p): p is ProcInfo => p !== null);
  });
  return nextScan;
}

/**
 * Every process in /proc, read synchronously: only for a daemon about to exit (its second signal),
 * which has no event loop left to keep answering and no time for an asynchronous scan.
 */
export function listProcessesNow(): ProcInfo[] {
  const out: ProcInfo[] = [];
  for (const name of readdirSync('/proc')) {
    if (name.charCodeAt(0) < 48 || name.charCodeAt(0) > 57) continue;
    const info = procInfo(Number(name));
    if (info !== null) out.push(info);
  }
  return out;
}

/** The pids in /proc (without reading anything of them), read asynchronously. */
export async function scanPids(): Promise<number[]> {
  const out: number[] = [];
  for (const name of await readdir('/proc')) {
    if (name.charCodeAt(0) < 48 || name.charCodeAt(0) > 57) continue;
    out.push(Number(name));
  }
  return out;
}

/**
 * The command lines of `pids` (as readCmdline), read synchronously: for the daemon's start only, before
 * it serves. Why: a synchronous read of /proc/<pid>/cmdline costs ~20 µs of CPU against ~150 µs for an
 * asynchronous one (open, fstat, read and close through the thread pool, and their promises): ~5 vs
 * ~25 ms for 190 processes. Why not once it serves: reading another process's command line takes that
 * process's memory lock, and a process stuck holding it (in D state) would hold the event loop with it.
 * Before the daemon serves there is no request to hold, and the start awaits the scan either way.
 */
export function readCmdlinesBeforeServing(pids: readonly number[]): string[] {
  return pids.map((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      return '';
    }
  });
}

/** The NUL-separated command line as arguments ('' when unreadable). Chromium's children rewrite theirs into one space-separated string. */
export async function readCmdline(pid: number): Promise<string> {
  try {
    return await readFile(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return '';
  }
}

/** The kernel appends this to /proc/PID/exe when the file was replaced (a package upgrade). */
const DELETED_SUFFIX = ' (deleted)';

/** The executable of a process, without the " (deleted)" mark; null when unreadable. */
export async function exeOf(pid: number): Promise<string | null> {
  try {
    const link = await readlink(`/proc/${pid}/exe`);
    return link.endsWith(DELETED_SUFFIX) ? link.slice(0, -DELETED_SUFFIX.length) : link;
  } catch {
    return null;
  }
}

/** Now, in the unit of ProcInfo.starttime (clock ticks since boot): a process started later has a starttime of at least this. */
export function ticksSinceBoot(): number {
  // "<uptime seconds> <idle seconds>", with two decimals: one tick.
  return Math.floor(Number(readFileSync('/proc/uptime', 'latin1').split(' ')[0]) * CLOCK_TICKS_PER_SEC);
}

/** The kernel's boot id: start times from another boot mean nothing. */
export function bootId(): string {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return 'unknown';
  }
}

let pageSize = 0;
/** The memory page size in bytes: this process's resident bytes over its resident pages (node does not expose sysconf). */
export function pageBytes(): number {
  if (pageSize > 0) return pageSize;
  const pages = procInfo(process.pid)?.rss ?? 0;
  const ratio = pages > 0 ? process.memoryUsage.rss() / pages : 4096;
  // The nearest power of two of at least 4 KiB: the two readings are a moment apart.
  pageSize = 2 ** Math.max(12, Math.round(Math.log2(ratio)));
  return pageSize;
}

/** true for a zombie or a dead entry: not a living process. */
export function isDead(p: ProcInfo): boolean {
  return p.state === 'Z' || p.state === 'X';
}
