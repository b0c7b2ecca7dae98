// Processes as /proc shows them: whether a pid or a group still lives (a zombie counts as gone: an
// orphan's parent in a container may never reap it), the processes of a group, a session, a profile
// folder or an environment marker, and ending groups the caller started. The parser is the kit's
// own, not the daemon's (daemon/core/process/proc.ts): what a test asserts of the daemon's process
// handling is read independently of it.
import { readdirSync, readFileSync } from 'node:fs';
import { until, within } from './wait.js';

interface Proc {
  pid: number;
  pgid: number;
  sid: number;
  comm: string;
}

function readOr(file: string): string {
  try {
    return readFileSync(file, 'latin1');
  } catch {
    return '';
  }
}

/** A living process's /proc/<pid>/stat, else null (gone, a zombie, or a dead entry). */
function stat(pid: number): Proc | null {
  const text = readOr(`/proc/${pid}/stat`);
  const close = text.lastIndexOf(')');
  if (close < 0) return null;
  // "pid (comm) state ppid pgrp session …": comm may hold spaces and parentheses.
  const [state, , pgid, sid] = text.slice(close + 2).split(' ');
  if (state === undefined || state === 'Z' || state === 'X') return null;
  return { pid, pgid: Number(pgid), sid: Number(sid), comm: text.slice(text.indexOf('(') + 1, close) };
}

/** Every living process. */
function living(): Proc[] {
  const out: Proc[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const p = stat(Number(name));
    if (p !== null) out.push(p);
  }
  return out;
}

export function isAlive(pid: number): boolean {
  return stat(pid) !== null;
}

/** true when no process `pid` runs any more (gone, or a zombie). */
export function pidGone(pid: number): boolean {
  return !isAlive(pid);
}

/** The process group of a living process, else null. */
export function pgidOf(pid: number): number | null {
  return stat(pid)?.pgid ?? null;
}

/** The pids of the living members of process group `pgid`. */
export function groupMembers(pgid: number): number[] {
  return living()
    .filter((p) => p.pgid === pgid)
    .map((p) => p.pid);
}

/** The living processes whose session is `sid`, with their pgid and command name. */
export function sessionProcesses(sid: number): { pid: number; pgid: number; comm: string }[] {
  return living()
    .filter((p) => p.sid === sid)
    .map(({ pid, pgid, comm }) => ({ pid, pgid, comm }));
}

/** Living processes (this one left out) whose command line names `dir`: a Chromium on its profile. */
export function processesNaming(dir: string): number[] {
  return living()
    .filter((p) => p.pid !== process.pid && readOr(`/proc/${p.pid}/cmdline`).includes(dir))
    .map((p) => p.pid);
}

/** Living processes (other than `except`) whose environment holds `NAME=value`. */
export function processesWithEnv(entry: string, except: number[] = []): { pid: number; pgid: number }[] {
  return living()
    .filter((p) => !except.includes(p.pid) && readOr(`/proc/${p.pid}/environ`).split('\0').includes(entry))
    .map((p) => ({ pid: p.pid, pgid: p.pgid }));
}

/** Resident memory of a process in bytes (VmRSS; 0 when it is gone). */
export function rssOf(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readOr(`/proc/${pid}/status`));
  return Number(m?.[1] ?? 0) * 1024;
}

/** true while group `pgid` has a living member (kill(-pgid, 0) first: no /proc scan once it is gone). */
export function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
  }
  return groupMembers(pgid).length > 0;
}

export function waitPidGone(pid: number, timeoutMs = 15_000): Promise<true> {
  return until(`pid ${pid} to be gone`, () => pidGone(pid), timeoutMs);
}

export function waitGroupGone(pgid: number, timeoutMs = 15_000): Promise<true> {
  return until(() => `process group ${pgid} to be gone (members: ${groupMembers(pgid).join(' ')})`, () => groupMembers(pgid).length === 0, timeoutMs);
}

/** Sends `signal` to group `pgid`, whatever is left of it (gone, or not ours: nothing to do). */
export function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // gone already
  }
}

/** Cleanup of a group the caller started: SIGKILL, only while living members are left (its number may be reused after). */
export function killGroup(pgid: number): void {
  if (groupAlive(pgid)) signalGroup(pgid, 'SIGKILL');
}

/** SIGKILL to every process naming `dir` and to its group: what a stopped daemon left on its state dir. */
export function killNaming(dir: string): void {
  for (const pid of processesNaming(dir)) {
    const pgid = pgidOf(pid);
    if (pgid !== null && pgid > 1 && pgid !== process.pid) signalGroup(pgid, 'SIGKILL');
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
}

/**
 * SIGTERM to the group, SIGKILL after `graceMs`; resolves once no member lives (polled every
 * `pollMs`). `exited` is the leader's exit, awaited first when given.
 */
export async function stopGroup(pgid: number, opts: { graceMs?: number; pollMs?: number; exited?: Promise<unknown> } = {}): Promise<void> {
  const deadline = Date.now() + (opts.graceMs ?? 5000);
  const poll = opts.pollMs ?? 5;
  signalGroup(pgid, 'SIGTERM');
  if (opts.exited) await within(opts.exited, deadline - Date.now());
  const gone = await until(`process group ${pgid} to end`, () => !groupAlive(pgid), Math.max(0, deadline - Date.now()), poll).then(
    () => true,
    () => false,
  );
  if (gone) return;
  signalGroup(pgid, 'SIGKILL');
  await until(`process group ${pgid} to end after SIGKILL`, () => !groupAlive(pgid), 10_000, 50);
}
