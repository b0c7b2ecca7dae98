// The one way the daemon starts a child (Chromium and the processes API alike), in the manner of
// Playwright's launcher: the child leads its own session and process group (setsid), so one signal
// reaches everything it starts; its pipes are handed back with their error listeners already on
// (EPIPE, a destroyed stream: never an uncaught exception); the start resolves only once the
// kernel has started it, and a child that cannot be started is a SpawnError naming the errno.
import { spawn, type ChildProcess, type StdioPipe, type StdioNull } from 'node:child_process';
import { once } from 'node:events';
import { statSync } from 'node:fs';
import type { Readable, Writable } from 'node:stream';
import { setprivPath, switchArgv, type SwitchTo } from '../users.js';

export interface LaunchSpec {
  command: string;
  args: readonly string[];
  env: NodeJS.ProcessEnv;
  cwd?: string;
  /** Run as this user (through setpriv: core/users.ts); needs root or CAP_SETUID and CAP_SETGID. */
  user?: SwitchTo;
  /** stdin as a pipe (default) or closed. */
  stdin?: 'pipe' | 'ignore';
  /** Extra pipes after stderr: fd 3, 4, ... (Chromium's --remote-debugging-pipe takes two). */
  extraPipes?: number;
  /**
   * Called synchronously once the child exists (its exec succeeded), before anything awaits: to
   * record it durably. A throw ends the child's group (SIGKILL) and fails the launch.
   */
  onSpawn?(pid: number): void;
}

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
  at: Date;
}

/** A child that could not be started at all; `errno` is the cause (ENOENT, EACCES, ...). */
export class SpawnError extends Error {
  constructor(
    readonly command: string,
    readonly errno: string | undefined,
    cause: unknown,
  ) {
    super(`cannot start ${command}: ${errno ?? (cause as Error).message}`, { cause });
    this.name = 'SpawnError';
  }
}

export interface Child {
  readonly pid: number;
  /** = pid: the child leads its own process group (and session). */
  readonly pgid: number;
  readonly spawnedAt: Date;
  readonly stdin: Writable | null;
  readonly stdout: Readable;
  readonly stderr: Readable;
  /** fd 3, 4, ... of the child, when `extraPipes` asked for them. */
  readonly extra: (Readable & Writable)[];
  /** Resolves when the child itself has exited (its group may live on). */
  readonly exit: Promise<ExitInfo>;
  /** The exit, once it happened. */
  readonly exitInfo: ExitInfo | null;
  /** Resolves when stdout and stderr have both ended (a grandchild may hold them open longer). */
  readonly outputEnded: Promise<void>;
}

/** SIGKILL to the group of a child that was just started and must not run (ESRCH: it is gone already). */
export function killGroupNow(pgid: number): void {
  try {
    process.kill(-pgid, 'SIGKILL');
  } catch {
    // gone already
  }
}

function ended(s: Readable): Promise<void> {
  if (s.readableEnded || s.destroyed) return Promise.resolve();
  return Promise.race([once(s, 'end'), once(s, 'close')]).then(
    () => undefined,
    () => undefined,
  );
}

/** Descriptors of the daemon that must not reach a child (core/harden.ts): each child gets a dead pipe there instead. */
let covered: readonly number[] = [];

/** Sets the descriptors every child gets covered (the systemd notify socket, inherited without close-on-exec). */
export function coverInChildren(fds: readonly number[]): void {
  covered = [...fds].sort((a, b) => a - b);
}

/**
 * The one way a child starts as another user (on pipes and on a terminal alike): the command run
 * through setpriv(1) (core/users.ts switchArgv); without `user`, the command as it is. Throws
 * SpawnError when the command is missing (setpriv execs it: a missing one would show only as its
 * exit 127) or setpriv is not on the daemon's PATH (errno ENOENT).
 */
export function argvAs(spec: { command: string; args: readonly string[]; user?: SwitchTo }): { command: string; args: string[] } {
  if (spec.user === undefined) return { command: spec.command, args: [...spec.args] };
  try {
    statSync(spec.command);
  } catch (err) {
    throw new SpawnError(spec.command, (err as NodeJS.ErrnoException).code, err);
  }
  const setpriv = setprivPath();
  if (setpriv === null) throw new SpawnError(spec.command, 'ENOENT', new Error(SETPRIV_MISSING));
  return switchArgv(setpriv, spec.user, spec.command, spec.args);
}

export const SETPRIV_MISSING = "setpriv(1) (util-linux), which starts children as another user, is not on the daemon's PATH";

export async function launch(spec: LaunchSpec): Promise<Child> {
  const pipes: (StdioPipe | StdioNull)[] = [spec.stdin ?? 'pipe', 'pipe', 'pipe'];
  for (let i = 0; i < (spec.extraPipes ?? 0); i++) pipes.push('pipe');
  const ownPipes = pipes.length;
  // An inheritable descriptor of the daemon is replaced in the child by a pipe (closed on our side below).
  for (const fd of covered) {
    if (fd < pipes.length) continue;
    while (pipes.length < fd) pipes.push('ignore');
    pipes.push('pipe');
  }
  const argv = argvAs(spec);
  let cp: ChildProcess;
  try {
    cp = spawn(argv.command, argv.args, {
      env: spec.env,
      cwd: spec.cwd,
      detached: true, // setsid(): own session and process group
      stdio: pipes,
    });
  } catch (err) {
    // Synchronous failures (EINVAL, a bad argument type) are a spawn failure too.
    throw new SpawnError(spec.command, (err as NodeJS.ErrnoException).code, err);
  }
  // Errors on any stream arrive through the operations that use them; these listeners only keep
  // an 'error' event from becoming an uncaught exception.
  for (const s of cp.stdio) s?.on('error', () => {});
  for (const s of cp.stdio.slice(ownPipes)) s?.destroy();
  if (cp.pid !== undefined && spec.onSpawn !== undefined) {
    try {
      spec.onSpawn(cp.pid);
    } catch (err) {
      cp.on('error', () => {});
      killGroupNow(cp.pid);
      throw err;
    }
  }
  await new Promise<void>((resolve, reject) => {
    cp.once('spawn', resolve);
    cp.once('error', (err: NodeJS.ErrnoException) => reject(new SpawnError(spec.command, err.code, err)));
  });
  cp.on('error', () => {}); // kill() errors after the start: callers check ESRCH themselves
  const { stdout, stderr } = cp;
  if (stdout === null || stderr === null) throw new Error('child without output pipes');
  let exitInfo: ExitInfo | null = null;
  const exit = new Promise<ExitInfo>((resolve) =>
    cp.once('exit', (code, signal) => {
      exitInfo = { code, signal, at: new Date() };
      resolve(exitInfo);
    }),
  );
  const pid = cp.pid as number;
  return {
    pid,
    pgid: pid,
    spawnedAt: new Date(),
    stdin: cp.stdin,
    stdout,
    stderr,
    extra: cp.stdio.slice(3, ownPipes) as (Readable & Writable)[],
    exit,
    get exitInfo() {
      return exitInfo;
    },
    outputEnded: Promise.all([ended(stdout), ended(stderr)]).then(() => undefined),
  };
}
