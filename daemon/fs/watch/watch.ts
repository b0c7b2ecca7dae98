// One folder watch: inotify through non-recursive fs.watch, one per folder, recursion done here.
// (Node 20's recursive fs.watch on Linux puts a watch on every file, scans with readdirSync and
// statSync on the event loop, and cannot leave out the state directory nor be bounded.)
// Each raw event is turned into `{type, path, name, is_dir}` after an lstat, one at a time in
// arrival order: `rename` is CREATE when the path exists and DELETE when it does not (inotify's
// move events reach Node as `rename` too: a move shows as DELETE of the old path and CREATE of the
// new; RENAME is never sent), `change` is WRITE (content or attributes), sent even when the file
// is gone by the time the event is handled. A new folder of a
// recursive watch is watched at once and scanned, its entries sent as CREATE (a file created right
// then may be reported twice). Events wait in a bounded queue for the reader; past it they are
// dropped and counted, and the reader gets one `lost` event with the count.
import { SerialQueue } from '../../core/serial-queue.js';
import { randomUUID } from 'node:crypto';
import { constants, watch as fsWatch, type FSWatcher } from 'node:fs';
import { lstat, open, readdir, readlink, stat } from 'node:fs/promises';
import type { Logger } from '../../core/log.js';
import { ConflictError, LimitExceededError } from '../../core/errors.js';
import { mapped } from '../paths/errno.js';
import type { Guard } from '../paths/guard.js';
import { O_PATH, openDir, resolve } from '../paths/resolve.js';

type FsEventType = 'CREATE' | 'WRITE' | 'DELETE' | 'RENAME';

export interface FsEvent {
  type: FsEventType;
  path: string;
  name: string;
  is_dir: boolean;
}

interface WatchLimits {
  queue: number;
  maxDirs: number;
}

interface Watched {
  watcher: FSWatcher | null;
  dev: number;
  ino: number;
}

function childOf(dir: string, name: string): string {
  return dir === '/' ? `/${name}` : `${dir}/${name}`;
}

function baseName(p: string): string {
  return p === '/' ? '/' : p.slice(p.lastIndexOf('/') + 1);
}

export class DirWatch {
  readonly id = randomUUID();
  /** Why the watch ended (its root went away, it was stopped), or null while it runs. */
  ended: string | null = null;
  private readonly dirs = new Map<string, Watched>();
  /** Every folder known below the root (watched or not) by its inode: a deleted folder is told from a file, a replaced one from the same. */
  private readonly knownDirs = new Map<string, { dev: number; ino: number }>();
  private queue: FsEvent[] = [];
  private lost = 0;
  private pending = 0;
  private readonly handling = new SerialQueue();
  private waiters = new Set<() => void>();
  private capLogged = false;

  private constructor(
    private readonly guard: Guard,
    readonly root: string,
    readonly recursive: boolean,
    private readonly limits: WatchLimits,
    private readonly log: Logger,
  ) {}

  /** Starts a watch of the folder at `input`; 409 for a file, 429 (not retryable) for a tree over BROWSERD_FS_WATCH_MAX_DIRS. */
  static async start(guard: Guard, input: string, recursive: boolean, limits: WatchLimits, log: Logger): Promise<DirWatch> {
    const t = await resolve(guard, input, { follow: true, access: 'read' });
    try {
      if (!t.stat?.isDirectory()) throw new ConflictError('not_a_directory', `${input} is not a folder`);
      const w = new DirWatch(guard, t.real, recursive, limits, log);
      const dir = await mapped(input, () => openDir(t.at, t.real));
      try {
        await mapped(input, () => w.watchDir(dir.at(), t.real));
        await w.scan(t.real, dir.at(), false);
      } catch (err) {
        w.close('failed');
        throw err;
      } finally {
        await dir.close();
      }
      return w;
    } finally {
      await t.release();
    }
  }

  /** Takes what is queued: the events, and how many were dropped since the last take. */
  take(): { events: FsEvent[]; lost: number } {
    const out = { events: this.queue, lost: this.lost };
    this.queue = [];
    this.lost = 0;
    return out;
  }

  get hasQueued(): boolean {
    return this.queue.length > 0 || this.lost > 0;
  }

  /** Resolves when something is queued or the watch ends, or after `ms` (true: the time ran out). */
  wait(ms: number, signal: AbortSignal): Promise<boolean> {
    if (this.hasQueued || this.ended !== null || signal.aborted) return Promise.resolve(false);
    return new Promise((resolve) => {
      const done = (idle: boolean): void => {
        clearTimeout(timer);
        this.waiters.delete(wake);
        signal.removeEventListener('abort', wake);
        resolve(idle);
      };
      const wake = (): void => done(false);
      const timer = setTimeout(() => done(true), ms);
      this.waiters.add(wake);
      signal.addEventListener('abort', wake, { once: true });
    });
  }

  /** Ends the watch: every inotify watch is removed; readers see `ended`. Idempotent. */
  close(reason: string): void {
    if (this.ended !== null) return;
    this.ended = reason;
    for (const d of this.dirs.values()) d.watcher?.close();
    this.dirs.clear();
    this.notify();
  }

  private notify(): void {
    for (const wake of [...this.waiters]) wake();
  }

  private push(type: FsEventType, p: string, isDir: boolean): void {
    const last = this.queue.at(-1);
    if (last !== undefined && last.type === type && last.path === p) return; // a burst of writes is one event
    if (this.queue.length >= this.limits.queue) this.drop();
    else this.queue.push({ type, path: p, name: baseName(p), is_dir: isDir });
    this.notify();
  }

