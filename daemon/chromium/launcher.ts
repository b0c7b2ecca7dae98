// A generic process launcher (it knows nothing of browsers), in the manner of Playwright's:
// the child runs detached in its own process group; its stdout and stderr are split into lines,
// kept in a bounded ring buffer and handed to a listener; readiness is raced against exit, a
// spawn error, a deadline and an abort signal; stop sends SIGTERM to the whole group, SIGKILL
// after a grace period, treats ESRCH as done and waits until every member of the group is gone.
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { LineSplitter, RingBuffer } from './output.js';

/** How long to wait for the group to vanish after SIGKILL before giving up with an error. */
const KILL_WAIT_MS = 10_000;
/** How often the group is polled while waiting for it to vanish. */
const GROUP_POLL_MS = 20;
/** After the leader exits, how long to wait for the rest of its output before reporting. */
const OUTPUT_SETTLE_MS = 500;

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
  at: Date;
}

export type LaunchFailure = 'spawn' | 'exit' | 'timeout' | 'aborted' | 'probe';

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

export interface LaunchSpec {
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  cwd?: string;
  /** Lines kept for launch errors (default 100). */
  outputLines?: number;
  /** Every line of stdout and stderr, as it arrives. */
  onLine?: (line: string, stream: 'stdout' | 'stderr') => void;
}

