// Users of the machine as the daemon needs them: a passwd entry by name, the daemon's own user,
// the capabilities it holds (/proc/self/status), and how a child is started as another user.
//
// A child switches users through setpriv(1) (util-linux), never through node's own uid/gid
// options: node clears the supplementary groups instead of initialising them, and it cannot clear
// the ambient capabilities. A daemon that is not root holds its capabilities (CAP_SETUID, ...) as
// ambient ones (systemd's AmbientCapabilities=), and a setuid() between two non-zero uids keeps
// them: without `--ambient-caps -all` every command of the agent would start holding CAP_SETUID,
// i.e. root. setpriv sets real, effective and saved ids, initgroups(3) of the user, and clears the
// inheritable and ambient sets before it execs the command (same pid).
import { readFileSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { userInfo } from 'node:os';
import { DEFAULT_PATH, findOnPath } from './which.js';

export interface UserEntry {
  name: string;
  uid: number;
  gid: number;
  home: string;
  shell: string;
}

/** Capability numbers (linux/capability.h) the daemon asks about. */
export const CAP = { CHOWN: 0, DAC_OVERRIDE: 1, FOWNER: 3, KILL: 5, SETGID: 6, SETUID: 7 } as const;


/** The line of `passwdFile` for `name`, or null. */
export function lookupUser(name: string, passwdFile = '/etc/passwd'): UserEntry | null {
  let text: string;
  try {
    text = readFileSync(passwdFile, 'utf8');
  } catch {
    return null;
  }
  for (const line of text.split('\n')) {
    const f = line.split(':');
    if (f.length < 7 || f[0] !== name) continue;
    const uid = Number(f[2]);
    const gid = Number(f[3]);
    if (!Number.isInteger(uid) || !Number.isInteger(gid)) return null;
    return { name, uid, gid, home: f[5] || '/', shell: f[6] || '/bin/sh' };
  }
  return null;
}

/** A passwd file as read last: its users by name, and what tells a changed file (a stat). */
interface PasswdCache {
  file: string;
  version: string;
  users: Map<string, UserEntry | null>;
}
let passwd: PasswdCache | null = null;

/**
 * `lookupUser` for the event loop: the file is read (asynchronously) again only when it changed
 * (its inode, size or mtime differ: useradd writes a new file and renames it over the old one), so
 * a spawn costs one asynchronous stat.
 */
export async function lookupUserCached(name: string, passwdFile = '/etc/passwd'): Promise<UserEntry | null> {
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
function parsePasswd(text: string): Map<string, UserEntry | null> {
  const users = new Map<string, UserEntry | null>();
  for (const line of text.split('\n')) {
    const f = line.split(':');
    const name = f[0] as string;
    if (f.length < 7 || users.has(name)) continue;
    const uid = Number(f[2]);
    const gid = Number(f[3]);
    users.set(name, Number.isInteger(uid) && Number.isInteger(gid) ? { name, uid, gid, home: f[5] || '/', shell: f[6] || '/bin/sh' } : null);
  }
  return users;
}

/** The daemon's own user. */
export function daemonUser(): UserEntry {
  const info = userInfo();
  return { name: info.username, uid: info.uid, gid: info.gid, home: info.homedir, shell: info.shell ?? '/bin/sh' };
}

/** The effective capability set of this process (CapEff of /proc/self/status); 0n when unreadable. */
export function effectiveCapabilities(status?: string): bigint {
  let text = status;
  if (text === undefined) {
    try {
      text = readFileSync('/proc/self/status', 'utf8');
    } catch {
      return 0n;
    }
  }
  const m = /^CapEff:\s*([0-9a-f]+)$/m.exec(text);
  return m === null ? 0n : BigInt(`0x${m[1]}`);
}

export function holds(caps: bigint, cap: number): boolean {
  return (caps & (1n << BigInt(cap))) !== 0n;
}

/** Whether this process may start children as other users: root, or CAP_SETUID and CAP_SETGID. */
export function maySwitchUsers(caps = effectiveCapabilities()): boolean {
  return process.getuid?.() === 0 || (holds(caps, CAP.SETUID) && holds(caps, CAP.SETGID));
}

/** setpriv(1) on the daemon's PATH (null when missing). */
export function findSetpriv(envPath = process.env.PATH): string | null {
  return findOnPath('setpriv', envPath || DEFAULT_PATH);
}

let setprivCache: string | null | undefined;

/** findSetpriv(), looked up once. */
export function setprivPath(): string | null {
  if (setprivCache === undefined) setprivCache = findSetpriv();
  return setprivCache;
}

/** Who a child runs as, when not as the daemon itself: the ids setpriv sets. */
export interface SwitchTo {
  uid: number;
  gid: number;
}

/**
 * The argv that runs `command args` as `to` (see the file comment): setpriv with the user's ids,
 * the supplementary groups of its passwd entry (initgroups(3)) and no capabilities kept.
 */
export function switchArgv(setpriv: string, to: SwitchTo, command: string, args: readonly string[]): { command: string; args: string[] } {
  return {
    command: setpriv,
    args: [`--reuid=${to.uid}`, `--regid=${to.gid}`, '--init-groups', '--inh-caps=-all', '--ambient-caps=-all', '--', command, ...args],
  };
}

/**
 * Every group `user` holds as the kernel sees it after initgroups(3): its primary group and each
 * group of `groupFile` that lists it as a member. Read when asked (at daemon start for the files API).
 */
export function groupsOf(user: Pick<UserEntry, 'name' | 'gid'>, groupFile = '/etc/group'): number[] {
  const groups = new Set<number>([user.gid]);
  let text: string;
  try {
    text = readFileSync(groupFile, 'utf8');
  } catch {
    return [...groups];
  }
  for (const line of text.split('\n')) {
    const f = line.split(':');
    if (f.length < 4) continue;
    const gid = Number(f[2]);
    if (Number.isInteger(gid) && (f[3] as string).split(',').includes(user.name)) groups.add(gid);
  }
  return [...groups];
}

/**
 * Whether `user` may `want` (MAY_* bits: 4 read, 2 write, 1 search) on an object with `st`'s owner
 * and mode, by the mode's owner, group (its primary group or one of its supplementary `groups`) or
 * other bits; root may everything. Access control lists are not read.
 */
export function userMay(user: { uid: number; gid: number; groups?: readonly number[] }, st: { uid: number; gid: number; mode: number }, want: number): boolean {
  if (user.uid === 0) return true;
  const bits = st.uid === user.uid ? (st.mode >> 6) & 7 : st.gid === user.gid || (user.groups ?? []).includes(st.gid) ? (st.mode >> 3) & 7 : st.mode & 7;
  return (bits & want) === want;
}
