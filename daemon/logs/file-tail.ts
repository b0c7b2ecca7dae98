// A file as a log source, like `tail -F`: it starts at the last BROWSERD_LOG_FILE_BACKLOG_BYTES of the
// file (at a line start), reads at the reader's pace (the file is not read further while the
// client's socket is full: nothing is lost), and with `follow` waits for more: fs.watch wakes it,
// and a poll every second catches what inotify does not report. Rules, checked whenever the end
// of the file is reached:
// - truncated (shorter than what was read): read again from its start;
// - rotated or replaced (the path names another file: rename, delete and re-create, a symlink
//   moved): the old file is read to its end, then the path is resolved again under the same
//   rules (a path now forbidden ends the stream) and the new file is read from its start; a path
//   that names no file yet is waited for.
// Without `follow` the stream ends at the size the file had when it was opened.
import { watch, type FSWatcher } from 'node:fs';
import { open, stat, type FileHandle } from 'node:fs/promises';
import { StringDecoder } from 'node:string_decoder';
import { NotFoundError } from '../core/errors.js';
import { MAX_LINE_CHARS } from './ring.js';
import { EMPTY, type Batch, type LogEvent, type LogSource } from './source.js';

/** How often a followed file is checked besides fs.watch's events. */
export const FILE_POLL_MS = 1000;
const READ_BYTES = 256 * 1024;

interface FileTailOptions {
  follow: boolean;
  backlogBytes: number;
  /** The path as the caller gave it, resolved again after a rotation (the real path, or throws). */
  resolve(): Promise<string>;
  pollMs?: number;
}

/** Bytes to lines; a line longer than MAX_LINE_CHARS is given in pieces; a trailing \r is dropped. */
class Lines {
  private pending = '';
  private decoder = new StringDecoder('utf8');
  /** Drop everything up to the first newline (the start fell inside a line). */
  skipFirst = false;

  push(chunk: Buffer, out: string[]): void {
    this.pending += this.decoder.write(chunk);
    let nl: number;
    while ((nl = this.pending.indexOf('\n')) >= 0) {
      const line = this.pending.slice(0, nl).replace(/\r$/, '');
      this.pending = this.pending.slice(nl + 1);
      if (this.skipFirst) this.skipFirst = false;
      else out.push(line);
    }
    while (this.pending.length > MAX_LINE_CHARS) {
      if (!this.skipFirst) out.push(this.pending.slice(0, MAX_LINE_CHARS));
      this.pending = this.pending.slice(MAX_LINE_CHARS);
    }
  }

  /** What is left without a newline, as a last line. */
  flush(out: string[]): void {
    this.pending += this.decoder.end();
    if (this.pending !== '' && !this.skipFirst) out.push(this.pending);
    this.reset();
  }

  reset(): void {
    this.pending = '';
    this.decoder = new StringDecoder('utf8');
    this.skipFirst = false;
  }
}

export class FileTail implements LogSource {
  private offset: number;
  private readonly lines = new Lines();
  private readonly buf = Buffer.allocUnsafe(READ_BYTES);
  private watcher: FSWatcher | null = null;
  private changed = false;
  private wake: (() => void) | null = null;
  private ended = false;
  private closed = false;
  /** Without follow: the size to stop at. */
  private readonly stopAt: number | null;

  private constructor(
    private fh: FileHandle,
    private ino: number,
    private dev: number,
    size: number,
    private readonly opts: FileTailOptions,
  ) {
    const start = Math.max(0, size - opts.backlogBytes);
    // Inside the file: read from one byte earlier and drop through the first newline.
    this.offset = start > 0 ? start - 1 : 0;
    this.lines.skipFirst = start > 0;
    this.stopAt = opts.follow ? null : size;
  }

  /** Opens the (already resolved, allowed) file; an error here is answered before the stream starts. */
  static async open(realPath: string, opts: FileTailOptions): Promise<FileTail> {
    const fh = await open(realPath, 'r');
    try {
      const st = await fh.stat();
      const tail = new FileTail(fh, st.ino, st.dev, st.size, opts);
      if (opts.follow) tail.watchFile(realPath);
      return tail;
    } catch (err) {
      await fh.close().catch(() => {});
      throw err;
    }
  }

  async next(signal: AbortSignal): Promise<Batch | null> {
    for (;;) {
      if (this.ended || this.closed) return null;
      const out: string[] = [];
      const more = await this.read(out);
      if (out.length > 0) return { events: out.map(toEvent), lost: 0 };
      if (more) continue; // a partial line: read on
      if (!this.opts.follow) {
        this.lines.flush(out);
        this.ended = true;
        return out.length > 0 ? { events: out.map(toEvent), lost: 0 } : null;
      }
      const switched: string[] = [];
      if (await this.checkReplaced(switched)) {
        if (switched.length > 0) return { events: switched.map(toEvent), lost: 0 };
        continue;
      }
      if (signal.aborted) return EMPTY;
      await this.waitChange(signal);
      if (signal.aborted) return EMPTY;
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.watcher?.close();
    this.watcher = null;
    this.wake?.();
    void this.fh.close().catch(() => {});
  }

  /** Reads one chunk into `out`; false at the end (of the file, or of what may be read). */
  private async read(out: string[]): Promise<boolean> {
    const room = this.stopAt === null ? READ_BYTES : Math.min(READ_BYTES, this.stopAt - this.offset);
    if (room <= 0) return false;
    const { bytesRead } = await this.fh.read(this.buf, 0, room, this.offset);
    if (bytesRead === 0) return false;
    this.offset += bytesRead;
    this.lines.push(this.buf.subarray(0, bytesRead), out);
    return true;
  }

  /** At the end of the file: truncated or replaced? true when reading goes on (from the start, or in the new file). */
  private async checkReplaced(out: string[]): Promise<boolean> {
    const st = await this.fh.stat();
    if (st.size < this.offset) {
      this.offset = 0;
      this.lines.reset();
      return true;
    }
    let real: string;
    try {
      real = await this.opts.resolve();
    } catch (err) {
      if (err instanceof NotFoundError) return false; // gone for now: wait for it to come back
      this.lines.flush(out);
      this.ended = true; // forbidden now, or unreadable: the stream ends
      return true;
    }
    let fh: FileHandle;
    try {
      const now = await stat(real);
      if (now.ino === this.ino && now.dev === this.dev) return false;
      fh = await open(real, 'r');
    } catch {
      return false; // replaced once more meanwhile: the next check sees it
    }
    const nst = await fh.stat();
    this.lines.flush(out); // the old file's last line, even without its newline
    const old = this.fh;
    this.fh = fh;
    this.ino = nst.ino;
    this.dev = nst.dev;
    this.offset = 0;
    void old.close().catch(() => {});
    this.watcher?.close();
    this.watchFile(real);
    return true;
  }

  private watchFile(file: string): void {
    try {
      this.watcher = watch(file, { persistent: false }, () => {
        this.changed = true;
        this.wake?.();
      });
      this.watcher.on('error', () => {}); // the poll goes on
    } catch {
      this.watcher = null; // no inotify here: the poll alone
    }
  }

  private async waitChange(signal: AbortSignal): Promise<void> {
    if (this.changed) {
      this.changed = false;
      return;
    }
    await new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.wake = null;
        resolve();
      };
      const timer = setTimeout(done, this.opts.pollMs ?? FILE_POLL_MS);
      this.wake = done;
      signal.addEventListener('abort', done, { once: true });
    });
    this.changed = false;
  }
}

function toEvent(message: string): LogEvent {
  return { event: 'log', message, timestamp: new Date().toISOString() };
}
