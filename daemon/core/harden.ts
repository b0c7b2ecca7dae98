// What the daemon does to itself at start so that the agent's side (docs/security.md) cannot reach
// into it, beyond running as another uid:
//   - non-dumpable: Linux marks a process non-dumpable whenever its effective gid changes, so the
//     daemon changes its egid and back (node has no prctl(PR_SET_DUMPABLE)). Its /proc/<pid>
//     files (environ, mem, fd, maps) then belong to root and ptrace is refused even to a process
//     of its own uid, and no core dump carries its secrets. Children are dumpable again after
//     their exec (the kernel resets it), as usual.
//   - no stray descriptors: every descriptor above 2 the daemon inherited without close-on-exec
//     (say, from whoever started it) would pass on to every child; they are closed, except the
//     systemd notify socket (daemon/core/systemd.ts), which core/process/launch.ts covers in each
//     child instead.
import { closeSync, readdirSync, readFileSync } from 'node:fs';

/** O_CLOEXEC as /proc/<pid>/fdinfo prints the flags (octal). */
const O_CLOEXEC = 0o2000000;

/** true when the toggle ran (it needs CAP_SETGID, or root); false when it could not. */
export function makeNonDumpable(): boolean {
  if (process.getegid === undefined || process.setegid === undefined) return false;
  const egid = process.getegid();
  try {
    process.setegid(egid === 65534 ? 65533 : 65534);
  } catch {
    return false;
  }
  process.setegid(egid); // the saved gid still holds it: this cannot fail once the first change worked
  return true;
}

/** The descriptors above 2 without close-on-exec, from /proc/self/fdinfo. */
export function inheritableFds(): number[] {
  const out: number[] = [];
  let names: string[];
  try {
    names = readdirSync('/proc/self/fdinfo');
  } catch {
    return out;
  }
  for (const name of names) {
    const fd = Number(name);
    if (!Number.isInteger(fd) || fd <= 2) continue;
    try {
      const m = /^flags:\s*([0-7]+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'latin1'));
      if (m !== null && (parseInt(m[1] as string, 8) & O_CLOEXEC) === 0) out.push(fd);
    } catch {
      // closed meanwhile (the directory's own descriptor)
    }
  }
  return out;
}

/** Closes every inheritable descriptor above 2 but `keep`; returns those it closed. */
export function closeStrayFds(keep: ReadonlySet<number>): number[] {
  const closed: number[] = [];
  for (const fd of inheritableFds()) {
    if (keep.has(fd)) continue;
    try {
      closeSync(fd);
      closed.push(fd);
    } catch {
      // already gone
    }
  }
  return closed;
}
