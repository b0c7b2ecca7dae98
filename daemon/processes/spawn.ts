// Starting a child with execa: every child leads its own process group (detached), so a signal
// to the group reaches everything it started; output is not buffered by execa (the caller reads
// the streams); execa's exit-time cleanup and forced kills are off because this module ends
// groups itself. A command that cannot be started is a 400 the caller can act on.
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import type { Readable, Writable } from 'node:stream';
import { execa } from 'execa';
import { BadRequestError } from '../core/errors.js';
import type { ExitInfo } from './replay-buffer.js';
import { childEnv, cwdProblem, resolveCwd, resolveUser, type RunAs } from './user-env.js';

export interface LaunchSpec {
  command: string;
  args?: string[] | undefined;
  cwd?: string | undefined;
  env?: Record<string, string> | undefined;
  as_user?: string | undefined;
}

export interface Launched {
  pid: number;
  /** = pid: the child leads its own group. */
  pgid: number;
  user: RunAs;
  stdin: Writable;
  stdout: Readable;
  stderr: Readable;
  /** Resolves when the child itself has exited (its group may live on). */
  exit: Promise<ExitInfo>;
  /** Resolves when both output streams have ended. */
  outputEnded: Promise<void>;
}

export type GroupSignal = 'SIGTERM' | 'SIGKILL' | 'SIGINT' | 'SIGHUP';

/** Starts the child; throws BadRequestError when it cannot be started (unknown command, bad cwd or user). */
export async function launch(spec: LaunchSpec): Promise<Launched> {
  const user = resolveUser(spec.as_user);
  const cwd = resolveCwd(spec.cwd, user);
  const child = execa(spec.command, spec.args ?? [], {
    cwd,
    env: childEnv(user, spec.env),
    extendEnv: false,
    ...(user.switchUser ? { uid: user.uid, gid: user.gid } : {}),
    detached: true,
    cleanup: false,
    buffer: false,
    reject: false,
    encoding: 'buffer',
    stdin: 'pipe',
    stdout: 'pipe',
    stderr: 'pipe',
    forceKillAfterDelay: false,
    stripFinalNewline: false,
  });
  // execa's promise settles when the child and its streams are done; nothing waits on it here.
  child.catch(() => {});
  const cp = child as unknown as ChildProcess;
  if (child.pid === undefined) {
    const result = await child;
    throw spawnError(spec, user, cwd, (result as { code?: string }).code);
  }
  const { stdin, stdout, stderr } = cp;
  if (stdin === null || stdout === null || stderr === null) throw new Error('child without stdio pipes');
  const exit = new Promise<ExitInfo>((resolve) => {
    cp.once('exit', (code, signal) => resolve({ exit_code: code, signal }));
  });
  const ended = (s: Readable): Promise<void> =>
    s.readableEnded || s.destroyed ? Promise.resolve() : Promise.race([once(s, 'end').then(() => {}), once(s, 'close').then(() => {})]).catch(() => {});
  stdout.on('error', () => {});
  stderr.on('error', () => {});
  return {
    pid: child.pid,
    pgid: child.pid,
    user,
    stdin,
    stdout,
    stderr,
    exit,
    outputEnded: Promise.all([ended(stdout), ended(stderr)]).then(() => {}),
  };
}

/**
 * A 400 the caller can act on; anything else is a plain Error (a 500 whose cause is logged). The
 * child enters its cwd before it switches users and execs, and a failed chdir comes back with the
 * same errno as a failed exec (EACCES, ENOENT): the cwd is checked again so that its failure is
 * reported as the cwd's, not as the command's.
 */
function spawnError(spec: LaunchSpec, user: RunAs, cwd: string, code: string | undefined): Error {
  if (code === 'EACCES' || code === 'ENOENT' || code === 'ENOTDIR') {
    const problem = cwdProblem(cwd);
    if (problem !== null) return BadRequestError.field('cwd', problem);
  }
  switch (code) {
    case 'ENOENT':
      return BadRequestError.field('command', `not found: ${spec.command}${spec.command.includes('/') ? '' : ' (searched PATH)'}`);
    case 'EACCES': {
      const relative = spec.command.includes('/') && !spec.command.startsWith('/');
      const by = user.switchUser ? ` by ${user.name}` : '';
      const where = relative && user.switchUser ? `, or ${cwd} (where the relative path starts) is not searchable by that user` : '';
      return BadRequestError.field('command', `permission denied: ${spec.command} is not executable${by}${where}`);
    }
    case 'ENOEXEC':
      return BadRequestError.field('command', `${spec.command} is not an executable format`);
    case 'E2BIG':
      return BadRequestError.field('args', 'the arguments and environment are too long for the system (E2BIG)');
    case 'EPERM':
      return BadRequestError.field('as_user', `the daemon may not start processes as ${user.name} (EPERM)`);
    default:
      return new Error(`the process could not be started: ${code ?? 'unknown error'}`);
  }
}

/** Signals a whole process group. false when the group no longer exists (ESRCH). */
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
export function groupAlive(pgid: number): boolean {
  try {
    return signalGroup(pgid, 0);
  } catch {
    return true;
  }
}

/** After the child's exit: waits for its output to end, at most `graceMs` (a grandchild may keep the pipes open). */
export async function outputSettled(launched: Launched, graceMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([launched.outputEnded, new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)))]);
  clearTimeout(timer);
}
