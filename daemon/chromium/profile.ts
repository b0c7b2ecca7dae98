// The daemon's Chromium profile: before a launch, end any process left on it by an earlier run
// (a Chromium with a DevTools port outlives a daemon killed with SIGKILL), then remove the
// profile's stale singleton locks and DevToolsActivePort.
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../core/log.js';
import { listProcesses } from './launcher.js';

/** Files Chromium leaves in a profile that a new Chromium must not trust. */
const STALE_FILES = ['SingletonLock', 'SingletonSocket', 'SingletonCookie', 'DevToolsActivePort'];
/** After SIGKILL, how long leftovers get to vanish. */
const KILL_WAIT_MS = 5000;
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

/** Live (non-zombie) processes, other than this one, whose command line names `profileDir`. */
export function findProfileProcesses(profileDir: string): ProfileProcess[] {
  const out: ProfileProcess[] = [];
  for (const p of listProcesses()) {
    if (p.pid === process.pid || p.state === 'Z') continue;
    let raw: string;
    try {
      raw = readFileSync(`/proc/${p.pid}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    if (namesDir(raw, profileDir)) out.push({ pid: p.pid, pgid: p.pgid, cmdline: raw.replaceAll('\0', ' ').slice(0, 300) });
  }
  return out;
}

/**
 * Ends every process left on the profile and its process group: SIGTERM, SIGKILL after
 * `graceMs`. Returns the pids it found. Throws when some survive SIGKILL.
 */
export async function endLeftovers(profileDir: string, graceMs: number, log: Logger): Promise<number[]> {
  const found = findProfileProcesses(profileDir);
  if (found.length === 0) return [];
  log.warn(
    { event: 'chromium_leftover', pids: found.map((p) => p.pid), profile: profileDir, commands: found.slice(0, 3).map((p) => p.cmdline) },
    'ending processes an earlier run left on the Chromium profile',
  );
  const ownGroup = listProcesses().find((p) => p.pid === process.pid)?.pgid;
  const groups = new Set(found.map((p) => p.pgid).filter((g) => g > 1 && g !== ownGroup));
  const signal = (sig: NodeJS.Signals): void => {
    for (const g of groups) trySignal(-g, sig);
    for (const p of found) trySignal(p.pid, sig);
  };
  const alive = (): boolean => listProcesses().some((p) => p.state !== 'Z' && (groups.has(p.pgid) || found.some((f) => f.pid === p.pid)));
  const waitGone = async (ms: number): Promise<boolean> => {
    const until = Date.now() + ms;
    while (alive()) {
      if (Date.now() >= until) return false;
      await sleep(POLL_MS);
    }
    return true;
  };
  signal('SIGTERM');
  if (!(await waitGone(graceMs))) {
    signal('SIGKILL');
    if (!(await waitGone(KILL_WAIT_MS))) throw new Error(`processes left on ${profileDir} survive SIGKILL: ${found.map((p) => p.pid).join(', ')}`);
  }
  log.info({ event: 'chromium_leftover_ended', pids: found.map((p) => p.pid) }, 'leftover processes ended');
  return found.map((p) => p.pid);
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
