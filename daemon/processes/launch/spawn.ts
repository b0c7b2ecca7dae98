// Starting a child of the processes API on one of the daemon's two launchers: pipes
// (core/process/launch.ts) or a pseudo-terminal (core/process/pty.ts). Either way the child leads
// its own session and process group, so a signal to the group (and the groups made in its session)
// reaches everything it started; `onSpawn` records the group synchronously once it exists. The
// rest of the module sees one face (Launched): the input, the output (one stream on a terminal),
// the exit, and for a terminal its size and resize. A command that cannot be started is a 400 the
// caller can act on.
import type { Readable, Writable } from 'node:stream';
import { BadRequestError, ForbiddenError, UnsupportedFieldError } from '../../core/errors.js';
import { launch as launchChild, SETPRIV_MISSING, SpawnError } from '../../core/process/launch.js';
import { launchPty } from '../../core/process/pty.js';
import { setprivPath } from '../../core/users.js';
import type { ExitInfo } from '../output/replay-buffer.js';
import { resolveCommand } from './command.js';
import { childEnv, cwdProblem, resolveCwd, resolveUser, type RunAs, type Users } from './user-env.js';

/** The scope that lets a request name root or the daemon's own user (as_root, as_user). */
export const ROOT_SCOPE = 'processes:root';

export interface LaunchSpec {
  command: string;
  args?: string[] | undefined;
  cwd?: string | null | undefined;
  env?: Record<string, string> | undefined;
  as_user?: string | null | undefined;
  as_root?: boolean | undefined;
  /** Run on a pseudo-terminal of this size (null or left out: pipes). */
  tty?: { rows: number; cols: number } | null | undefined;
}

interface Tty {
  /** The current size (after resizes). */
  readonly size: { rows: number; cols: number };
  /** false once the terminal is closed. */
  resize(rows: number, cols: number): boolean;
  /** Resolves if the session closed the terminal while the child lived (core/process/pty.ts holds it open until the exit). */
  closedBeforeExit: Promise<void>;
}

export interface Launched {
  pid: number;
  /** = pid: the child leads its own group and session. */
  pgid: number;
  user: RunAs;
  stdin: Writable;
  /** On a terminal: everything it prints (stdout, stderr, echo). */
  stdout: Readable;
  /** null on a terminal (one stream). */
  stderr: Readable | null;
  tty: Tty | null;
  /** Resolves when the child itself has exited (its group may live on). */
  exit: Promise<ExitInfo>;
  /** Resolves when the output streams have ended. */
  outputEnded: Promise<void>;
}

/** Who may be asked for: the agent user by default, and whether the request holds processes:root. */
export interface LaunchRights {
  users: Users;
  mayRunPrivileged: boolean;
}

/**
 * Starts the child; `onSpawn(pid)` runs synchronously once it exists (a throw ends it and fails
 * the launch). Throws BadRequestError when it cannot be started (unknown command, bad cwd or user),
 * UnsupportedFieldError for a field this daemon cannot honour (as_root when it may not switch
 * users), ForbiddenError (processes:root) for root or the daemon's own user without that scope.
 */
export async function launch(spec: LaunchSpec, onSpawn: (pid: number) => void, rights: LaunchRights): Promise<Launched> {
  const user = await resolveUser(spec.as_user ?? undefined, spec.as_root === true, rights.users);
  if (user.privileged && (spec.as_root === true || spec.as_user != null) && !rights.mayRunPrivileged) throw new ForbiddenError(ROOT_SCOPE);
  const cwd = resolveCwd(spec.cwd ?? undefined, user);
  const env = childEnv(user, spec.env, spec.tty != null);
  if (spec.tty != null) return launchOnTty(spec, spec.tty, user, cwd, env, onSpawn);
  // Another user: setpriv execs the command, so a command it cannot run is found here (as on a terminal).
  const command = user.switchUser ? resolveCommand(spec.command, env.PATH, cwd, user) : spec.command;
  let child;
  try {
    child = await launchChild({
      command,
      args: spec.args ?? [],
      cwd,
      env,
      ...(user.switchUser ? { user: { uid: user.uid, gid: user.gid } } : {}),
      onSpawn,
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
    tty: null,
    exit: child.exit.then((e) => ({ exit_code: e.code, signal: e.signal })),
    outputEnded: child.outputEnded,
  };
}

/**
 * On a terminal: the command is looked up first (command.ts); another user is switched to by
 * setpriv(1) (core/users.ts: real, effective and saved ids, the user's own supplementary groups,
 * no capabilities), as for pipes.
 */
function launchOnTty(
  spec: LaunchSpec,
  size: { rows: number; cols: number },
  user: RunAs,
  cwd: string,
  env: Record<string, string>,
  onSpawn: (pid: number) => void,
): Launched {
  const command = resolveCommand(spec.command, env.PATH, cwd, user);
  if (user.switchUser && setprivPath() === null) throw new UnsupportedFieldError('as_user', `a process runs as another user: ${SETPRIV_MISSING}`);
  let child;
  try {
    child = launchPty({ command, args: spec.args ?? [], env, cwd, rows: size.rows, cols: size.cols, onSpawn, ...(user.switchUser ? { user: { uid: user.uid, gid: user.gid } } : {}) });
  } catch (err) {
    if (err instanceof SpawnError) throw new Error(`the terminal could not be started: ${err.message}`, { cause: err });
    throw err;
  }
  return {
    pid: child.pid,
    pgid: child.pgid,
    user,
    stdin: child.input,
    stdout: child.output,
    stderr: null,
    tty: { size: child.size, resize: (rows, cols) => child.resize(rows, cols), closedBeforeExit: child.closedBeforeExit },
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
