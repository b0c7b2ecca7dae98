// The process groups this module started (spawn and exec). Each child leads its own session as
// well as its group, and a "group" here is that session: the child's process group and any group
// its members made in the session (a job-control shell, timeout(1)), all reached by kill and ended
// at shutdown. A group is tracked from its start until no member of it lives any more, not merely
// until its leader exits: what a leader leaves behind still counts toward the live limit, can still
// be killed through the API, and is ended at shutdown. A group leaves the set only once it is gone,
// so shutdown (graceful or immediate) always sees every group that still runs, and a pgid is never
// signalled after its group is known to be gone (the number may belong to someone else by then):
// every signal is preceded by a check.
//
// "Living" means a member that is not a zombie, read from /proc: an orphan in a container whose
// init does not reap stays a zombie forever, and kill(-pgid, 0) alone would count it. /proc is read
// asynchronously (core/process/proc.ts); checks made in the same turn of the event loop share one
// scan. What the getters say (ended, size) is as of the last check; the routes check first.
import { sessionMembers, signalSession, type GroupSignal } from '../../core/process/group.js';
import { escalate, type Killable } from '../../core/process/kill.js';
import { CLOCK_TICKS_PER_SEC, isDead, listProcessesNow, pageBytes, type ProcInfo } from '../../core/process/proc.js';

/** At shutdown, how long process groups get after SIGTERM before SIGKILL. */
export const PROCESS_STOP_GRACE_MS = 3000;
/** How often groups whose leader has exited are checked for living members. */
const LINGER_POLL_MS = 500;
const POLL_MS = 50;
/** After SIGKILL, how long to wait for the kernel to take the groups down. */
const KILL_WAIT_MS = 2000;

/** One process group started by this module, from its start until no member of it lives. */
export class ProcessGroup {
  private leaderRunning = true;
  private isGone = false;
  private readonly goneCallbacks: (() => void)[] = [];
  private resolveGone!: () => void;
  /** Resolves once no member of the group lives any more. */
  readonly gone = new Promise<void>((resolve) => (this.resolveGone = resolve));

  constructor(
    readonly pgid: number,
    private readonly set: GroupSet,
  ) {}

  /** true once the leader has exited (and was reaped); members it left may still live. */
  get leaderExited(): boolean {
    return !this.leaderRunning;
  }

  /** Known to be gone (as of the last check; `alive()` checks again). */
  get ended(): boolean {
    return this.isGone;
  }

  /** Calls `cb` synchronously once the group is gone (at once when it already is). */
  onGone(cb: () => void): void {
    if (this.isGone) cb();
    else this.goneCallbacks.push(cb);
  }

  /** true while a member lives: checked now once the leader has exited. */
  async alive(): Promise<boolean> {
    if (this.isGone) return false;
    if (this.leaderRunning) return true;
    await this.set.refresh([this]);
    return !this.isGone;
  }

  /** Signals every group of the session while a member lives; false (nothing sent) when nothing of it is left. EPERM throws. */
  async signal(signal: GroupSignal): Promise<boolean> {
    if (!(await this.alive())) return false;
    return signalSession((await sessionMembers([this.pgid])).get(this.pgid) ?? [], signal);
  }

  /**
   * CPU and memory of the living members (null when none lives): CPU time over the time since
   * `startedAt`, in percent of one core (as ps %CPU), and the sum of resident memory in bytes.
   * `scan`: the members of sessions as read by sessionMembers (no I/O here).
   */
  usage(startedAt: Date, scan: ReadonlyMap<number, ProcInfo[]>): { cpu_pct: number; mem_bytes: number } | null {
    if (this.isGone) return null;
    const members = scan.get(this.pgid) ?? [];
    if (members.length === 0) return null;
    const ticks = members.reduce((n, p) => n + p.utime + p.stime, 0);
    const elapsedSec = Math.max((Date.now() - startedAt.getTime()) / 1000, 0.01);
    const cpu = (ticks / CLOCK_TICKS_PER_SEC / elapsedSec) * 100;
    return { cpu_pct: Math.round(cpu * 10) / 10, mem_bytes: members.reduce((n, p) => n + p.rss, 0) * pageBytes() };
  }

  /** `signal` for timers and event handlers, where an error (EPERM) has nowhere to go. */
  async trySignal(signal: GroupSignal): Promise<boolean> {
    try {
      return await this.signal(signal);
    } catch {
      return false; // not ours to signal any more; shutdown tries again
    }
  }

