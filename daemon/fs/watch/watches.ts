// The live folder watches: at most BROWSERD_FS_MAX_WATCHES (429 past it), one reader each at a
// time (a new reader takes over; the previous stream ends), and a watch that has had no reader
// for BROWSERD_FS_WATCH_IDLE_SEC is stopped, so forgotten watches cannot pile up.
import type { Logger } from '../../core/log.js';
import { NotFoundError } from '../../core/errors.js';
import { Slots } from '../../core/slots.js';
import type { Guard } from '../paths/guard.js';
import { DirWatch } from './watch.js';

interface WatchSetLimits {
  max: number;
  queue: number;
  maxDirs: number;
  idleMs: number;
}

interface Entry {
  watch: DirWatch;
  reader: AbortController | null;
  idle: NodeJS.Timeout | null;
  /** Gives its slot back. */
  release: () => void;
}

export class WatchSet {
  private readonly entries = new Map<string, Entry>();
  /** One per watch, taken before it starts (a watch starting counts) and given back when it is removed. */
  private readonly slots: Slots;

  constructor(
    private readonly guard: Guard,
    private readonly limits: WatchSetLimits,
    private readonly log: Logger,
    private readonly onCount: (n: number) => void = () => undefined,
  ) {
    this.slots = new Slots({ what: 'folder watches', max: limits.max, message: `too many folder watches (limit ${limits.max}, BROWSERD_FS_MAX_WATCHES); stop one first` });
  }

  get size(): number {
    return this.entries.size;
  }

  async start(input: string, recursive: boolean): Promise<DirWatch> {
    const release = this.slots.take();
    let watch: DirWatch;
    try {
      watch = await DirWatch.start(this.guard, input, recursive, { queue: this.limits.queue, maxDirs: this.limits.maxDirs }, this.log);
    } catch (err) {
      release();
      throw err;
    }
    const entry: Entry = { watch, reader: null, idle: null, release };
    this.entries.set(watch.id, entry);
    this.armIdle(entry);
    this.onCount(this.entries.size);
    this.log.info({ event: 'fs_watch_started', watch_id: watch.id, path: watch.root, recursive }, 'folder watch started');
    return watch;
  }

  get(id: string): DirWatch {
    const entry = this.entries.get(id);
    if (entry === undefined) throw new NotFoundError(`no folder watch ${id}`);
    return entry.watch;
  }

  /** The reader's signal: aborted when another reader takes over or the watch is stopped. */
  attach(id: string): { watch: DirWatch; signal: AbortSignal; detach: () => void } {
    const entry = this.entries.get(id);
    if (entry === undefined) throw new NotFoundError(`no folder watch ${id}`);
    entry.reader?.abort();
    const reader = new AbortController();
    entry.reader = reader;
    if (entry.idle !== null) clearTimeout(entry.idle);
    entry.idle = null;
    const detach = (): void => {
      if (entry.reader !== reader) return;
      entry.reader = null;
      if (entry.watch.ended !== null && !entry.watch.hasQueued) this.remove(id, entry.watch.ended);
      else this.armIdle(entry);
    };
    return { watch: entry.watch, signal: reader.signal, detach };
  }

  stop(id: string): void {
    if (!this.entries.has(id)) throw new NotFoundError(`no folder watch ${id}`);
    this.remove(id, 'stopped');
  }

  closeAll(): void {
    for (const id of [...this.entries.keys()]) this.remove(id, 'shutdown');
  }

  private armIdle(entry: Entry): void {
    entry.idle = setTimeout(() => {
      this.log.info({ event: 'fs_watch_idle', watch_id: entry.watch.id, idle_ms: this.limits.idleMs }, 'folder watch stopped: no reader');
      this.remove(entry.watch.id, 'idle');
    }, this.limits.idleMs);
    entry.idle.unref();
  }

  private remove(id: string, reason: string): void {
    const entry = this.entries.get(id);
    if (entry === undefined) return;
    this.entries.delete(id);
    entry.release();
    if (entry.idle !== null) clearTimeout(entry.idle);
    entry.watch.close(reason);
    entry.reader?.abort();
    this.onCount(this.entries.size);
    this.log.info({ event: 'fs_watch_stopped', watch_id: id, reason }, 'folder watch stopped');
  }
}
