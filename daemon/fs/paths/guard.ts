// What the files API never touches, and why (the `inner_error.code` of 403 path_forbidden):
//   state_dir           the daemon's state directory or anything inside it (token, keys, proxy
//                       store, extension signing keys, Chromium profile)
//   special_filesystem  /proc, /sys, /dev, and any file system of that kind mounted elsewhere
//                       (/proc/self/environ holds BROWSERD_TOKEN; /proc/<pid>/root and fd/* are magic links)
//   special_file        a device, fifo or socket where a file's content is read
//   protected_file      BROWSERD_KEYS_FILE, BROWSERD_PROXY_PROVIDERS_FILE, and any other name of the
//                       protected files' inodes (a hard link made by a command run through exec)
// Paths given here are real paths (every symlink resolved by resolve.ts); these checks are lexical
// on them, plus statfs() for the kind of file system and (dev, inode) for hard links.
// And the API acts with the agent user's rights (docs/security.md): a folder on the way that user
// cannot enter, or an object it may not read or write as asked, is 403 path_forbidden with
// inner_error.code permission_denied, judged from the mode bits as the kernel would for that user
// (owner, else one of its groups, else others; no ACLs).
import { readdir, stat, statfs } from 'node:fs/promises';
import { realpathSync, type Stats } from 'node:fs';
import path from 'node:path';
import { PathForbiddenError } from '../../core/errors.js';
import { userMay } from '../../core/users.js';

type Rule = 'state_dir' | 'special_filesystem' | 'special_file' | 'protected_file';

interface GuardOptions {
  stateDir: string;
  keysFile: string | null;
  providersFile: string | null;
  /** The agent user whose rights the API acts with; null: no such check (the agent is the daemon's own user). */
  agent?: AgentRights | null;
}

/** The agent user as the kernel judges its access: uid, and every group it holds (primary and supplementary). */
export interface AgentRights {
  name: string;
  uid: number;
  gid: number;
  groups: readonly number[];
}

/** Access bits as in mode: read, write, search/execute. */
export const MAY_READ = 4;
export const MAY_WRITE = 2;
export const MAY_SEARCH = 1;

const SPECIAL_ROOTS = ['/proc', '/sys', '/dev'];

/** statfs f_type of the kernel's pseudo file systems (linux/magic.h). devtmpfs reports tmpfs: /dev is refused by path. */
const SPECIAL_MAGIC = new Set([
  0x9fa0, // proc
  0x62656572, // sysfs
  0x1cd1, // devpts
  0x27e0eb, // cgroup
  0x63677270, // cgroup2
  0x64626720, // debugfs
  0x74726163, // tracefs
  0x73636673, // securityfs
  0xcafe4a11, // bpf
  0x62656570, // configfs
  0xde5e81e4, // efivarfs
  0x6165676c, // pstore
  0x65735543, // fusectl
  0x19800202, // mqueue
  0x42494e4d, // binfmt_misc
  0x6e736673, // nsfs
  0xf97cff8c, // selinuxfs
]);

const WHY: Record<Rule, string> = {
  state_dir: "is the daemon's state directory or inside it, which the files API never reaches",
  special_filesystem: 'is on a special file system (/proc, /sys, /dev), which the files API never reaches',
  special_file: 'is a device, fifo or socket, not a regular file',
  protected_file: 'is a file the daemon keeps secret (keys, proxy providers, token), which the files API never reaches',
};

function inside(p: string, dir: string): boolean {
  return p === dir || p.startsWith(dir === '/' ? '/' : `${dir}/`);
}

function realOrSelf(p: string | null): string | null {
  if (p === null) return null;
  try {
    return realpathSync(p);
  } catch {
    return path.resolve(p);
  }
}

export class Guard {
  readonly stateDir: string;
  readonly agent: AgentRights | null;
  private readonly files: string[];

  constructor(private readonly opts: GuardOptions) {
    this.stateDir = opts.stateDir;
    this.agent = opts.agent ?? null;
    this.files = [opts.keysFile, opts.providersFile, realOrSelf(opts.keysFile), realOrSelf(opts.providersFile)].filter((p): p is string => p !== null);
  }