  /** The leader has exited and was reaped: the group is gone now, or lingers while members live. */
  leaderExit(): Promise<void> {
    if (!this.leaderRunning) return Promise.resolve();
    this.leaderRunning = false;
    return this.set.refresh([this]);
  }

  /** Called by the set once no member lives. */
  markGone(): void {
    if (this.isGone) return;
    this.isGone = true;
    this.resolveGone();
    for (const cb of this.goneCallbacks.splice(0)) cb();
  }
}

export class GroupSet {
  private readonly groups = new Map<number, ProcessGroup>();
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly lingerPollMs = LINGER_POLL_MS) {}

  /** Tracks the group of a child that was just started (it leads the group). */
  add(pgid: number): ProcessGroup {
    // A tracked group with this number must have ended unnoticed (the kernel reuses no pgid that a
    // process still holds): forget it before the new one takes its place.
    const stale = this.groups.get(pgid);
    if (stale !== undefined) this.forget(stale);
    const group = new ProcessGroup(pgid, this);
    this.groups.set(pgid, group);
    return group;
  }

  /** Groups not known to be gone, as of the last check (refresh() checks). */
  get size(): number {
    return this.groups.size;
  }

  /**
   * Checks the groups whose leader has exited (all, or `only`) and forgets those with no living
   * member in their session, calling their onGone callbacks: one /proc scan for all.
   */
  async refresh(only?: Iterable<ProcessGroup>): Promise<void> {
    const candidates = [...(only ?? this.groups.values())].filter((g) => g.leaderExited && !g.ended);
    if (candidates.length > 0) {
      const living = await sessionMembers(candidates.map((g) => g.pgid));
      for (const g of candidates) if (!living.has(g.pgid)) this.forget(g);
    }
    this.schedule();
  }

  /** SIGTERM to every group, SIGKILL after `graceMs` to those with a living member. Returns the counts. */
  async endAll(graceMs: number): Promise<{ terminated: number; killed: number }> {
    await this.refresh();
    const { signalled, killed } = await escalate([...this.groups.values()].map((g) => this.target(g)), { graceMs, killWaitMs: KILL_WAIT_MS, pollMs: POLL_MS });
    return { terminated: signalled.length, killed: killed.length };
  }

  /**
   * SIGKILL to every group that still has a member, at once (also those endAll is still working
   * on): for a daemon about to exit, so /proc is read synchronously.
   */
  killAll(): void {
    const open = [...this.groups.values()].filter((g) => !g.ended);
    if (open.length === 0) return;
    const sids = new Set(open.map((g) => g.pgid));
    const members = new Map<number, ProcInfo[]>();
    for (const p of listProcessesNow()) {
      if (!sids.has(p.sid) || isDead(p)) continue;
      members.set(p.sid, [...(members.get(p.sid) ?? []), p]);
    }
    for (const g of open) {
      try {
        signalSession(members.get(g.pgid) ?? [], 'SIGKILL');
      } catch {
        // EPERM: not ours to signal any more; nothing more can be done here.
      }
    }
  }

  /** Stops the periodic check (the groups stay tracked). */
  close(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  private forget(group: ProcessGroup): void {
    if (this.groups.get(group.pgid) === group) this.groups.delete(group.pgid);
    group.markGone();
  }

  /** A periodic check runs while some group outlives its leader, so its slot is freed when it ends. */
  private schedule(): void {
    const lingering = [...this.groups.values()].some((g) => g.leaderExited);
    if (lingering && this.timer === null) {
      this.timer = setInterval(() => void this.refresh().catch(() => {}), this.lingerPollMs);
      this.timer.unref();
    } else if (!lingering) {
      this.close();
    }
  }

  /**
   * The group as a target of the kill escalation: alive while its session has a living member
   * (a group whose leader has exited is forgotten once none lives); each signal goes to the groups
   * of the members found by the check before it, never to a group already gone.
   */
  private target(g: ProcessGroup): Killable {
    let members: ProcInfo[] = [];
    return {
      alive: async () => {
        if (g.ended) return false;
        members = (await sessionMembers([g.pgid])).get(g.pgid) ?? [];
        if (members.length === 0 && g.leaderExited) this.forget(g);
        return members.length > 0;
      },
      signal: (sig) => {
        try {
          signalSession(members, sig);
        } catch {
          // EPERM: not ours to signal any more; nothing more can be done here.
        }
      },
    };
  }
}
