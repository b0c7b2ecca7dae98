// Loading a profile into the running browser, and saving the loaded one back.
//
// PATCH /browsers/{id} {profile: {id | name, save_changes}} (loadProfile): under the browser's
// lifecycle lock (so profile changes, restarts, extension installs and shutdown run one at a time)
// Chromium is restarted; between the stop and the launch (the browser's stop hook, stopWork):
//   1. the loaded profile, if loaded with save_changes, is archived from the user data folder and
//      replaces its stored content (Chromium has exited: SIGTERM makes it close orderly, which
//      flushes the cookie store and LevelDB, before the kill escalation);
//   2. the new profile's archive is unpacked into a staging folder beside the user data folder,
//      the index records no loaded profile, the user data folder is replaced by the staging folder,
//      and the index records the new one (a daemon killed in between never saves one profile's data
//      over another's).
// Every other restart and the graceful shutdown run step 1 only, when save_changes is on. Open tabs
// are lost (a new Chromium starts on the new folder).
//
// POST /browsers/{id}/configure {profile} (stage): the same at configure's one restart, except that
// the previous user data folder is kept aside (beside it, `.profile-previous-<uuid>`) until every
// part of configure is in effect (commit: removed). When configure is undone, the next stop (its
// rollback restart) puts the previous folder and the previous loaded profile back, without saving
// the folder of the failed attempt.
import { randomUUID } from 'node:crypto';
import { lchown, mkdir, readdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Browser } from '../chromium/index.js';
import type { StopWork } from '../chromium/types.js';
import { NotFoundError, OperationFailedError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { ArchiveError, type UnzipLimits } from '../core/zip/unzip.js';
import { packProfile, unpackProfile } from './archive.js';
import type { StagedConfigure } from '../chromium/types.js';
import type { Loaded, ProfileStore, StoredProfile } from './store.js';

const STAGING_PREFIX = '.profile-staging-';
/** The user data folder configure replaced, kept until configure commits or is undone. */
const PREVIOUS_PREFIX = '.profile-previous-';

interface Pending {
  id: string;
  save: boolean;
  error: Error | null;
  done: boolean;
  /** configure: keep the replaced folder aside (its path once put in place). */
  keepAside: boolean;
  aside: string | null;
  /** The loaded profile before (configure's undo puts it back). */
  previous: Loaded | null;
}

export interface ProfileRef {
  id?: string;
  name?: string;
  save_changes?: boolean;
}

export interface SwitchDeps {
  store: ProfileStore;
  browser: Browser;
  /** Chromium's user data folder (chromium/sweep/profile.ts profileDirOf, in the agent dir); staging folders go beside it. */
  profileDir: string;
  /** The agent user Chromium runs as: an unpacked profile is handed to it; null when Chromium runs as the daemon's user. */
  owner: { uid: number; gid: number } | null;
  limits: UnzipLimits;
  log: Logger;
}

/** The profile `project` may see named by id, else by name; NotFoundError otherwise. */
export function findProfile(store: ProfileStore, idOrName: string, project: string | null): StoredProfile {
  const visible = store.list().filter((p) => project === null || p.project === project);
  const p = visible.find((x) => x.id === idOrName) ?? visible.find((x) => x.name === idOrName);
  if (p === undefined) throw new NotFoundError(`no profile ${idOrName}`);
  return p;
}

export class ProfileSwitch {
  private pending: Pending | null = null;
  /** An undone configure: the folder and loaded profile to put back at the next stop. */
  private restore: { aside: string; previous: Loaded | null } | null = null;

  constructor(private readonly deps: SwitchDeps) {}

  /** Removes the staging folders a killed daemon left. */
  async cleanStaging(): Promise<void> {
    const parent = path.dirname(this.deps.profileDir);
    const names = await readdir(parent).catch(() => [] as string[]);
    for (const n of names.filter((x) => x.startsWith(STAGING_PREFIX) || x.startsWith(PREVIOUS_PREFIX))) await rm(path.join(parent, n), { recursive: true, force: true });
  }

  /** The browser's stop hook: null when there is nothing to save, no profile to put in place and nothing to put back. */
  stopWork(): StopWork | null {
    const loaded = this.deps.store.loaded();
    const pending = this.pending;
    const restore = this.restore;
    // An undone configure's folder is not saved: it is the failed attempt's.
    const save = restore === null && loaded !== null && loaded.save_changes && this.deps.store.get(loaded.id) !== undefined;
    if (!save && pending === null && restore === null) return null;
    return async ({ orderly }) => {
      if (restore !== null) {
        this.restore = null;
        await this.putBack(restore.aside, restore.previous).catch((err: unknown) => this.deps.log.error({ event: 'profile_restore_failed', err }, 'the previous user data folder could not be put back'));
      }
      if (save && !orderly) {
        // Killed by a signal, Chromium flushed nothing: the folder may hold a torn cookie store or LevelDB; the last save is kept.
        this.deps.log.error({ event: 'profile_save_skipped', profile_id: loaded.id }, 'Chromium did not close orderly: the profile is not saved (its last save is kept)');
      } else if (save) await this.save(loaded.id).catch((err: unknown) => this.deps.log.error({ event: 'profile_save_failed', profile_id: loaded.id, err }, 'the loaded profile could not be saved'));
      if (pending !== null) {
        try {
          pending.aside = await this.putInPlace(pending.id, pending.save, pending.keepAside);
        } catch (err) {
          pending.error = err as Error;
        } finally {
          pending.done = true;
        }
      }
    };
  }

  /**
   * configure's profile part, under the lifecycle lock: the next restart (configure's) puts the
   * profile in place, keeping the previous folder aside until commit; undo puts it back at the stop after.
   */
  stage(ref: ProfileRef, project: string | null): StagedConfigure {
    const idOrName = ref.id ?? ref.name;
    if (idOrName === undefined) throw new Error('a profile reference needs an id or a name');
    const p = findProfile(this.deps.store, idOrName, project);
    const pending: Pending = { id: p.id, save: ref.save_changes === true, error: null, done: false, keepAside: true, aside: null, previous: this.deps.store.loaded() };
    this.pending = pending;
    return {
      verify: async () => {
        this.pending = null;
        if (pending.error !== null) throw pending.error;
        if (!pending.done) throw new Error('the profile was not put in place');
      },
      commit: async () => {
        if (pending.aside !== null) await rm(pending.aside, { recursive: true, force: true });
        this.deps.log.info({ event: 'profile_loaded', profile_id: p.id, save_changes: pending.save, by: 'configure' }, 'profile loaded');
      },
      undo: async () => {
        this.pending = null;
        if (pending.aside !== null) this.restore = { aside: pending.aside, previous: pending.previous };
      },
    };
  }

  /** Chromium has stopped: the folder configure replaced goes back, with the loaded profile of before. */
  private async putBack(aside: string, previous: Loaded | null): Promise<void> {
    const { store, profileDir } = this.deps;
    await store.mutate((cur) => ({ next: cur, loaded: null, result: undefined }));
    await rm(profileDir, { recursive: true, force: true });
    await rename(aside, profileDir);
    const back = previous !== null && store.get(previous.id) !== undefined ? previous : null;
    await store.mutate((cur) => ({ next: cur, loaded: back, result: undefined }));
    this.deps.log.info({ event: 'profile_restored', profile_id: back?.id ?? null }, 'the user data folder of before configure is back');
  }

  /**
   * Restarts Chromium on the profile (validated, visible to `project`); with `save_changes` its
   * changes are saved at the next stop. Resolves once Chromium is ready on it.
   */
  async load(ref: ProfileRef, project: string | null, log: Logger, signal?: AbortSignal): Promise<StoredProfile> {
    const idOrName = ref.id ?? ref.name;
    if (idOrName === undefined) throw new Error('a profile reference needs an id or a name');
    findProfile(this.deps.store, idOrName, project); // 404 before waiting for the lock
    return this.deps.browser.withLock(
      'profile',
      async () => {
        const p = findProfile(this.deps.store, idOrName, project);
        const pending: Pending = { id: p.id, save: ref.save_changes === true, error: null, done: false, keepAside: false, aside: null, previous: null };
        this.pending = pending;
        try {
          await this.deps.browser.restartLocked('profile');
        } finally {
          this.pending = null;
        }
        if (pending.error !== null) throw pending.error;
        if (!pending.done) throw new Error('the profile was not put in place');
        log.info({ event: 'profile_loaded', profile_id: p.id, save_changes: pending.save }, 'profile loaded');
        return this.deps.store.get(p.id) ?? p;
      },
      { signal },
    );
  }

  /** Archives the user data folder as `id`'s content (Chromium is not running). */
  private async save(id: string): Promise<void> {
    const { store, profileDir, log } = this.deps;
    const t0 = performance.now();
    const tmp = store.tempPath();
    try {
      await packProfile(profileDir, tmp);
      await store.commitArchive(id, tmp);
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
    const now = new Date().toISOString();
    await store.update(id, (p) => ({ ...p, has_content: true, updated_at: now }));
    log.info({ event: 'profile_saved', profile_id: id, ms: Math.round(performance.now() - t0) }, 'profile saved');
  }

  /** Puts the profile in place (Chromium is not running); with `keepAside`, returns where the replaced folder is kept. */
  private async putInPlace(id: string, saveChanges: boolean, keepAside: boolean): Promise<string | null> {
    const { store, profileDir, limits, owner } = this.deps;
    const p = store.get(id);
    if (p === undefined) throw new NotFoundError(`no profile ${id}: it was deleted meanwhile`);
    // Beside the user data folder (the agent dir: one file system, so the renames below are atomic).
    const staging = path.join(path.dirname(profileDir), `${STAGING_PREFIX}${randomUUID()}`);
    const aside = keepAside ? path.join(path.dirname(profileDir), `${PREVIOUS_PREFIX}${randomUUID()}`) : null;
    let movedAside = false;
    const before = store.loaded();
    await mkdir(staging, { mode: 0o700 });
    try {
      if (p.has_content) {
        try {
          await unpackProfile(store.archivePath(id), staging, limits);
        } catch (err) {
          if (err instanceof ArchiveError) throw new OperationFailedError('archive_rejected', `the stored profile cannot be unpacked: ${err.message}`, { code: err.causeCode, message: err.message });
          throw err;
        }
      }
      if (owner !== null) await chownTree(staging, owner.uid, owner.gid);
      await store.mutate((cur) => ({ next: cur, loaded: null, result: undefined }));
      if (aside === null) await rm(profileDir, { recursive: true, force: true });
      else {
        try {
          await rename(profileDir, aside);
          movedAside = true;
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
        }
      }
      await rename(staging, profileDir);
    } catch (err) {
      await rm(staging, { recursive: true, force: true });
      if (aside !== null) {
        // configure: nothing changes, the folder and the loaded profile of before stay.
        if (movedAside) await rename(aside, profileDir);
        await store.mutate((cur) => ({ next: cur, loaded: before, result: undefined }));
      }
      throw err;
    }
    const now = new Date().toISOString();
    await store.mutate((cur) => ({ next: cur.map((x) => (x.id === id ? { ...x, last_used_at: now } : x)), loaded: { id, save_changes: saveChanges }, result: undefined }));
    if (aside !== null && !movedAside) {
      // There was no folder before: putting "it" back is an empty folder.
      await mkdir(aside, { mode: 0o700 });
      if (owner !== null) await lchown(aside, owner.uid, owner.gid);
    }
    return aside;
  }
}

/** `dir` and everything below it handed to uid:gid (links themselves, never what they point to). */
async function chownTree(dir: string, uid: number, gid: number): Promise<void> {
  await lchown(dir, uid, gid);
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) await chownTree(p, uid, gid);
    else await lchown(p, uid, gid);
  }
}