  /** The rule `real` (a real path) breaks, or null. */
  ruleOf(real: string): Rule | null {
    if (inside(real, this.stateDir)) return 'state_dir';
    if (SPECIAL_ROOTS.some((r) => inside(real, r))) return 'special_filesystem';
    if (this.files.includes(real)) return 'protected_file';
    return null;
  }

  /** Whether the agent user may `want` (MAY_* bits) on an object with `st`'s owner and mode; true without an agent. */
  agentMay(st: Pick<Stats, 'uid' | 'gid' | 'mode'>, want: number): boolean {
    return this.agent === null || userMay(this.agent, st, want);
  }

  /** 403 path_forbidden (permission_denied) when the agent user may not `want` on `st`; `what` says what was refused. */
  checkAgent(st: Pick<Stats, 'uid' | 'gid' | 'mode'>, want: number, shown: string, what: string): void {
    if (this.agentMay(st, want)) return;
    const name = this.agent?.name ?? '?';
    throw new PathForbiddenError('permission_denied', `${shown}: the agent user ${name} may not ${what} (the files API acts with its rights)`);
  }

  /** Throws path_forbidden when `real` breaks a rule; `shown` is the path as the caller wrote it. */
  check(real: string, shown: string): void {
    const rule = this.ruleOf(real);
    if (rule !== null) throw forbidden(rule, shown);
  }

  /** A rule broken by something inside the folder `real` (before moving or deleting the whole tree). */
  treeRule(real: string): Rule | null {
    const own = this.ruleOf(real);
    if (own !== null) return own;
    if (inside(this.stateDir, real)) return 'state_dir';
    if (SPECIAL_ROOTS.some((r) => inside(r, real))) return 'special_filesystem';
    if (this.files.some((f) => inside(f, real))) return 'protected_file';
    return null;
  }

  /** Throws path_forbidden when `target` (a path that reaches the object: an fd path) is on a special file system. */
  async checkFilesystem(target: string, shown: string): Promise<void> {
    let type: number;
    try {
      type = (await statfs(target)).type;
    } catch {
      return; // gone meanwhile: the operation itself answers
    }
    if (SPECIAL_MAGIC.has(type)) throw forbidden('special_filesystem', shown);
  }

  /**
   * Whether `st` (of the object at `target`) is one of the protected files by (dev, inode): only a
   * regular file with more than one name can be, so the protected files are stat'ed just then.
   */
  async isProtectedInode(st: Stats, target: string): Promise<boolean> {
    return this.inodeChecker()(st, target);
  }

  /**
   * isProtectedInode for many files of one request (a listing, an archive): the protected files
   * are stat'ed once, when the first file with several names comes up.
   */
  inodeChecker(): (st: Stats, target: string) => Promise<boolean> {
    let inodes: Promise<Set<string>> | null = null;
    return async (st, target) => {
      if (!st.isFile() || st.nlink < 2) return false;
      const exact = await stat(target, { bigint: true }).catch(() => null);
      if (exact === null) return false;
      inodes ??= this.protectedInodes();
      return (await inodes).has(`${exact.dev}:${exact.ino}`);
    };
  }

  private async protectedInodes(): Promise<Set<string>> {
    const out = new Set<string>();
    for (const file of await this.protectedFiles()) {
      const p = await stat(file, { bigint: true }).catch(() => null); // not there (no keys file, no token file): nothing to protect
      if (p !== null) out.add(`${p.dev}:${p.ino}`);
    }
    return out;
  }

  async checkInode(st: Stats, target: string, shown: string): Promise<void> {
    if (await this.isProtectedInode(st, target)) throw forbidden('protected_file', shown);
  }

  private async protectedFiles(): Promise<string[]> {
    const keysDir = path.join(this.stateDir, 'extensions', 'keys');
    const keys = await readdir(keysDir).catch(() => [] as string[]);
    const files = [path.join(this.stateDir, 'token'), path.join(this.stateDir, 'proxies.json'), ...keys.map((k) => path.join(keysDir, k))];
    if (this.opts.keysFile !== null) files.push(this.opts.keysFile);
    if (this.opts.providersFile !== null) files.push(this.opts.providersFile);
    return files;
  }
}

export function forbidden(rule: Rule, shown: string): PathForbiddenError {
  return new PathForbiddenError(rule, `${shown} ${WHY[rule]}`);
}
