// Every spawned process by id, live and exited, and the count of live process groups (spawned and
// exec) against BROWSERD_MAX_PROCESSES: a slot is taken before a child starts and freed once no
// member of its group lives (not merely when its leader exits). An exited process stays readable
// while its group lives and then for BROWSERD_PROCESS_RETENTION_SEC, then it is forgotten (404);
// past MAX_RETAINED_EXITED finished processes, or past BROWSERD_OUTPUT_RETAINED_BYTES of their
// output buffers together, the oldest is forgotten early, so that retained output buffers cannot grow
// without bound under many short processes.
import type { Metrics } from '../core/metrics.js';
import { NotFoundError } from '../core/errors.js';
import { Slots } from '../core/slots.js';
import type { ManagedProcess } from './managed-process.js';

/** At most this many finished processes are kept (the oldest forgotten first). */
export const MAX_RETAINED_EXITED = 256;

interface ProcessTableOptions {
  maxLive: number;
  retentionMs: number;
  /** Real bytes of the output buffers of finished processes kept, together (BROWSERD_OUTPUT_RETAINED_BYTES). */
  retainedBytes: number;
  metrics: Metrics;
  /** A spawned process exited (the telemetry's process_exited). */
  onExit?(proc: { process_id: string; pid: number; exit_code: number | null; signal: string | null }): void;
}

export class ProcessTable {
  private readonly procs = new Map<string, ManagedProcess>();
  /** Finished processes (exited, group gone) by id, in that order, with their removal timers. */
  private readonly exited = new Map<string, NodeJS.Timeout>();
  private readonly live: Slots;

  constructor(private readonly opts: ProcessTableOptions) {
    this.live = new Slots({ what: 'live processes', max: opts.maxLive });
    opts.metrics.processesLive.set(0);
  }

  get liveCount(): number {
    return this.live.used;
  }

  /** true when no live slot is free. */
  get full(): boolean {
    return this.live.used >= this.live.max;
  }

  /**
   * Takes one live slot before a child is started (429 limit_exceeded when none is free).
   * Returns the release function (idempotent): call it when the child's group is gone or the child did not start.
   */
  reserve(): () => void {
    const release = this.live.take();
    this.opts.metrics.processesLive.set(this.live.used);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      release();
      this.opts.metrics.processesLive.set(this.live.used);
    };
  }

  /** Adds a started process; once it has exited and its group is gone it is kept for the retention period, then removed. */
  add(proc: ManagedProcess): void {
    this.procs.set(proc.id, proc);
    const onExit = this.opts.onExit;
    if (onExit !== undefined) void proc.exited.then((info) => onExit({ process_id: proc.id, pid: proc.pid, exit_code: info.exit_code, signal: info.signal }));
    void proc.done.then(() => {
      const timer = setTimeout(() => this.forget(proc.id), this.opts.retentionMs);
      timer.unref();
      this.exited.set(proc.id, timer);
      while (this.exited.size > MAX_RETAINED_EXITED || this.retainedOutputBytes() > this.opts.retainedBytes) {
        const oldest = this.exited.keys().next().value as string;
        this.forget(oldest);
      }
    });
  }

  /** Real bytes of the output buffers of the finished processes kept. */
  private retainedOutputBytes(): number {
    let n = 0;
    for (const id of this.exited.keys()) n += this.procs.get(id)?.output.memoryBytes ?? 0;
    return n;
  }

  private forget(id: string): void {
    const timer = this.exited.get(id);
    if (timer !== undefined) clearTimeout(timer);
    this.exited.delete(id);
    this.procs.delete(id);
  }

  /** The process, or 404 not_found. */
  get(id: string): ManagedProcess {
    const proc = this.procs.get(id);
    if (proc === undefined) throw new NotFoundError(`no process ${id} (unknown, or ended longer ago than the retention period)`);
    return proc;
  }

  /** Real bytes held by the output buffers of every known process (docs/memory.md, pool process_output). */
  get outputMemoryBytes(): number {
    let n = 0;
    for (const p of this.procs.values()) n += p.output.memoryBytes;
    return n;
  }

  /** Every known process, oldest first. */
  list(): ManagedProcess[] {
    return [...this.procs.values()].sort((a, b) => a.startedAt.getTime() - b.startedAt.getTime());
  }

  /** Stops the retention timers (shutdown). */
  close(): void {
    for (const t of this.exited.values()) clearTimeout(t);
  }
}
