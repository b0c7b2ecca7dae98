// The profiles, kept like the proxies (proxies/store/store.ts): one JSON index
// `<stateDir>/profiles.json` (mode 0600) with the loaded profile (`loaded`: which one Chromium runs
// on, and whether its changes are saved), and each profile's content in
// `<stateDir>/profiles/<id>.tar.zst` (absent: the profile is empty). The index is a
// core/json-store.ts JsonStore: every change is atomic, changes run one at a time and the
// in-memory state changes only once its write is on disk. An index that cannot be read is set aside
// (`profiles.json.broken-<time>`), never overwritten.
import { mkdirSync } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { z, type ZodType } from 'zod';
import { lazy } from '../core/lazy.js';
import { removeStaleTemps, syncDir } from '../core/fs-atomic.js';
import { JsonStore } from '../core/json-store.js';
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

type ProfileIndex = { version: typeof VERSION; profiles: readonly StoredProfile[]; loaded?: Loaded | null };

export class ProfileStore {
  private constructor(
    private readonly index: JsonStore<ProfileIndex>,
    readonly archiveDir: string,
  ) {}

  static open(stateDir: string, log: Logger): ProfileStore {
    const archiveDir = path.join(stateDir, ARCHIVE_DIR);
    mkdirSync(archiveDir, { recursive: true, mode: 0o700 });
    // Temps of archive writes a killed daemon left (the index's are removed at start: core/boot.ts).
    for (const n of removeStaleTemps(archiveDir)) log.info({ event: 'store_temp_removed', file: n }, 'removed a temp file of an unfinished profile write');
    const index = JsonStore.open<ProfileIndex>({
      file: path.join(stateDir, INDEX_FILE),
      schema: fileSchema as () => ZodType<ProfileIndex>,
      empty: () => ({ version: VERSION, profiles: [], loaded: null }),
      log,
      event: 'profile_store',
      what: 'the profile index',
      repair: (f) => ((f.loaded ?? null) !== null && !f.profiles.some((p) => p.id === f.loaded?.id) ? { ...f, loaded: null } : f),
      loaded: (f) => ({ profiles: f.profiles.length, loaded_profile: f.loaded?.id ?? null }),
    });
    return new ProfileStore(index, archiveDir);
  }

  get file(): string {
    return path.join(path.dirname(this.archiveDir), INDEX_FILE);
  }

  list(): readonly StoredProfile[] {
    return this.index.value.profiles;
  }

  get(id: string): StoredProfile | undefined {
    return this.list().find((p) => p.id === id);
  }

  loaded(): Loaded | null {
    return this.index.value.loaded ?? null;
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
    return this.index.mutate((cur) => {
      const loadedNow = cur.loaded ?? null;
      const { next, loaded = loadedNow, result } = change(cur.profiles, loadedNow);
      if (next === cur.profiles && loaded === loadedNow) return { next: cur, result };
      return { next: { version: VERSION, profiles: next, loaded }, result };
    });
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

  idle(): Promise<void> {
    return this.index.idle();
  }
}
