// The durable record of the process groups this module started, so that a daemon killed with
// SIGKILL (or crashed) leaves nothing unowned: the next start ends what an earlier run left
// (sweep.ts) before it listens. `<state>/process-groups.log`, append-only lines:
//
//   +<pgid> <leader starttime> <boot id>   a group started (written synchronously right after the
//                                          spawn returned, before anything awaits)
//   -<pgid>                                the group is gone (no member of its session lives)
//
// No fsync: after a machine crash no process survives anyway, and a daemon crash leaves the
// written lines in the page cache. The file is compacted at every start: what is left is read,
// swept, and the journal starts afresh (with whatever survived the sweep, so the next start tries
// again). The starttime (clock ticks since boot) with the pid names one process across pid reuse;
// the boot id makes start times of another boot meaningless.
import { closeSync, openSync, readFileSync, writeFileSync, writeSync } from 'node:fs';
import path from 'node:path';
import { bootId, procInfo } from '../../core/process/proc.js';

const JOURNAL_FILE = 'process-groups.log';

export interface JournalEntry {
  pgid: number;
  /** The leader's start time in clock ticks since boot; 0 when it could not be read (the leader was gone already). */
  starttime: number;
  boot: string;
}

/** A recorded start, to pair its end with (a newer start of the same pgid supersedes it). */
export type JournalToken = symbol;

export class GroupJournal {
  readonly file: string;
  private fd: number | null = null;
  private readonly boot = bootId();
  private readonly live = new Map<number, JournalToken>();

  constructor(stateDir: string) {
    this.file = path.join(stateDir, JOURNAL_FILE);
  }

  /** The groups an earlier run recorded as started and not as gone (the last start of each pgid), and the count of unreadable lines. */
  readLeft(): { entries: JournalEntry[]; malformed: number } {
    let text: string;
    try {
      text = readFileSync(this.file, 'latin1');
    } catch {
      return { entries: [], malformed: 0 };
    }
    return parseJournal(text);
  }

  /** Starts the journal afresh: it holds `carried` (groups an earlier run left that could not be ended) and what starts from now on. */
  open(carried: readonly JournalEntry[] = []): void {
    this.close();
    writeFileSync(this.file, '', { mode: 0o600 });
    this.fd = openSync(this.file, 'a', 0o600);
    for (const e of carried) this.append(`+${e.pgid} ${e.starttime} ${e.boot}\n`);
  }

  /**
   * Records a group that has just started (its leader is `pgid`): synchronously, before the
   * caller awaits anything. Throws when the line cannot be written (the caller ends the child).
   */
  started(pgid: number): JournalToken {
    const starttime = procInfo(pgid)?.starttime ?? 0;
    this.append(`+${pgid} ${starttime} ${this.boot}\n`);
    const token: JournalToken = Symbol(pgid);
    this.live.set(pgid, token);
    return token;
  }

  /** Records that the group of `token` is gone; nothing when a newer start of the same pgid superseded it. */
  ended(pgid: number, token: JournalToken): void {
    if (this.live.get(pgid) !== token) return;
    this.live.delete(pgid);
    if (this.fd === null) return;
    try {
      this.append(`-${pgid}\n`);
    } catch {
      // The group is gone either way; a stale '+' line is verified (and skipped) at the next start.
    }
  }

  /** Closes the file (the lines written stay). Idempotent. */
  close(): void {
    if (this.fd === null) return;
    closeSync(this.fd);
    this.fd = null;
  }

  private append(line: string): void {
    if (this.fd === null) throw new Error(`the process group journal ${this.file} is not open`);
    writeSync(this.fd, line); // one write(2) of a short line, O_APPEND
  }
}

/** The last start of each pgid not followed by its end. */
export function parseJournal(text: string): { entries: JournalEntry[]; malformed: number } {
  const open = new Map<number, JournalEntry>();
  let malformed = 0;
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const start = /^\+(\d{1,10}) (\d{1,20}) ([0-9a-f-]{1,64}|unknown)$/.exec(line);
    if (start !== null) {
      const pgid = Number(start[1]);
      open.set(pgid, { pgid, starttime: Number(start[2]), boot: start[3] as string });
      continue;
    }
    const end = /^-(\d{1,10})$/.exec(line);
    if (end !== null) {
      open.delete(Number(end[1]));
      continue;
    }
    malformed++;
  }
  return { entries: [...open.values()].filter((e) => e.pgid > 1), malformed };
}
