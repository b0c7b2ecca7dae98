// The program of a terminal process, found before it starts. A child on a pseudo-terminal cannot
// report a failed exec other than by exiting 1 with a line on its terminal (node-pty's forkpty
// child), so the daemon looks the command up itself, the way execvp(3) would (PATH of the child's
// environment, a name with a slash taken relative to the working directory), and answers the
// same 400s a pipe process gets (command: not found / permission denied). What the check cannot
// see (a file that changes between the check and the exec, an interpreter that is missing) still
// shows as exit code 1 and the C library's message in the output.
import { accessSync, constants, statSync } from 'node:fs';
import path from 'node:path';
import { BadRequestError } from '../../core/errors.js';
import type { RunAs } from './user-env.js';

const DEFAULT_PATH = '/usr/local/bin:/usr/bin:/bin';

/** Why `user` may not execute `file` (null when it may): the mode bits as the kernel reads them. */
function execProblem(file: string, user: RunAs): 'missing' | 'not_executable' | null {
  let st;
  try {
    st = statSync(file);
  } catch {
    return 'missing';
  }
  if (!st.isFile()) return 'not_executable';
  if (!user.switchUser) {
    try {
      accessSync(file, constants.X_OK);
      return null;
    } catch {
      return 'not_executable';
    }
  }
  // Another user (the daemon runs as root): owner, group, other bits; root needs any x bit.
  const mode = st.mode;
  const bit = user.uid === 0 ? mode & 0o111 : user.uid === st.uid ? mode & 0o100 : user.gid === st.gid ? mode & 0o010 : mode & 0o001;
  return bit !== 0 ? null : 'not_executable';
}

/**
 * The absolute path execvp(3) would run for `command` in the child's environment, or a 400 naming
 * `command` (not found, or not executable by the user the process runs as).
 */
export function resolveCommand(command: string, envPath: string | undefined, cwd: string, user: RunAs): string {
  const by = user.switchUser ? ` by ${user.name}` : '';
  if (command.includes('/')) {
    const file = path.resolve(cwd, command);
    const problem = execProblem(file, user);
    if (problem === 'missing') throw BadRequestError.field('command', `not found: ${command}`);
    if (problem === 'not_executable') throw BadRequestError.field('command', `permission denied: ${command} is not executable${by}`);
    return file;
  }
  let denied: string | null = null;
  for (const dir of (envPath ?? DEFAULT_PATH).split(':')) {
    const file = path.resolve(cwd, dir === '' ? '.' : dir, command);
    const problem = execProblem(file, user);
    if (problem === null) return file;
    if (problem === 'not_executable') denied ??= file;
  }
  if (denied !== null) throw BadRequestError.field('command', `permission denied: ${denied} is not executable${by}`);
  throw BadRequestError.field('command', `not found: ${command} (searched PATH)`);
}
