// Who a child runs as and with which environment. The daemon's own environment (which holds
// BROWSERD_TOKEN and other secrets) is never passed on: a child starts from a minimal environment
// (PATH, LANG, TZ of the daemon; HOME, USER, LOGNAME, SHELL of the user it runs as) and the
// request's `env` is merged over it.
import { accessSync, constants, statSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { userInfo } from 'node:os';
import { BadRequestError, UnsupportedFieldError } from '../../core/errors.js';

export interface RunAs {
  name: string;
  uid: number;
  gid: number;
  home: string;
  shell: string;
  /** true when the child must switch uid/gid (a user other than the daemon's). */
  switchUser: boolean;
}

const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** The daemon's own user. */
function currentUser(): RunAs {
  const info = userInfo();
  return {
    name: info.username,
    uid: info.uid,
    gid: info.gid,
    home: info.homedir,
    shell: info.shell ?? '/bin/sh',
    switchUser: false,
  };
}

/** A passwd file as read last: its users by name, and what tells a changed file (a stat). */
interface PasswdCache {
  file: string;
  version: string;
  users: Map<string, RunAs | null>;
}
let passwd: PasswdCache | null = null;

/**
 * One line of /etc/passwd for `name`, or null. The file is read again only when it changed (its
 * inode, size or mtime differ: useradd writes a new file and renames it over the old one); each
 * spawn costs one asynchronous stat.
 */
async function lookupPasswd(name: string, passwdFile: string): Promise<RunAs | null> {
  let version: string;
  try {
    const st = await stat(passwdFile, { bigint: true });
    version = `${st.ino}:${st.size}:${st.mtimeNs}`;
  } catch {
    return null;
  }
  if (passwd === null || passwd.file !== passwdFile || passwd.version !== version) {
    let text: string;
    try {
      text = await readFile(passwdFile, 'utf8');
    } catch {
      return null;
    }
    passwd = { file: passwdFile, version, users: parsePasswd(text) };
  }
  return passwd.users.get(name) ?? null;
}

/** The users of a passwd file by name (null: a line of that name whose ids are not numbers); the first line of a name counts. */
function parsePasswd(text: string): Map<string, RunAs | null> {
  const users = new Map<string, RunAs | null>();
  for (const line of text.split('\n')) {
    const f = line.split(':');
    const name = f[0] as string;
    if (f.length < 7 || users.has(name)) continue;
    const uid = Number(f[2]);
    const gid = Number(f[3]);
    users.set(name, Number.isInteger(uid) && Number.isInteger(gid) ? { name, uid, gid, home: f[5] || '/', shell: f[6] || '/bin/sh', switchUser: true } : null);
  }
  return users;
}

/**
 * The user a child runs as: the daemon's own when neither is given, root for `asRoot` (only a
 * daemon running as root can: else 422 unsupported_field as_root, never someone else), else the
 * named user of /etc/passwd (400 `as_user: …` when unknown, or when the daemon may not switch
 * users). Both at once: 400.
 */
export async function resolveUser(asUser: string | undefined, asRoot = false, passwdFile = '/etc/passwd'): Promise<RunAs> {
  const me = currentUser();
  if (asRoot) {
    if (asUser !== undefined) throw BadRequestError.field('as_root', `true cannot be combined with as_user ("${asUser}"): give one of them`);
    if (me.uid !== 0) {
      throw new UnsupportedFieldError(
        'as_root',
        `the daemon runs as uid ${me.uid} (${me.name}), not root, so it cannot start a process as root; the command was not run`,
      );
    }
    return me;
  }
  if (asUser === undefined || asUser === me.name) return me;
  const user = await lookupPasswd(asUser, passwdFile);
  if (user === null) throw BadRequestError.field('as_user', `no user "${asUser}" in ${passwdFile}`);
  if (user.uid === me.uid && user.gid === me.gid) return { ...user, switchUser: false };
  if (me.uid !== 0) {
    throw BadRequestError.field('as_user', `the daemon runs as uid ${me.uid}, not root, and cannot start processes as "${asUser}"`);
  }
  return user;
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
