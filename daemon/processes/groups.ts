// The process groups this module started (spawn and exec), so that shutdown can end every one of
// them, including members that outlived their leader: SIGTERM to each group, then SIGKILL to the
// groups that still have a living member after the grace period.
import { readFileSync, readdirSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { groupAlive, signalGroup, type GroupSignal } from './spawn.js';

/** At shutdown, how long process groups get after SIGTERM before SIGKILL. */
export const PROCESS_STOP_GRACE_MS = 3000;
const POLL_MS = 50;
/** After SIGKILL, how long to wait for the kernel to take the groups down. */
const KILL_WAIT_MS = 2000;

/**
 * The groups among `pgids` that have a living (not zombie) member. Read from /proc: a zombie whose
 * parent does not reap it (an orphan under an init that does not reap) would otherwise look alive.
 */
export function livingGroups(pgids: Iterable<number>): Set<number> {
  const wanted = new Set(pgids);
  const alive = new Set<number>();
  if (wanted.size === 0) return alive;
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    for (const g of wanted) if (groupAlive(g)) alive.add(g);
    return alive;
  }
  for (const name of entries) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'latin1');
    } catch {
      continue; // gone meanwhile
    }
    // "pid (comm) state ppid pgrp ..."; comm may hold spaces and parentheses, so split after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const state = fields[0];
    const pgrp = Number(fields[2]);
    if (wanted.has(pgrp) && state !== 'Z' && state !== 'X') alive.add(pgrp);
  }
  return alive;
}

function signalAll(pgids: Iterable<number>, signal: GroupSignal): void {
  for (const g of pgids) {
    try {
      signalGroup(g, signal);
    } catch {
      // EPERM: not ours to signal any more; nothing more can be done here.
    }
  }
}

async function waitGone(pgids: number[], ms: number): Promise<Set<number>> {
  const deadline = Date.now() + ms;
  let alive = livingGroups(pgids);
  while (alive.size > 0 && Date.now() < deadline) {
    await sleep(POLL_MS);
    alive = livingGroups(alive);
  }
  return alive;
}

export class GroupSet {
  private readonly pgids = new Set<number>();

  add(pgid: number): void {
    this.prune();
    this.pgids.add(pgid);
  }

  get size(): number {
    return this.pgids.size;
  }

  /** Forgets the groups that no longer exist. */
  prune(): void {
    for (const g of this.pgids) if (!groupAlive(g)) this.pgids.delete(g);
  }

  /** SIGTERM to every group, SIGKILL after `graceMs` to those with a living member. Returns the count killed. */
  async endAll(graceMs: number): Promise<{ terminated: number; killed: number }> {
    const targets = [...this.pgids];
    this.pgids.clear();
    if (targets.length === 0) return { terminated: 0, killed: 0 };
    const alive = [...livingGroups(targets)];
    signalAll(alive, 'SIGTERM');
    const stubborn = [...(await waitGone(alive, graceMs))];
    if (stubborn.length > 0) {
      signalAll(stubborn, 'SIGKILL');
      await waitGone(stubborn, KILL_WAIT_MS);
    }
    return { terminated: alive.length, killed: stubborn.length };
  }

  /** SIGKILL to every group at once. */
  killAll(): void {
    signalAll(this.pgids, 'SIGKILL');
    this.pgids.clear();
  }
}
