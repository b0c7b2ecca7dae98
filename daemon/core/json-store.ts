// The one JSON store: a document of the daemon's (the proxies, the profiles' index, the browser's
// settings) kept in one file of the state dir, read once at start through its schema and changed
// only by whole, atomic writes (core/fs-atomic.ts: a temp file, fsync, rename, fsync of the folder).
// Changes run one at a time in the order asked for, and the value in memory changes only once its
// write is on disk (a failed write changes nothing). A file that cannot be read through the schema
// is renamed aside (`<file>.broken-<time>`) and logged, never overwritten: the store starts empty.
import { readFileSync, renameSync } from 'node:fs';
import path from 'node:path';
import type { ZodType } from 'zod';
import { syncDirSync, writeFileAtomic } from './fs-atomic.js';
import type { Logger } from './log.js';
import { SerialQueue } from './serial-queue.js';

export interface JsonStoreSpec<T> {
  file: string;
  /** The file's shape (a core/lazy.ts `lazy`): what it parses to is the document. */
  schema: () => ZodType<T>;
  /** The document of a store without a file, or whose file was set aside. */
  empty: () => T;
  /** The document as written (pretty-printed with `indent` spaces, a newline at the end). */
  indent?: number;
  log: Logger;
  /** The log events' prefix: `<event>_loaded`, `<event>_broken`. */
  event: string;
  /** What the store holds, for the broken file's message ("the proxy store"). */
  what: string;
  /** What the file held, made consistent (a reference to a record that is gone dropped): in memory, saved by the next write. */
  repair?: (value: T) => T;
  /** A line to log of the document read (its size), with `<event>_loaded`; none logs nothing. */
  loaded?: (value: T) => Record<string, unknown>;
}

export class JsonStore<T> {
  private current: T;
  private readonly queue = new SerialQueue();

  private constructor(
    private readonly spec: JsonStoreSpec<T>,
    initial: T,
  ) {
    this.current = initial;
  }

  /** Reads the file synchronously (missing: the empty document; unreadable: set aside, logged, empty). Other read errors throw. */
  static open<T>(spec: JsonStoreSpec<T>): JsonStore<T> {
    const { file, log } = spec;
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return new JsonStore(spec, spec.empty());
      throw err;
    }
    let reason: string;
    try {
      const parsed = spec.schema().safeParse(JSON.parse(text));
      if (parsed.success) {
        const value = spec.repair ? spec.repair(parsed.data) : parsed.data;
        if (spec.loaded) log.info({ event: `${spec.event}_loaded`, path: file, ...spec.loaded(value) }, `${spec.what} loaded`);
        return new JsonStore(spec, value);
      }
      const issue = parsed.error.issues[0];
      reason = `${issue?.path.join('.') || '(root)'}: ${issue?.message}`;
    } catch (err) {
      reason = `not JSON: ${(err as Error).message}`;
    }
    const aside = `${file}.broken-${new Date().toISOString().replace(/[:.]/g, '-')}`;
    renameSync(file, aside);
    syncDirSync(path.dirname(file));
    log.error({ event: `${spec.event}_broken`, path: file, kept_as: aside, reason }, `${spec.what} could not be read; it was kept aside and the daemon starts with an empty one`);
    return new JsonStore(spec, spec.empty());
  }

  get value(): T {
    return this.current;
  }

  /**
   * Runs `change` on the current document once every earlier change is on disk, writes its `next`
   * (unless it is the same object), then makes it current. `change` may throw to refuse: nothing is written.
   */
  mutate<R>(change: (current: T) => { next: T; result: R }): Promise<R> {
    return this.queue.run(async () => {
      const { next, result } = change(this.current);
      if (next !== this.current) {
        await writeFileAtomic(this.spec.file, `${JSON.stringify(next, null, this.spec.indent ?? 1)}\n`, 0o600);
        this.current = next;
      }
      return result;
    });
  }

  /** Writes `next`, then makes it current. */
  set(next: T): Promise<void> {
    return this.mutate(() => ({ next, result: undefined }));
  }

  /** Resolves once every change asked for so far is on disk (or failed). */
  idle(): Promise<void> {
    return this.queue.drain();
  }
}
