// Process groups: signalling one as a whole, telling whether it still has a living member (a
// zombie is not one: an orphan under an init that does not reap stays a zombie forever), and
// waiting until it is gone. Every signal is preceded by a check by the caller that the group is
// still the one it started: a pgid is never signalled after its group is known to be gone.
import { setTimeout as sleep } from 'node:timers/promises';
import { isDead, listProcesses, type ProcInfo } from './proc.js';

export type GroupSignal = 'SIGTERM' | 'SIGKILL' | 'SIGINT' | 'SIGHUP';

/** Signals the whole group. false when no process of it exists any more (ESRCH); EPERM throws. */
export function signalGroup(pgid: number, signal: GroupSignal | 0): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw err;
  }
}

/** true while any process of the group exists (zombies count until reaped). */
export function groupExists(pgid: number): boolean {
  try {
    return signalGroup(pgid, 0);
  } catch {
    return true; // EPERM: it exists, it is just not ours
  }
}

/** The groups among `pgids` that have a living (not zombie) member: one /proc scan for all. */
export function livingGroups(pgids: Iterable<number>): Set<number> {
  const wanted = new Set([...pgids].filter((g) => groupExists(g)));
  const alive = new Set<number>();
  if (wanted.size === 0) return alive;
  for (const p of listProcesses()) if (wanted.has(p.pgid) && !isDead(p)) alive.add(p.pgid);
  return alive;
}

export function groupAlive(pgid: number): boolean {
  return livingGroups([pgid]).has(pgid);
}

/** How often a group is polled while waiting for it to vanish. */
const POLL_MS = 20;

/** Resolves true once no member of any of `pgids` lives, false after `timeoutMs`. */
export async function waitGroupsGone(pgids: Iterable<number>, timeoutMs: number, pollMs = POLL_MS): Promise<boolean> {
  const groups = [...pgids];
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (livingGroups(groups).size === 0) return true;
    if (Date.now() >= until) return false;
    await sleep(pollMs);
  }
}

/**
 * SIGTERM to each group, SIGKILL after `graceMs` to those with a living member (graceMs 0: SIGKILL
 * at once); resolves with the groups still alive `killWaitMs` after SIGKILL (none, normally).
 */
export async function endGroups(pgids: Iterable<number>, graceMs: number, killWaitMs: number): Promise<number[]> {
  const groups = [...livingGroups(pgids)];
  if (groups.length === 0) return [];
  const send = (sig: GroupSignal, to: number[]): void => {
    for (const g of to) {
      try {
        signalGroup(g, sig);
      } catch {
        // EPERM: not ours to signal any more
      }
    }
  };
  if (graceMs > 0) {
    send('SIGTERM', groups);
    if (await waitGroupsGone(groups, graceMs)) return [];
  }
  const stubborn = [...livingGroups(groups)];
  send('SIGKILL', stubborn);
  await waitGroupsGone(stubborn, killWaitMs);
  return [...livingGroups(stubborn)];
}

// Sessions. A child of the processes API leads its own session as well as its group (setsid); a
// shell with job control, timeout(1) and others move members into new groups of the same session,
// out of reach of kill(-pgid). The session holds all of them (a process group never spans two
// sessions), and the kernel keeps a pid allocated while it is used as a session id, so "the
// processes whose sid is S" stays the same family of processes for as long as any of them lives.

/** The living (not zombie) members of each of `sids`: one /proc scan for all. */
export function sessionMembers(sids: Iterable<number>): Map<number, ProcInfo[]> {
  const wanted = new Set(sids);
  const out = new Map<number, ProcInfo[]>();
  if (wanted.size === 0) return out;
  for (const p of listProcesses()) {
    if (!wanted.has(p.sid) || isDead(p)) continue;
    const list = out.get(p.sid);
    if (list === undefined) out.set(p.sid, [p]);
    else list.push(p);
  }
  return out;
}

/**
 * Signals every process group of session `sid` that has a living member (the leader's group and
 * those its members made); false when no member lives. EPERM throws.
 */
export function signalSession(sid: number, signal: GroupSignal, members?: readonly ProcInfo[]): boolean {
  const groups = new Set((members ?? sessionMembers([sid]).get(sid) ?? []).map((p) => p.pgid));
  let sent = false;
  for (const g of groups) if (signalGroup(g, signal)) sent = true;
  return sent;
}