  /** One event dropped: the reader is told how many with its next `lost` event. */
  private drop(): void {
    if (this.lost === 0) this.log.warn({ event: 'fs_watch_lost', watch_id: this.id, queue: this.limits.queue }, 'the watch queue is full: events are dropped until the reader catches up');
    this.lost++;
  }

  /** fs.watch on the folder reached by `at` (a /proc/self/fd path: the inode the handle holds). */
  private async watchDir(at: string, real: string): Promise<void> {
    const st = await stat(at);
    const watcher = fsWatch(at, { persistent: false }, (type, filename) => this.raw(real, type, filename));
    watcher.on('error', (err) => {
      this.log.warn({ event: 'fs_watch_error', watch_id: this.id, path: real, err }, 'a folder watch failed');
      if (real === this.root) this.close('failed');
      else this.unwatch(real);
    });
    this.dirs.set(real, { watcher, dev: st.dev, ino: st.ino });
    this.knownDirs.set(real, { dev: st.dev, ino: st.ino });
  }

  private unwatch(real: string): void {
    const d = this.dirs.get(real);
    d?.watcher?.close();
    if (d !== undefined) d.watcher = null;
  }

  /** Forgets `real` and everything below it (deleted or moved away). */
  private forget(real: string): void {
    for (const p of [...this.knownDirs.keys()]) {
      if (p === real || p.startsWith(`${real}/`)) {
        this.unwatch(p);
        this.dirs.delete(p);
        this.knownDirs.delete(p);
      }
    }
  }

  /** Records the subfolders of `real` (watched too when recursive), sending CREATE for every entry when `emit`. */
  private async scan(real: string, at: string, emit: boolean): Promise<void> {
    for (const e of await readdir(at, { withFileTypes: true })) {
      const p = childOf(real, e.name);
      if (this.guard.ruleOf(p) !== null || this.ended !== null) continue;
      if (emit) this.push('CREATE', p, e.isDirectory());
      if (!e.isDirectory()) continue;
      if (this.recursive) await this.addTree(p, emit);
      else await this.remember(p);
    }
  }

  /** Watches the folder `p` (and below); past BROWSERD_FS_WATCH_MAX_DIRS: refused at start, skipped later. */
  private async addTree(p: string, emit: boolean): Promise<void> {
    if (this.dirs.size >= this.limits.maxDirs) {
      if (!emit) throw new LimitExceededError('folders', this.limits.maxDirs, { retryable: false, message: `${this.root} holds more than ${this.limits.maxDirs} folders (BROWSERD_FS_WATCH_MAX_DIRS); watch a smaller folder or with recursive: false` });
      if (!this.capLogged) this.log.warn({ event: 'fs_watch_capped', watch_id: this.id, max_dirs: this.limits.maxDirs }, 'new folders are no longer watched');
      this.capLogged = true;
      await this.remember(p);
      return;
    }
    let fh;
    try {
      fh = await open(p, O_PATH | constants.O_DIRECTORY | constants.O_NOFOLLOW);
    } catch {
      return; // gone or replaced meanwhile
    }
    try {
      const at = `/proc/self/fd/${fh.fd}`;
      if ((await readlink(at)) !== p) return; // a folder on the way was swapped: what was opened is elsewhere
      await this.watchDir(at, p);
      await this.scan(p, at, emit);
    } catch (err) {
      if (err instanceof LimitExceededError) throw err;
    } finally {
      await fh.close();
    }
  }

  private raw(dir: string, type: string, filename: string | Buffer | null): void {
    if (this.ended !== null || filename === null) return;
    if (this.pending >= this.limits.queue) {
      this.drop();
      this.notify();
      return;
    }
    this.pending++;
    void this.handling
      .run(() => this.handle(dir, type, filename.toString()))
      .catch((err: unknown) => this.log.warn({ event: 'fs_watch_error', watch_id: this.id, err }, 'a watch event could not be handled'))
      .finally(() => this.pending--);
  }

  private async handle(dir: string, type: string, name: string): Promise<void> {
    const d = this.dirs.get(dir);
    if (this.ended !== null || d === undefined || d.watcher === null) return;
    if (type === 'rename') {
      // The folder itself deleted or moved away (inotify's *_SELF events): its watch ends; the
      // parent's own event reports it, and the root's ends the watch.
      const now = await lstat(dir).catch(() => null);
      if (now === null || !now.isDirectory() || now.ino !== d.ino || now.dev !== d.dev) {
        if (dir === this.root) {
          this.push('DELETE', dir, true);
          this.close('the watched folder was deleted or moved');
        } else this.unwatch(dir);
        return;
      }
    }
    const p = childOf(dir, name);
    if (this.guard.ruleOf(p) !== null) return;
    if (type === 'change') {
      this.push('WRITE', p, this.knownDirs.has(p)); // also when the file is already gone again
      return;
    }
    const st = await lstat(p).catch(() => null);
    if (st === null) {
      const wasDir = this.knownDirs.has(p);
      this.forget(p);
      this.push('DELETE', p, wasDir);
      return;
    }
    const known = this.knownDirs.get(p);
    if (known !== undefined && known.ino === st.ino && known.dev === st.dev) return; // the same folder: nothing new
    if (known !== undefined) {
      this.forget(p);
      this.push('DELETE', p, true); // replaced
    }
    this.push('CREATE', p, st.isDirectory());
    if (!st.isDirectory()) return;
    if (this.recursive) await this.addTree(p, true);
    else this.knownDirs.set(p, { dev: st.dev, ino: st.ino });
  }

  /** A subfolder of a watch that is not recursive: known by its inode, not watched. */
  private async remember(p: string): Promise<void> {
    const st = await lstat(p).catch(() => null);
    if (st?.isDirectory()) this.knownDirs.set(p, { dev: st.dev, ino: st.ino });
  }
}
