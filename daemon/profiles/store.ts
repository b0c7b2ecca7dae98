// The profiles, kept like the proxies (proxies/store/store.ts): one JSON index
// `<stateDir>/profiles.json` (mode 0600) with the loaded profile (`loaded`: which one Chromium runs
// on, and whether its changes are saved), and each profile's content in
// `<stateDir>/profiles/<id>.tar.zst` (absent: the profile is empty). Every change is atomic (a temp
// file, fsync, rename, fsync of the folder: core/fs-atomic.ts), changes run one at a time and the
// in-memory state changes only once its write is on disk. An index that cannot be read is set aside
// (`profiles.json.broken-<time>`), never overwritten.
import { mkdirSync, readFileSync, renameSync } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { z } from 'zod';
import { lazy } from '../core/lazy.js';
import { removeStaleTemps, syncDir, writeFileAtomic } from '../core/fs-atomic.js';
import type { Logger } from '../core/log.js';

export const INDEX_FILE = 'profiles.json';
export const ARCHIVE_DIR = 'profiles';
const VERSION = 1;

export interface StoredProfile {
  id: string;
  name?: string;
  /** The project of the key that created it; null for keys without a project. */
  project: string | null;
  created_at: string;
  updated_at?: string;
  last_used_at?: string;
  /** Whether `<id>.tar.zst` holds content (false: an empty profile). */
  has_content: boolean;
}

export interface Loaded {
  id: string;
  save_changes: boolean;
}

const fileSchema = lazy(() => z.object({
  version: z.literal(VERSION),
  profiles: z.array(
    z.looseObject({
      id: z.string().min(1),
      name: z.string().optional(),
      project: z.string().nullable(),
      created_at: z.string(),
      updated_at: z.string().optional(),
      last_used_at: z.string().optional(),
      has_content: z.boolean(),
    }),
  ),
  loaded: z.object({ id: z.string(), save_changes: z.boolean() }).nullable().optional(),
}));

export class ProfileStore {
  private records: readonly StoredProfile[];
  private loadedNow: Loaded | null;
  private queue: Promise<unknown> = Promise.resolve();

  private constructor(
    readonly file: string,
    readonly archiveDir: string,
    records: StoredProfile[],
    loaded: Loaded | null,
  ) {
    this.records = records;
    this.loadedNow = loaded;
  }

  static open(stateDir: string, log: Logger): ProfileStore {
    const archiveDir = path.join(stateDir, ARCHIVE_DIR);
    mkdirSync(archiveDir, { recursive: true, mode: 0o700 });
    // Temps of archive writes a killed daemon left (the index's are removed by main.ts).
    for (const n of removeStaleTemps(archiveDir)) log.info({ event: 'store_temp_removed', file: n }, 'removed a temp file of an unfinished profile write');
    const file = path.join(stateDir, INDEX_FILE);
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return new ProfileStore(file, archiveDir, [], null);
      throw err;
    }
    let reason: string;
    try {
      const parsed = fileSchema().safeParse(JSON.parse(text));
      if (parsed.success) {
        const records = parsed.data.profiles as StoredProfile[];
        let loaded = parsed.data.loaded ?? null;
        if (loaded !== null && !records.some((p) => p.id === loaded?.id)) loaded = null;
        log.info({ event: 'profile_store_loaded', profiles: records.length, loaded_profile: loaded?.id ?? null }, 'profile store loaded');
        return new ProfileStore(file, archiveDir, records, loaded);
      }
      const issue = parsed.error.issues[0];
      reason = `${issue?.path.join('.') || '(root)'}: ${issue?.message}`;
    } catch (err) {
      reason = `not JSON: ${(err as Error).message}`;
    }
    const aside = `${file}.broken-${new Date().toISOString().replace(/[:.]/g, '-')}`;
    renameSync(file, aside);
    log.error({ event: 'profile_store_broken', kept_as: aside, reason }, 'the profile index could not be read; it was kept aside and the daemon starts with no profiles');
    return new ProfileStore(file, archiveDir, [], null);
  }

  list(): readonly StoredProfile[] {
    return this.records;
  }

  get(id: string): StoredProfile | undefined {
    return this.records.find((p) => p.id === id);
  }

  loaded(): Loaded | null {
    return this.loadedNow;
  }

  archivePath(id: string): string {
    return path.join(this.archiveDir, `${id}.tar.zst`);
  }

  /** A temp path in the archive folder (removed at start if a write never finished). */
  tempPath(): string {
    return path.join(this.archiveDir, `.upload.${randomUUID()}.tmp`);
  }

  /** Runs `change` once every earlier change is on disk; writes its result, then makes it current. */
  mutate<T>(change: (cur: readonly StoredProfile[], loaded: Loaded | null) => { next: readonly StoredProfile[]; loaded?: Loaded | null; result: T }): Promise<T> {
    const run = this.queue.then(async () => {
      const { next, loaded = this.loadedNow, result } = change(this.records, this.loadedNow);
      if (next !== this.records || loaded !== this.loadedNow) {
        const text = `${JSON.stringify({ version: VERSION, profiles: next, loaded }, null, 1)}\n`;
        await writeFileAtomic(this.file, text, 0o600);
        this.records = next;
        this.loadedNow = loaded;
      }
      return result;
    });
    this.queue = run.catch(() => undefined);
    return run;
  }

  update(id: string, fn: (p: StoredProfile) => StoredProfile): Promise<StoredProfile | undefined> {
    return this.mutate((cur) => {
      const i = cur.findIndex((p) => p.id === id);
      if (i < 0) return { next: cur, result: undefined };
      const updated = fn(cur[i] as StoredProfile);
      return { next: cur.map((p, j) => (j === i ? updated : p)), result: updated };
    });
  }

  /** Moves the finished archive `tmp` (in the archive folder) over `id`'s, atomically. */
  async commitArchive(id: string, tmp: string): Promise<void> {
    const fh = await open(tmp, 'r');
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, this.archivePath(id));
    await syncDir(this.archiveDir);
  }

  async removeArchive(id: string): Promise<void> {
    await rm(this.archivePath(id), { force: true });
  }

  async idle(): Promise<void> {
    await this.queue;
  }
}
