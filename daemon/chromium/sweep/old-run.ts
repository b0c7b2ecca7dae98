// The part of a restart's stop that need not hold up the new Chromium. Once the old run's process
// group is gone, what can remain of it runs outside that group: its crashpad handlers (they end on
// their own shortly after the browser; those that do not are ended) and, in the unlikely case, an
// older Chromium left on the profile. These are told from the new run's processes by their start
// time: every process of the new run started at or after its leader, which the launcher reads
// from /proc the moment the leader exists; everything naming the profile that started before it
// belongs to an earlier run. The new run's own processes (its crashpad handlers among them) are
// never signalled. The old run's TMPDIR entries are removed by name (those present when its group
// was gone), never the new run's. The sweep begins once the new leader exists (or the launch
// failed before it existed: then everything on the profile is old); a shutdown awaits `done`.
import { readdirSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../../core/log.js';
import { readProcInfo, ticksSinceBoot } from '../../core/process/proc.js';
import type { ChromiumIdentity } from './identity.js';
import { endProfileProcesses, findProfileProcesses, type ProfileProcess } from './profile.js';

/** How often the old run's leftovers are looked for while they get to end on their own. */
const POLL_MS = 25;

interface OldRunSweepDeps {
  profileDir: string;
  tmpDir: string;
  identity: ChromiumIdentity;
  log: Logger;
  /** SIGTERM to SIGKILL for the leftovers that do not end on their own. */
  graceMs: number;
  /** How long the leftovers get to end on their own (the crashpad handlers end with the browser). */
  exitWaitMs: number;
}

export class OldRunSweep {
  /** Resolves once the old run's leftovers are gone and its TMPDIR entries removed; never rejects. */
  readonly done: Promise<void>;
  private begin!: (find: () => Promise<{ old: ProfileProcess[]; tmp: string[] }>) => void;
  private started = false;
  private readonly tmpEntries: string[];

  /** Call once the old run's process group is gone, before anything new is launched on the profile. */
  constructor(private readonly deps: OldRunSweepDeps) {
    this.tmpEntries = listDir(deps.tmpDir);
    const found = new Promise<() => Promise<{ old: ProfileProcess[]; tmp: string[] }>>((resolve) => {
      this.begin = resolve;
    });
    this.done = found
      .then(async (find) => {
        const f = await find();
        return this.sweep(f.old, f.tmp);
      })
      .catch((err: unknown) => {
        deps.log.error({ event: 'chromium_sweep_failed', err }, 'Chromium processes of the previous run could not be ended');
      });
  }

  /**
   * Starts the sweep: `newRunStart` is the start time (clock ticks since boot, /proc) of the new
   * run's leader: the old processes are then found in the background, by their start time. Or
   * null when nothing was launched: everything on the profile that started before this call is
   * old, and so is everything in TMPDIR now (call it before anything else can launch). Only the
   * first call counts.
   */
  start(newRunStart: number | null): void {
    if (this.started) return;
    this.started = true;
    const { profileDir, identity, tmpDir } = this.deps;
    const before = newRunStart ?? ticksSinceBoot();
    const tmp = newRunStart === null ? [...new Set([...this.tmpEntries, ...listDir(tmpDir)])] : this.tmpEntries;
    this.begin(async () => ({ old: (await findProfileProcesses(profileDir, identity)).filter((p) => p.starttime < before), tmp }));
  }

  private async sweep(old: ProfileProcess[], tmp: string[]): Promise<void> {
    const { profileDir, log, graceMs, exitWaitMs, tmpDir } = this.deps;
    // They get exitWaitMs to end on their own: only these pids are polled (no further /proc scans).
    const until = Date.now() + exitWaitMs;
    let left = await stillRunning(old);
    while (left.length > 0 && Date.now() < until) {
      await sleep(POLL_MS);
      left = await stillRunning(left);
    }
    const ended = await endProfileProcesses(await stillRunning(left), profileDir, graceMs, log);
    for (const name of tmp) await rm(path.join(tmpDir, name), { recursive: true, force: true });
    log.info({ event: 'chromium_old_run_swept', pids: old.map((p) => p.pid), ended, tmp_entries: tmp.length }, "the previous run's leftovers are gone");
  }
}

/** Those of `found` that still run: the same process (pid and start time), alive (not a zombie). */
async function stillRunning(found: ProfileProcess[]): Promise<ProfileProcess[]> {
  const infos = await Promise.all(found.map((p) => readProcInfo(p.pid)));
  return found.filter((p, i) => {
    const info = infos[i];
    return info != null && info.starttime === p.starttime && info.state !== 'Z' && info.state !== 'X';
  });
}

function listDir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
