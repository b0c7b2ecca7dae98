// A supervised child (it knows nothing of browsers), on the daemon's one process launcher
// (core/process/launch.ts): its stdout and stderr are split into lines, kept in a bounded ring and
// handed to a listener; readiness is a probe raced against the child's exit, one deadline and an
// abort signal; stop sends SIGTERM to the whole group, SIGKILL after a grace period, and resolves
// once every member of the group is gone.
import { setTimeout as sleep } from 'node:timers/promises';
import { escalate, type KillSignal } from '../../core/process/kill.js';
import { type Deadline, DeadlineError } from '../../core/deadline.js';
import { launch as launchChild, SpawnError, type Child, type ExitInfo, type LaunchSpec as ChildSpec } from '../../core/process/launch.js';
import { groupAlive, signalGroup } from '../../core/process/group.js';
import { LineSplitter, RingBuffer } from './output.js';

export type { ExitInfo };

/** How long to wait for the group to vanish after SIGKILL before giving up with an error. */
const KILL_WAIT_MS = 10_000;
/** After a failed probe, how long to wait for an exit that may be its cause. */
const EXIT_SETTLE_MS = 200;
/** After the leader exits, how long to wait for the rest of its output before reporting. */
const OUTPUT_SETTLE_MS = 500;
/**
 * Once the leader has exited (an exit event, not a poll), how often the rest of the group is
 * looked for: the members end within milliseconds of it (a restart waits on this).
 */
const AFTER_LEADER_POLL_MS = 5;

type LaunchFailure = 'spawn' | 'exit' | 'timeout' | 'aborted' | 'probe';

/** Why a child did not start or did not become ready; `output` holds its last lines. */
export class LaunchError extends Error {
  constructor(
    message: string,
    readonly kind: LaunchFailure,
    readonly output: string[],
    readonly extra: { exit?: ExitInfo; errno?: string; cause?: unknown } = {},
  ) {
    super(message, extra.cause === undefined ? undefined : { cause: extra.cause });
    this.name = 'LaunchError';
  }
}

export interface LaunchSpec extends Omit<ChildSpec, 'stdin'> {
  /** Lines kept for launch errors (default 100). */
  outputLines?: number;
  /** Every line of stdout and stderr, as it arrives. */
  onLine?: (line: string, stream: 'stdout' | 'stderr') => void;
}

/** Starts the child (stdin closed); rejects with LaunchError('spawn') when it cannot be started at all. */
export async function launch(spec: LaunchSpec): Promise<LaunchedProcess> {
  try {
    return new LaunchedProcess(await launchChild({ ...spec, stdin: 'ignore' }), spec);
  } catch (err) {
    if (err instanceof SpawnError) throw new LaunchError(err.message, 'spawn', [], { errno: err.errno, cause: err });
    throw err;
  }
}

export class LaunchedProcess {
  readonly pid: number;
  readonly output: RingBuffer;
  readonly spawnedAt: Date;
  /** Resolves when the group leader has exited (other members may still run). */
  readonly exited: Promise<ExitInfo>;
  private readonly closed: Promise<void>;
  private groupGone = false;
  private stopping: Promise<void> | null = null;

  constructor(
    readonly child: Child,
    spec: LaunchSpec,
  ) {
    this.pid = child.pid;
    this.spawnedAt = child.spawnedAt;
    this.output = new RingBuffer(spec.outputLines ?? 100);
    this.exited = child.exit;
    this.closed = child.outputEnded;
    for (const stream of ['stdout', 'stderr'] as const) {
      const splitter = new LineSplitter((line) => {
        this.output.push(line);
        spec.onLine?.(line, stream);
      });
      child[stream].on('data', (chunk: Buffer) => splitter.write(chunk));
      child[stream].on('end', () => splitter.end());
    }
  }

  get exitInfo(): ExitInfo | null {
    return this.child.exitInfo;
  }

  /**
   * Races `probe` against the leader's exit and `deadline`. On any failure the group is stopped
   * (SIGTERM, SIGKILL after `graceMs`) and a LaunchError with the last output lines is thrown.
   */
  async waitReady<T>(probe: (deadline: Deadline) => Promise<T>, deadline: Deadline, graceMs: number): Promise<T> {
    const exited = this.exited.then((e) => {
      throw new LaunchError(`exited ${describeExit(e)} before it was ready`, 'exit', [], { exit: e });
    });
    exited.catch(() => {});
    try {
      return await deadline.race(Promise.race([probe(deadline), exited]));
    } catch (err) {
      // A probe that failed because the child is going away (its pipe closed first): its exit is the cause.
      if (this.exitInfo === null && !(err instanceof DeadlineError)) await Promise.race([this.exited, sleep(EXIT_SETTLE_MS)]);
      const exitedBefore = this.exitInfo;
      await this.stop(graceMs);
      await Promise.race([this.closed, sleep(OUTPUT_SETTLE_MS)]);
      const output = this.output.lines();
      const exit = this.exitInfo ?? undefined;
      if (err instanceof LaunchError) throw new LaunchError(err.message, err.kind, output, { ...err.extra, exit });
      if (err instanceof DeadlineError) {
        throw err.timedOut
          ? new LaunchError(`not ready within ${deadline.what}`, 'timeout', output, { exit })
          : new LaunchError('launch aborted', 'aborted', output, { exit });
      }
      // The probe failed because the child went away meanwhile: that is its exit.
      if (exitedBefore !== null && exit !== undefined) throw new LaunchError(`exited ${describeExit(exit)} before it was ready`, 'exit', output, { exit });
      throw new LaunchError(`not ready: ${(err as Error).message}`, 'probe', output, { exit, cause: err });
    }
  }

  /** SIGTERM to the group, SIGKILL after `graceMs`; resolves once every member is gone. Idempotent. */
  stop(graceMs: number): Promise<void> {
    this.stopping ??= (async () => {
      // The leader's exit event first, then a short poll of the rest of the group.
      const group = { alive: () => this.groupAlive(), signal: (sig: KillSignal) => void this.signal(sig), ended: this.exited };
      const { survivors } = await escalate([group], { graceMs, killWaitMs: KILL_WAIT_MS, pollMs: AFTER_LEADER_POLL_MS });
      if (survivors.length > 0) throw new Error(`process group ${this.pid} still has members ${KILL_WAIT_MS} ms after SIGKILL`);
      this.groupGone = true;
      await this.exited;
    })();
    return this.stopping;
  }

  /** SIGKILL to the group now, without waiting. */
  killNow(): void {
    this.signal('SIGKILL');
  }

  /** true while a member of the group lives. */
  private async groupAlive(): Promise<boolean> {
    return !this.groupGone && (await groupAlive(this.pid));
  }

  /** false when the group is already gone (ESRCH). */
  private signal(sig: KillSignal): boolean {
    if (this.groupGone) return false;
    if (signalGroup(this.pid, sig)) return true;
    this.groupGone = true;
    return false;
  }
}

export function describeExit(e: { code: number | null; signal: string | null }): string {
  return e.signal !== null ? `on signal ${e.signal}` : `with code ${e.code}`;
}
