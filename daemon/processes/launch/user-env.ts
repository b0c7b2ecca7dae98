// Who a child runs as and with which environment. By default the agent user (docs/security.md);
// root and the daemon's own user only when named (scope processes:root). The daemon's own
// environment (which holds BROWSERD_TOKEN and other secrets) is never passed on: a child starts
// from a minimal environment (PATH, LANG, TZ of the daemon; HOME, USER, LOGNAME, SHELL of the user
// it runs as) and the request's `env` is merged over it.
import { accessSync, constants, statSync } from 'node:fs';
import { BadRequestError, UnsupportedFieldError } from '../../core/errors.js';
import { daemonUser, lookupUserCached, type UserEntry } from '../../core/users.js';

export interface RunAs extends UserEntry {
  /** true when the child must switch users (another uid or gid than the daemon's). */
  switchUser: boolean;
  /** root, or the daemon's own uid: named explicitly, only with scope processes:root. */
  privileged: boolean;
}

/** Who children run as by default, and whether the daemon may switch users (config.agent). */
export interface Users {
  agent: UserEntry;
  maySwitch: boolean;
}

const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

function runAs(user: UserEntry, me: UserEntry): RunAs {
  return { ...user, switchUser: user.uid !== me.uid || user.gid !== me.gid, privileged: user.uid === 0 || user.uid === me.uid };
}

/**
 * The user a child runs as: the agent user (BROWSERD_AGENT_USER) when neither is given; root for
 * `asRoot` (a daemon that may not switch users: 422 unsupported_field as_root); else the named
 * user of /etc/passwd (400 `as_user: …` when unknown, or when the daemon may not switch users).
 * Both at once: 400. Whether the caller may ask for a privileged user (RunAs.privileged) is the
 * caller's check.
 */
export async function resolveUser(asUser: string | undefined, asRoot: boolean, users: Users, passwdFile = '/etc/passwd'): Promise<RunAs> {
  const me = daemonUser();
  if (asRoot) {
    if (asUser !== undefined) throw BadRequestError.field('as_root', `true cannot be combined with as_user ("${asUser}"): give one of them`);
    if (me.uid === 0) return runAs(me, me);
    if (!users.maySwitch) {
      throw new UnsupportedFieldError(
        'as_root',
        `the daemon runs as uid ${me.uid} (${me.name}), not root, and without CAP_SETUID it cannot start a process as root; the command was not run`,
      );
    }
    return runAs((await lookupUserCached('root', passwdFile)) ?? { name: 'root', uid: 0, gid: 0, home: '/root', shell: '/bin/sh' }, me);
  }
  if (asUser === undefined) return runAs(users.agent, me);
  if (asUser === me.name) return runAs(me, me);
  const user = await lookupUserCached(asUser, passwdFile);
  if (user === null) throw BadRequestError.field('as_user', `no user "${asUser}" in ${passwdFile}`);
  const r = runAs(user, me);
  if (r.switchUser && !users.maySwitch) {
    throw BadRequestError.field('as_user', `the daemon runs as uid ${me.uid} without CAP_SETUID and CAP_SETGID and cannot start processes as "${asUser}"`);
  }
  return r;
}

/** The child's environment: the minimal base, then the request's `env` over it (and TERM for a terminal, unless `env` sets it). */
export function childEnv(user: RunAs, extra: Record<string, string> | undefined, tty = false): Record<string, string> {
  const env: Record<string, string> = {
    PATH: process.env.PATH || DEFAULT_PATH,
    LANG: process.env.LANG || 'C.UTF-8',
    HOME: user.home,
    USER: user.name,
    LOGNAME: user.name,
    SHELL: user.shell,
  };
  if (process.env.TZ) env.TZ = process.env.TZ;
  if (tty) env.TERM = 'xterm-256color';
  return { ...env, ...extra };
}

/**
 * Why the child could not enter `dir`, or null when it can. The child enters its working
 * directory with the daemon's own rights, before it switches to `as_user`, so the check is the
 * daemon's (access(2), X_OK).
 */
export function cwdProblem(dir: string): string | null {
  try {
    if (!statSync(dir).isDirectory()) return `${dir} is not a directory`;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EACCES') return `permission denied: ${dir} cannot be reached by the daemon (uid ${process.getuid?.() ?? '?'})`;
    return `${dir} is not an existing directory`;
  }
  try {
    accessSync(dir, constants.X_OK);
    return null;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    return `permission denied: ${dir} cannot be entered by the daemon (uid ${process.getuid?.() ?? '?'}, ${code})`;
  }
}

/** The working directory: `cwd` (an existing directory the child can enter: else 400 cwd), else the user's home, else `/`. */
export function resolveCwd(cwd: string | undefined, user: RunAs): string {
  if (cwd !== undefined) {
    const problem = cwdProblem(cwd);
    if (problem !== null) throw BadRequestError.field('cwd', problem);
    return cwd;
  }
  return cwdProblem(user.home) === null ? user.home : '/';
}
