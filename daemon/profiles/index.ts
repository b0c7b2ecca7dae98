// The profiles concern: a store of Chromium user data archives on the VM (store.ts, archive.ts),
// the SDK's /profiles routes (routes.ts), and loading one into the running browser with its
// changes saved back at the next stop (switch.ts).
// Public face: createProfiles() → a module { routes, start(), close() }; it adds `profile` to PATCH /browsers/{id} and configure.
import { lazy } from '../core/lazy.js';
import { ConfigError } from '../core/config.js';
import type { Browser, BrowserUpdatePart, ConfigurePart } from '../chromium/types.js';
import type { Module, ModuleContext } from '../module.js';
import { profileDirOf } from '../chromium/sweep/profile.js';
import type { RequestContext, Route } from '../http/router.js';
import { BadRequestError, NotFoundError } from '../core/errors.js';
import { PROFILE_LIMITS } from './limits.js';
import { profileRefSchema, profileRoutes, toPublic } from './routes.js';
import { ProfileStore } from './store.js';
import { findProfile, ProfileSwitch, type ProfileRef } from './switch.js';

export { PROFILE_LIMITS } from './limits.js';

export interface Profiles extends Module {
  readonly routes: Route[];
  /** Removes what a killed daemon left (staging folders). */
  start(): Promise<void>;
  close(): Promise<void>;
}

export function createProfiles(ctx: ModuleContext, deps: { browser: Browser }): Profiles {
  const { config } = ctx;
  const log = ctx.log.child({ module: 'profiles' });
  const stateDir = config.stateDir;
  let store: ProfileStore;
  try {
    store = ProfileStore.open(stateDir, log);
  } catch (err) {
    throw new ConfigError('BROWSERD_STATE_DIR', `cannot open the profile store: ${(err as Error).message}`);
  }
  const sw = new ProfileSwitch({
    store,
    browser: deps.browser,
    profileDir: profileDirOf(config.agent.dir),
    owner: config.agent.separated ? { uid: config.agent.user.uid, gid: config.agent.user.gid } : null,
    limits: { maxEntries: PROFILE_LIMITS.maxEntries, maxUnpackedBytes: PROFILE_LIMITS.maxUnpackedBytes, unpackedWhat: 'the unpacked profile' },
    log,
  });
  const updatePart = profileUpdatePart(store, sw);
  const configurePart = profileConfigurePart(store, sw);
  deps.browser.use({
    name: 'profiles',
    stopWork: () => sw.stopWork(),
    snapshot: () => {
      const loaded = store.loaded();
      const p = loaded === null ? undefined : store.get(loaded.id);
      return p === undefined ? {} : { profile: toPublic(p) };
    },
    update: updatePart,
    configure: configurePart,
  });
  return {
    name: 'profiles',
    routes: profileRoutes({ store, stateDir }),
    start: () => sw.cleanStaging(),
    close: () => store.idle(),
  };
}

/** The `profile` part of PATCH /browsers/{id} (the browser module owns the route). */
function profileUpdatePart(store: ProfileStore, sw: ProfileSwitch): BrowserUpdatePart {
  const load = async (value: unknown, ctx: RequestContext): Promise<void> => {
    const parsed = profileRefSchema().safeParse(value);
    if (!parsed.success) throw new BadRequestError(parsed.error.issues.map((i) => `profile${i.path.length > 0 ? `.${i.path.join('.')}` : ''}: ${i.message}`));
    if (ctx.identity === null) throw new Error('the profile update needs an identity');
    await sw.load(parsed.data, ctx.identity.project, ctx.log, ctx.clientGone);
  };
  return {
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
  };
}

/** The `profile` part of POST /browsers/{id}/configure: put in place at configure's one restart. */
function profileConfigurePart(store: ProfileStore, sw: ProfileSwitch): ConfigurePart {
  return {
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
  };
}
