// Starting a child of the processes API on the daemon's one launcher (core/process/launch.ts):
// every child leads its own process group, so a signal to the group reaches everything it
// started; the caller reads the streams. A command that cannot be started is a 400 the caller can
// act on.
import type { Readable, Writable } from 'node:stream';
import { BadRequestError } from '../../core/errors.js';
import { launch as launchChild, SpawnError } from '../../core/process/launch.js';
import type { ExitInfo } from '../output/replay-buffer.js';
import { childEnv, cwdProblem, resolveCwd, resolveUser, type RunAs } from './user-env.js';

export interface LaunchSpec {
  command: string;
  args?: string[] | undefined;
  cwd?: string | null | undefined;
  env?: Record<string, string> | undefined;
  as_user?: string | null | undefined;
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

/** Starts the child; throws BadRequestError when it cannot be started (unknown command, bad cwd or user). */
export async function launch(spec: LaunchSpec): Promise<Launched> {
  const user = resolveUser(spec.as_user ?? undefined);
  const cwd = resolveCwd(spec.cwd ?? undefined, user);
  let child;
  try {
    child = await launchChild({
      command: spec.command,
      args: spec.args ?? [],
      cwd,
      env: childEnv(user, spec.env),
      ...(user.switchUser ? { uid: user.uid, gid: user.gid } : {}),
    });
  } catch (err) {
    if (err instanceof SpawnError) throw spawnError(spec, user, cwd, err.errno);
    throw err;
  }
  if (child.stdin === null) throw new Error('child without a stdin pipe');
  return {
    pid: child.pid,
    pgid: child.pgid,
    user,
    stdin: child.stdin,
    stdout: child.stdout,
    stderr: child.stderr,
    exit: child.exit.then((e) => ({ exit_code: e.code, signal: e.signal })),
    outputEnded: child.outputEnded,
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

/** After the child's exit: waits for its output to end, at most `graceMs` (a grandchild may keep the pipes open). */
export async function outputSettled(launched: Launched, graceMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([launched.outputEnded, new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)))]);
  clearTimeout(timer);
}
