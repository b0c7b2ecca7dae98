// Which processes are Chromium. The profile sweep (profile.ts) ends only Chromium processes that
// name the daemon's profile: naming the profile is not enough, a caller's own process (say
// `tail -f "<profile>/Local State"`, started through the processes API) names it too and is none
// of the sweep's business.
//
// A process is Chromium when its executable (/proc/PID/exe, which the kernel gives with symlinks
// resolved) is:
//   - the configured binary (BROWSERD_CHROMIUM, realpath'd), or an executable learned from an
//     earlier launch: a wrapper script (Debian's /usr/bin/chromium, the test fixtures) execs the
//     real binary, so at every ready the executables of the run's own children (`--type=…`, started
//     by Chromium from /proc/self/exe) are learned and kept in <state>/chromium-executables.json
//     for the next daemon, which may find them left over after a SIGKILL;
//   - a Chromium helper (chrome_crashpad_handler and the like) in the directory of one of those.
//     Only helpers by name, not every file there: the directory of a configured binary may be
//     /usr/bin, which holds sh and tail too;
// or when its argv[0] (a direct exec) or argv[1] (a script run through its #! interpreter, whose
// executable is the interpreter) is the configured binary.
import { readFileSync, realpathSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from '../../core/log.js';
import { writeFileAtomic } from '../../core/fs-atomic.js';
import { exeOf, readCmdline, scanProcesses } from '../../core/process/proc.js';

/** Executables Chromium starts from its own directory (crashpad runs outside the process group). */
const HELPER_RE = /^(?:[a-z]+_)?crashpad_handler$|^chrome[-_]sandbox$|^nacl_helper(?:_bootstrap)?$/;
/** Learned executables kept, newest last (a few binaries over the VM's life). */
const MAX_LEARNED = 8;

interface ProcView {
  /** The resolved executable, or null when it cannot be read (another user's process, gone). */
  exe: string | null;
  argv: string[];
}

/** The NUL-separated command line as arguments (Chromium's children rewrite it into one). */
export function argvOf(rawCmdline: string): string[] {
  const parts = rawCmdline.split('\0');
  if (parts.at(-1) === '') parts.pop();
  return parts;
}

export class ChromiumIdentity {
  private readonly learned: string[];

  constructor(
    private readonly binary: string | null,
    /** Where learned executables are kept across daemon runs; null: in memory only. */
    private readonly file: string | null,
    private readonly log: Logger,
  ) {
    this.learned = file === null ? [] : readLearned(file);
  }

  /** The executables that are Chromium: the configured binary (real path) and the learned ones. */
  executables(): Set<string> {
    const out = new Set(this.learned);
    const real = this.binaryReal();
    if (real !== null) out.add(real);
    return out;
  }

  matches(p: ProcView): boolean {
    const exes = this.executables();
    if (p.exe !== null) {
      if (exes.has(p.exe)) return true;
      const dir = path.dirname(p.exe);
      if (HELPER_RE.test(path.basename(p.exe)) && [...exes].some((e) => path.dirname(e) === dir)) return true;
    }
    if (this.binary === null) return false;
    const names = new Set([this.binary, this.binaryReal()]);
    return p.argv.slice(0, 2).some((a) => names.has(a));
  }

  /**
   * Learns the executables of the run led by `leaderPid`: those of its group's members that are
   * Chromium child processes (an argument `--type=…`). Never throws; persists what is new.
   */
  async learnFrom(leaderPid: number): Promise<void> {
    const found = new Set<string>();
    for (const p of await scanProcesses()) {
      if (p.pgid !== leaderPid || p.state === 'Z') continue;
      const raw = await readCmdline(p.pid);
      if (raw === '') continue;
      // Chromium's children rewrite their command line into one space-separated string.
      if (!/(?:^|[\0 ])--type=[a-z-]+/.test(raw)) continue;
      const exe = await exeOf(p.pid);
      if (exe !== null && path.isAbsolute(exe)) found.add(exe);
    }
    const known = this.executables();
    const fresh = [...found].filter((e) => !known.has(e));
    if (fresh.length === 0) return;
    this.learned.push(...fresh);
    this.learned.splice(0, Math.max(0, this.learned.length - MAX_LEARNED));
    this.log.info({ event: 'chromium_executables_learned', executables: fresh, binary: this.binary }, 'the configured binary runs another executable; it counts as Chromium from now on');
    if (this.file === null) return;
    try {
      await writeFileAtomic(this.file, `${JSON.stringify(this.learned)}\n`, 0o644);
    } catch (err) {
      this.log.warn({ event: 'chromium_executables_not_saved', file: this.file, err }, 'learned Chromium executables could not be saved');
    }
  }

  private binaryReal(): string | null {
    if (this.binary === null) return null;
    try {
      return realpathSync(this.binary);
    } catch {
      return this.binary;
    }
  }
}

function readLearned(file: string): string[] {
  let raw: string;
  try {
    raw = readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  try {
    const v: unknown = JSON.parse(raw);
    if (!Array.isArray(v)) return [];
    return v.filter((e): e is string => typeof e === 'string' && path.isAbsolute(e)).slice(-MAX_LEARNED);
  } catch {
    return [];
  }
}
