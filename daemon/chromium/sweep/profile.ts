// The daemon's Chromium profile: end the Chromium processes left on it (a Chromium with a DevTools
// port outlives a daemon killed with SIGKILL; crashpad handlers run outside the process group),
// at daemon start, before a launch, after every stop; then remove the profile's stale singleton
// locks and DevToolsActivePort. Only Chromium is ended (identity.ts), never a caller's process.
import { mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from '../../core/log.js';
import { escalate } from '../../core/process/kill.js';
import { exeOf, isDead, readCmdline, readCmdlinesBeforeServing, readProcInfo, scanPids, scanProcesses } from '../../core/process/proc.js';
import { argvOf, type ChromiumIdentity } from './identity.js';

/** Files Chromium leaves in a profile that a new Chromium must not trust. */
const STALE_FILES = ['SingletonLock', 'SingletonSocket', 'SingletonCookie', 'DevToolsActivePort'];
/** After SIGKILL, how long leftovers get to vanish. */
const KILL_WAIT_MS = 5000;
/** How often the leftovers are checked while they get to end. */
const POLL_MS = 25;

export function profileDirOf(stateDir: string): string {
  return path.join(stateDir, 'chromium-profile');
}

export function ensureProfileDir(profileDir: string): void {
  mkdirSync(profileDir, { recursive: true, mode: 0o700 });
}

export interface ProfileProcess {
  pid: number;
  pgid: number;
  /** Clock ticks since boot: with the pid, one process across pid reuse. */
  starttime: number;
  cmdline: string;
}

/**
 * true when the command line (NUL-separated, or space-separated as Chromium rewrites it for its
 * child processes) names `dir` as an argument or a flag's value, or a path below it.
 */
export function namesDir(cmdline: string, dir: string): boolean {
  const escaped = dir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`(?:^|[\\0 =])${escaped}(?=$|[\\0 /])`).test(cmdline);
}

/** How a sweep may read: `beforeServing`, the daemon's start sweep, reads the command lines synchronously (readCmdlinesBeforeServing). */
export interface SweepOptions {
  beforeServing?: boolean;
}

/**
 * Live (non-zombie) Chromium processes, other than this one, whose command line names
 * `profileDir`. Any other process naming the profile is left alone (identity.ts).
 */
export async function findProfileProcesses(profileDir: string, identity: ChromiumIdentity, opts: SweepOptions = {}): Promise<ProfileProcess[]> {
  // The command line first: it rules out nearly every process (one read each; asynchronous once the daemon serves).
  const pids = (await scanPids()).filter((pid) => pid !== process.pid);
  const early = opts.beforeServing === true ? readCmdlinesBeforeServing(pids) : null;
  const found = await Promise.all(
    pids.map(async (pid, i): Promise<ProfileProcess | null> => {
      const raw = early?.[i] ?? (await readCmdline(pid));
      if (raw === '' || !raw.includes(profileDir) || !namesDir(raw, profileDir)) return null;
      const p = await readProcInfo(pid);
      if (p === null || p.state === 'Z') return null;
      if (!identity.matches({ exe: await exeOf(pid), argv: argvOf(raw) })) return null;
      return { pid, pgid: p.pgid, starttime: p.starttime, cmdline: raw.replaceAll('\0', ' ').slice(0, 300) };
    }),
  );
  return found.filter((p): p is ProfileProcess => p !== null);
}

/**
 * Ends every Chromium process left on the profile: SIGTERM, SIGKILL after `graceMs` (0: SIGKILL
 * at once). Each found pid is signalled, and so is a process group, but only one led by a found
 * Chromium process (its zygotes and renderers, whatever Chromium started): never the group of
 * another process, nor the daemon's own. Returns the pids it found. Throws when some survive
 * SIGKILL.
 */
export async function endLeftovers(profileDir: string, identity: ChromiumIdentity, graceMs: number, log: Logger, opts: SweepOptions = {}): Promise<number[]> {
  return endProfileProcesses(await findProfileProcesses(profileDir, identity, opts), profileDir, graceMs, log);
}

/** endLeftovers for processes already found (findProfileProcesses), the same way. */
export async function endProfileProcesses(found: ProfileProcess[], profileDir: string, graceMs: number, log: Logger): Promise<number[]> {
  if (found.length === 0) return [];
  const pids = new Set(found.map((p) => p.pid));
  log.warn(
    { event: 'chromium_leftover', pids: [...pids], profile: profileDir, commands: found.slice(0, 3).map((p) => p.cmdline) },
    'ending Chromium processes left on the profile',
  );
  const ownGroup = (await readProcInfo(process.pid))?.pgid;
  const groups = new Set(found.map((p) => p.pgid).filter((g) => g > 1 && g !== ownGroup && pids.has(g)));
  const leftovers = {
    alive: async () => (await scanProcesses()).some((p) => !isDead(p) && (groups.has(p.pgid) || pids.has(p.pid))),
    signal: (sig: NodeJS.Signals) => {
      for (const g of groups) trySignal(-g, sig);
      for (const pid of pids) trySignal(pid, sig);
    },
  };
  const { survivors } = await escalate([leftovers], { graceMs, killWaitMs: KILL_WAIT_MS, pollMs: POLL_MS });
  if (survivors.length > 0) throw new Error(`Chromium processes left on ${profileDir} survive SIGKILL: ${[...pids].join(', ')}`);
  log.info({ event: 'chromium_leftover_ended', pids: [...pids] }, 'leftover Chromium processes ended');
  return [...pids];
}

/** Removes the singleton locks and DevToolsActivePort; only call once no Chromium runs on the profile. */
export function removeStaleFiles(profileDir: string): void {
  for (const f of STALE_FILES) rmSync(path.join(profileDir, f), { force: true });
}

function trySignal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}