/** Starts the child; rejects with LaunchError('spawn') when it cannot be started at all. */
export async function launch(spec: LaunchSpec): Promise<LaunchedProcess> {
  const child = spawn(spec.command, spec.args, {
    env: spec.env,
    cwd: spec.cwd,
    detached: true, // setsid(): own session and process group, so the group can be signalled as one
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  await new Promise<void>((resolve, reject) => {
    child.once('spawn', resolve);
    child.once('error', (err: NodeJS.ErrnoException) => {
      reject(new LaunchError(`cannot start ${spec.command}: ${err.code ?? err.message}`, 'spawn', [], { errno: err.code, cause: err }));
    });
  });
  return new LaunchedProcess(child, spec);
}

export class LaunchedProcess {
  readonly pid: number;
  readonly output: RingBuffer;
  readonly spawnedAt = new Date();
  /** Resolves when the group leader has exited (other members may still run). */
  readonly exited: Promise<ExitInfo>;
  private exit: ExitInfo | null = null;
  private readonly closed: Promise<void>;
  private readonly lineListeners = new Set<(line: string) => void>();
  private groupGone = false;
  private stopping: Promise<void> | null = null;

  constructor(
    private readonly child: ChildProcess,
    spec: LaunchSpec,
  ) {
    this.pid = child.pid as number;
    this.output = new RingBuffer(spec.outputLines ?? 100);
    child.on('error', () => {}); // kill() errors after spawn are handled by ESRCH checks below
    this.exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        this.exit = { code, signal, at: new Date() };
        resolve(this.exit);
      }),
    );
    this.closed = new Promise((resolve) => child.once('close', () => resolve()));
    for (const stream of ['stdout', 'stderr'] as const) {
      const splitter = new LineSplitter((line) => {
        this.output.push(line);
        spec.onLine?.(line, stream);
        for (const l of this.lineListeners) l(line);
      });
      child[stream]?.on('data', (chunk: Buffer) => splitter.write(chunk));
      child[stream]?.on('end', () => splitter.end());
    }
  }

  get exitInfo(): ExitInfo | null {
    return this.exit;
  }

  /** Resolves with the first line (already seen or to come) that `parse` accepts. */
  waitForLine<T>(parse: (line: string) => T | null, signal: AbortSignal): Promise<T> {
    for (const line of this.output.lines()) {
      const v = parse(line);
      if (v !== null) return Promise.resolve(v);
    }
    return new Promise((resolve, reject) => {
      const listener = (line: string): void => {
        const v = parse(line);
        if (v === null) return;
        this.lineListeners.delete(listener);
        resolve(v);
      };
      this.lineListeners.add(listener);
      signal.addEventListener(
        'abort',
        () => {
          this.lineListeners.delete(listener);
          reject(signal.reason as Error);
        },
        { once: true },
      );
    });
  }

  /**
   * Races `probe` against the leader's exit, `deadlineMs` and `signal`. On any failure the group is
   * stopped (SIGTERM, SIGKILL after `graceMs`) and a LaunchError with the last output lines is thrown.
   */
  async waitReady<T>(probe: (signal: AbortSignal) => Promise<T>, opts: { deadlineMs: number; graceMs: number; signal?: AbortSignal }): Promise<T> {
    const probeAbort = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    const failure = new Promise<never>((_resolve, reject) => {
      void this.exited.then((e) => reject(new LaunchError(`exited ${describeExit(e)} before it was ready`, 'exit', [], { exit: e })));
      timer = setTimeout(() => reject(new LaunchError(`not ready within ${opts.deadlineMs} ms`, 'timeout', [])), opts.deadlineMs);
      onAbort = () => reject(new LaunchError('launch aborted', 'aborted', []));
      if (opts.signal?.aborted) onAbort();
      else opts.signal?.addEventListener('abort', onAbort, { once: true });
    });
    failure.catch(() => {});
    try {
      return await Promise.race([probe(probeAbort.signal), failure]);
    } catch (err) {
      probeAbort.abort(new Error('readiness abandoned'));
      await this.stop(opts.graceMs);
      await Promise.race([this.closed, sleep(OUTPUT_SETTLE_MS)]);
      const output = this.output.lines();
      if (err instanceof LaunchError) throw new LaunchError(err.message, err.kind, output, { ...err.extra, exit: this.exit ?? undefined });
      throw new LaunchError(`not ready: ${(err as Error).message}`, 'probe', output, { exit: this.exit ?? undefined, cause: err });
    } finally {
      clearTimeout(timer);
      if (onAbort) opts.signal?.removeEventListener('abort', onAbort);
    }
  }

  /** SIGTERM to the group, SIGKILL after `graceMs`; resolves once every member is gone. Idempotent. */
  stop(graceMs: number): Promise<void> {
    this.stopping ??= (async () => {
      if (this.signalGroup('SIGTERM') && !(await this.waitGroupGone(graceMs))) {
        this.signalGroup('SIGKILL');
        if (!(await this.waitGroupGone(KILL_WAIT_MS))) {
          throw new Error(`process group ${this.pid} still has members ${KILL_WAIT_MS} ms after SIGKILL`);
        }
      }
      this.groupGone = true;
      await this.exited;
    })();
    return this.stopping;
  }

  /** SIGKILL to the group now, without waiting. */
  killNow(): void {
    this.signalGroup('SIGKILL');
  }

  /** false when the group is already gone (ESRCH). */
  private signalGroup(signal: NodeJS.Signals): boolean {
    if (this.groupGone) return false;
    try {
      process.kill(-this.pid, signal);
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ESRCH') {
        this.groupGone = true;
        return false;
      }
      throw err;
    }
  }

  private async waitGroupGone(timeoutMs: number): Promise<boolean> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      if (!groupAlive(this.pid)) {
        this.groupGone = true;
        return true;
      }
      if (Date.now() >= until) return false;
      await sleep(GROUP_POLL_MS);
    }
  }
}

export function describeExit(e: { code: number | null; signal: string | null }): string {
  return e.signal !== null ? `on signal ${e.signal}` : `with code ${e.code}`;
}

/** true while the group has a member that is not a zombie (zombies may wait long for a reaper). */
export function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw err;
  }
  return listProcesses().some((p) => p.pgid === pgid && p.state !== 'Z');
}

export interface ProcInfo {
  pid: number;
  ppid: number;
  pgid: number;
  state: string;
}

/** Every process in /proc (Linux), from /proc/PID/stat; those that vanish while reading are skipped. */
export function listProcesses(): ProcInfo[] {
  const out: ProcInfo[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue;
    }
    // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses, so parse after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    out.push({ pid: Number(name), state: fields[0] ?? '?', ppid: Number(fields[1]), pgid: Number(fields[2]) });
  }
  return out;
}
