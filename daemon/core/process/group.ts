// Process groups: signalling one as a whole, telling whether it still has a living member (a
// zombie is not one: an orphan under an init that does not reap stays a zombie forever), and
// ending it (kill.ts). Every signal is preceded by a check by the caller that the group is still
// the one it started: a pgid is never signalled after its group is known to be gone. The checks
// read /proc asynchronously (proc.ts scanProcesses), and only when kill(-pgid, 0) says the group
// exists at all.
import { escalate, type KillSignal } from './kill.js';
import { isDead, scanProcesses, type ProcInfo } from './proc.js';

export type GroupSignal = KillSignal;

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
function groupExists(pgid: number): boolean {
  try {
    return signalGroup(pgid, 0);
  } catch {
    return true; // EPERM: it exists, it is just not ours
  }
}

/** The groups among `pgids` that have a living (not zombie) member: one /proc scan for all, none when no group exists. */
export async function livingGroups(pgids: Iterable<number>): Promise<Set<number>> {
  const wanted = new Set([...pgids].filter((g) => groupExists(g)));
  const alive = new Set<number>();
  if (wanted.size === 0) return alive;
  for (const p of await scanProcesses()) if (wanted.has(p.pgid) && !isDead(p)) alive.add(p.pgid);
  return alive;
}

export async function groupAlive(pgid: number): Promise<boolean> {
  return (await livingGroups([pgid])).has(pgid);
}

/** After SIGKILL, how long endGroups waits for the kernel to take the groups down (default). */
const KILL_WAIT_MS = 2000;

/**
 * SIGTERM to each group, SIGKILL after `graceMs` to those with a living member (graceMs 0: SIGKILL
 * at once); resolves with the groups still alive `killWaitMs` after SIGKILL (none, normally).
 */
export async function endGroups(pgids: Iterable<number>, graceMs: number, killWaitMs = KILL_WAIT_MS): Promise<number[]> {
  const targets = [...pgids].map((pgid) => ({
    pgid,
    alive: () => groupAlive(pgid),
    signal: (sig: GroupSignal) => {
      try {
        signalGroup(pgid, sig);
      } catch {
        // EPERM: not ours to signal any more
      }
    },
  }));
  const { survivors } = await escalate(targets, { graceMs, killWaitMs });
  return survivors.map((t) => t.pgid);
}

// Sessions. A child of the processes API leads its own session as well as its group (setsid); a
// shell with job control, timeout(1) and others move members into new groups of the same session,
// out of reach of kill(-pgid). The session holds all of them (a process group never spans two
// sessions), and the kernel keeps a pid allocated while it is used as a session id, so "the
// processes whose sid is S" stays the same family of processes for as long as any of them lives.

/** The living (not zombie) members of each of `sids`: one /proc scan for all. */
export async function sessionMembers(sids: Iterable<number>): Promise<Map<number, ProcInfo[]>> {
  const wanted = new Set(sids);
  const out = new Map<number, ProcInfo[]>();
  if (wanted.size === 0) return out;
  for (const p of await scanProcesses()) {
    if (!wanted.has(p.sid) || isDead(p)) continue;
    const list = out.get(p.sid);
    if (list === undefined) out.set(p.sid, [p]);
    else list.push(p);
  }
  return out;
}

/**
 * Signals every process group that `members` (living members of one session, from sessionMembers)
 * belong to; false when there are none. EPERM throws.
 */
export function signalSession(members: readonly ProcInfo[], signal: GroupSignal): boolean {
  let sent = false;
  for (const g of new Set(members.map((p) => p.pgid))) if (signalGroup(g, signal)) sent = true;
  return sent;
}
