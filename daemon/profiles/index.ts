// The profiles concern: a store of Chromium user data archives on the VM (store.ts, archive.ts),
// the SDK's /profiles routes (routes.ts), and loading one into the running browser with its
// changes saved back at the next stop (switch.ts).
// Public face: createProfiles() → { routes, start(), close() }; it adds `profile` to PATCH /browsers/{id}.
import { lazy } from '../core/lazy.js';
import { ConfigError, type Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import type { Browser } from '../chromium/index.js';
import { profileDirOf } from '../chromium/sweep/profile.js';
import type { RequestContext, Route } from '../http/router.js';
import { BadRequestError, NotFoundError } from '../core/errors.js';
import { PROFILE_LIMITS } from './limits.js';
import { profileRefSchema, profileRoutes, toPublic } from './routes.js';
import { ProfileStore } from './store.js';
import { findProfile, ProfileSwitch, type ProfileRef } from './switch.js';

export { PROFILE_LIMITS } from './limits.js';

export interface Profiles {
  readonly routes: Route[];
  /** Removes what a killed daemon left (staging folders). */
  start(): Promise<void>;
  close(): Promise<void>;
}

export function createProfiles(deps: { config: Config; log: Logger; browser: Browser }): Profiles {
  const log = deps.log.child({ module: 'profiles' });
  const stateDir = deps.config.stateDir;
  let store: ProfileStore;
  try {
    store = ProfileStore.open(stateDir, log);
  } catch (err) {
    throw new ConfigError('BROWSERD_STATE_DIR', `cannot open the profile store: ${(err as Error).message}`);
  }
  const sw = new ProfileSwitch({
    store,
    browser: deps.browser,
    profileDir: profileDirOf(deps.config.agent.dir),
    owner: deps.config.agent.separated ? { uid: deps.config.agent.user.uid, gid: deps.config.agent.user.gid } : null,
    limits: { maxEntries: PROFILE_LIMITS.maxEntries, maxUnpackedBytes: PROFILE_LIMITS.maxUnpackedBytes, unpackedWhat: 'the unpacked profile' },
    log,
  });
  deps.browser.setStopHook(() => sw.stopWork());
  deps.browser.addSnapshotFields(() => {
    const loaded = store.loaded();
    const p = loaded === null ? undefined : store.get(loaded.id);
    return p === undefined ? {} : { profile: toPublic(p) };
  });
  // The `profile` part of PATCH /browsers/{id} (the browser module owns the route).
  deps.browser.addUpdateFields({
    fields: lazy(() => ({
      profile: profileRefSchema().optional().meta({
        description:
          "The SDK's BrowserProfile {id | name, save_changes}: Chromium restarts on that profile (open tabs are lost); save_changes saves it " +
          'back at the next stop (the next profile PATCH, a restart, a graceful shutdown). docs/profiles.md',
      }),
    })),
    scope: 'profiles:read',
    async apply(body, ctx) {
      if (body.profile !== undefined) await load(body.profile, ctx);
    },
  });
  // The `profile` part of POST /browsers/{id}/configure: put in place at configure's one restart.
  deps.browser.addConfigurePart({
    field: 'profile',
    schema: lazy(() => profileRefSchema().meta({
      description: "The SDK's BrowserProfile {id | name, save_changes}: Chromium restarts on that stored profile with the rest of configure (open tabs are lost; scope profiles:read). docs/profiles.md",
    })),
    scope: 'profiles:read',
    check(value, ctx, problems) {
      const ref = value as ProfileRef;
      try {
        findProfile(store, ref.id ?? ref.name ?? '', ctx.identity?.project ?? null);
      } catch (err) {
        if (!(err instanceof NotFoundError)) throw err;
        problems.missing.push(`profile: no profile ${ref.id !== undefined ? `with id ${ref.id}` : `named ${ref.name ?? ''}`}`);
      }
    },
    stage: async (value, ctx) => sw.stage(value as ProfileRef, ctx.identity?.project ?? null),
  });
  const load = async (value: unknown, ctx: RequestContext): Promise<void> => {
    const parsed = profileRefSchema().safeParse(value);
    if (!parsed.success) throw new BadRequestError(parsed.error.issues.map((i) => `profile${i.path.length > 0 ? `.${i.path.join('.')}` : ''}: ${i.message}`));
    if (ctx.identity === null) throw new Error('the profile update needs an identity');
    await sw.load(parsed.data, ctx.identity.project, ctx.log, ctx.clientGone);
  };
  return {
    routes: profileRoutes({ store, stateDir }),
    start: () => sw.cleanStaging(),
    close: () => store.idle(),
  };
}
