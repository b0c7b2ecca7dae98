// The daemon's one kill escalation: a signal (SIGTERM) to every target that lives, a grace period
// for them to end, SIGKILL to those that did not, and a last wait for the kernel to take them down.
// A target is whatever can be signalled and checked as one: a process group (group.ts), the
// session of a spawned process, the Chromium processes left on a profile, a recorded group of an
// earlier run. The checks of all targets run together, so targets that read /proc share one scan.
import { setTimeout as sleep } from 'node:timers/promises';

export type KillSignal = 'SIGTERM' | 'SIGKILL' | 'SIGINT' | 'SIGHUP';

/** What escalate() ends. */
export interface Killable {
  /** Resolves true while anything of it lives (checked afresh at each call). */
  alive(): Promise<boolean>;
  /** Sends `signal` to what lives of it; an error it cannot act on (EPERM) is its own to swallow or throw. */
  signal(signal: KillSignal): void;
  /**
   * Settles when it may have ended (a leader's exit event): while it is pending, only it (or the
   * end of the wait) prompts a check; once it has settled, the target is checked every `pollMs`.
   * Without it, every `pollMs` from the start.
   */
  readonly ended?: Promise<unknown>;
}

interface EscalateOptions {
  /** From the first signal to SIGKILL; 0 (or less): SIGKILL at once, no first signal. */
  graceMs: number;
  /** After SIGKILL, how long to wait for the targets to vanish. */
  killWaitMs: number;
  /** The first signal (default SIGTERM). */
  signal?: KillSignal;
  /** How often the targets are checked while waiting (default 20 ms). */
  pollMs?: number;
}

interface Escalation<T> {
  /** The targets alive at the start: each got the first signal (or SIGKILL, with no grace). */
  signalled: T[];
  /** Those still alive after the grace: they got SIGKILL. */
  killed: T[];
  /** Those still alive `killWaitMs` after SIGKILL (none, normally). */
  survivors: T[];
}

const POLL_MS = 20;

/** Ends `targets`: the first signal, SIGKILL after `graceMs` to those still alive, then waits `killWaitMs`. */
export async function escalate<T extends Killable>(targets: readonly T[], opts: EscalateOptions): Promise<Escalation<T>> {
  const pollMs = opts.pollMs ?? POLL_MS;
  const signalled = await living(targets);
  let left = signalled;
  if (left.length > 0 && opts.graceMs > 0) {
    for (const t of left) t.signal(opts.signal ?? 'SIGTERM');
    left = await waitGone(left, opts.graceMs, pollMs);
  }
  const killed = left;
  if (killed.length > 0) {
    for (const t of killed) t.signal('SIGKILL');
    left = await waitGone(killed, opts.killWaitMs, pollMs);
  }
  return { signalled, killed, survivors: left };
}

/** The targets among `targets` that are alive now (checked together). */
async function living<T extends Killable>(targets: readonly T[]): Promise<T[]> {
  const alive = await Promise.all(targets.map((t) => t.alive()));
  return targets.filter((_, i) => alive[i]);
}

/** Those of `targets` still alive after `ms` (none as soon as all are gone). */
async function waitGone<T extends Killable>(targets: T[], ms: number, pollMs: number): Promise<T[]> {
  const until = Date.now() + ms;
  const settled = new WeakSet<Killable>();
  for (const t of targets) void t.ended?.then(() => settled.add(t), () => settled.add(t));
  let left = targets;
  for (;;) {
    const remaining = until - Date.now();
    if (remaining <= 0) return living(left);
    const stop = new AbortController();
    // Wake at the next poll, or, while every target still has a pending `ended`, at the first of them.
    const pending = left.filter((t) => t.ended !== undefined && !settled.has(t));
    const wakes: Promise<unknown>[] = pending.map((t) => (t.ended as Promise<unknown>).catch(() => undefined));
    const polled = pending.length < left.length;
    wakes.push(sleep(polled ? Math.min(pollMs, remaining) : remaining, undefined, { signal: stop.signal }).catch(() => undefined));
    await Promise.race(wakes);
    stop.abort();
    left = await living(left);
    if (left.length === 0) return left;
  }
}
