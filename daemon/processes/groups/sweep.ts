// At start, before the daemon listens: the process groups an earlier run recorded (journal.ts) and
// that still live are ended (SIGTERM, SIGKILL after a grace), the way Chromium leftovers are swept.
// Only a group that is provably the one recorded is ever signalled:
//  - same boot (start times of another boot mean nothing; no process survives a reboot anyway);
//  - its leader (pid = pgid = sid) lives with the recorded start time, or
//  - no process has that pid any more, and living processes still have it as their session id:
//    the kernel keeps a pid allocated while any process uses it as a process group or session id,
//    so the number cannot have been given to another process meanwhile. (What this cannot see: a
//    session that ended while no daemon ran, its number reused by a process that made a session of
//    its own and died leaving members; that needs the pid space, 4194304 numbers by default, to
//    wrap around within the daemon's downtime.)
// A leader pid now held by a process with another start time means the recorded session is gone
// (its number was free to reuse): skipped. Every signal is preceded by a fresh check.
import type { Logger } from '../../core/log.js';
import { signalSession } from '../../core/process/group.js';
import { escalate, type KillSignal } from '../../core/process/kill.js';
import { bootId, isDead, readCmdline, scanProcesses, type ProcInfo } from '../../core/process/proc.js';
import type { JournalEntry } from './journal.js';

const POLL_MS = 50;
/** After SIGKILL, how long to wait for the kernel to take the groups down. */
const KILL_WAIT_MS = 2000;

/** The recorded groups that are provably ours and have living members, with those members: one /proc scan. */
async function verifiedLeftovers(entries: readonly JournalEntry[], boot = bootId()): Promise<Map<JournalEntry, ProcInfo[]>> {
  const out = new Map<JournalEntry, ProcInfo[]>();
  const candidates = entries.filter((e) => e.boot === boot && e.pgid > 1 && e.pgid !== process.pid);
  if (candidates.length === 0) return out;
  const byPid = new Map<number, ProcInfo>();
  const bySid = new Map<number, ProcInfo[]>();
  for (const p of await scanProcesses()) {
    byPid.set(p.pid, p);
    if (isDead(p)) continue;
    const list = bySid.get(p.sid);
    if (list === undefined) bySid.set(p.sid, [p]);
    else list.push(p);
  }
  const ownSid = byPid.get(process.pid)?.sid;
  for (const e of candidates) {
    if (e.pgid === ownSid) continue; // never the daemon's own session
    const leader = byPid.get(e.pgid);
    // A process holds the leader's pid: ours only if it is the leader itself (a zombie leader leaves
    // the question to its members). An unknown recorded start time proves nothing here.
    if (leader !== undefined && (e.starttime === 0 || leader.starttime !== e.starttime || leader.sid !== e.pgid)) continue;
    const members = bySid.get(e.pgid);
    if (members !== undefined && members.length > 0) out.set(e, members);
  }
  return out;
}

interface SweepResult {
  /** The groups found and ended. */
  ended: number[];
  /** Groups still alive after SIGKILL (kept in the journal for the next start). */
  survivors: JournalEntry[];
}

/** Ends every provably-ours group of `entries` that still lives: SIGTERM, SIGKILL after `graceMs`, wait. */
export async function endLeftoverGroups(entries: readonly JournalEntry[], log: Logger, graceMs: number): Promise<SweepResult> {
  const boot = bootId();
  const first = await verifiedLeftovers(entries, boot);
  if (first.size === 0) return { ended: [], survivors: [] };
  const pgids = [...first.keys()].map((e) => e.pgid);
  const members = [...first.values()].flat();
  log.warn(
    {
      event: 'process_leftover',
      pgids,
      child_pids: members.map((p) => p.pid),
      // The programs only: arguments may hold what must not be logged.
      programs: [...new Set(await Promise.all(members.map(async (p) => (await readCmdline(p.pid)).split('\0')[0] ?? '')))].slice(0, 10),
      grace_ms: graceMs,
    },
    'ending process groups an earlier run of the daemon left',
  );
  // Each group as a target of the kill escalation: alive while it is provably ours and has living
  // members (checked afresh each time: the checks of all groups share one /proc scan), and each
  // signal goes to the members that check found.
  const targets = [...first].map(([entry, found]) => {
    let members = found;
    return {
      entry,
      alive: async () => {
        members = (await verifiedLeftovers([entry], boot)).get(entry) ?? [];
        return members.length > 0;
      },
      signal: (sig: KillSignal) => {
        try {
          signalSession(members, sig);
        } catch {
          // EPERM: not ours to signal (a member changed its uid); it stays a survivor
        }
      },
    };
  });
  const result = await escalate(targets, { graceMs, killWaitMs: KILL_WAIT_MS, pollMs: POLL_MS });
  const killed = result.killed.map((t) => t.entry.pgid);
  const survivors = result.survivors.map((t) => t.entry);
  log.info(
    { event: 'process_leftover_ended', pgids, child_pids: members.map((p) => p.pid), killed_pgids: killed, surviving_pgids: survivors.map((e) => e.pgid) },
    survivors.length === 0 ? 'process groups left by an earlier run have ended' : 'some process groups left by an earlier run survive SIGKILL',
  );
  return { ended: pgids, survivors };
}
