// The `extensions` part of POST /browsers/{id}/configure: the SDK's BrowserExtension list
// [{id | name}], naming installed extensions (by name or Chromium id). Every installed extension is
// loaded at every launch; configure checks that each named one exists before anything changes and,
// after its one restart, that each is enabled in Chromium, else everything is undone.
import { z } from 'zod';
import { lazy } from '../core/lazy.js';
import { NotFoundError } from '../core/errors.js';
import type { ConfigurePart } from '../chromium/types.js';
import type { Installer } from './installer.js';
import type { InstalledEntry, Store } from './store.js';

const ref = lazy(() => z
  .strictObject({
    id: z.string({ error: 'must be a string' }).min(1, 'must not be empty').max(255, 'must be at most 255 characters').optional().meta({ description: 'the Chromium id of an installed extension' }),
    name: z.string({ error: 'must be a string' }).min(1, 'must not be empty').max(255, 'must be at most 255 characters').optional().meta({ description: 'the name it was installed under' }),
  })
  .refine((r) => (r.id === undefined) !== (r.name === undefined), { message: 'give exactly one of id and name' }));
type Ref = z.output<ReturnType<typeof ref>>;

/** The installed extension a reference names, else undefined. */
function find(store: Store, r: Ref): InstalledEntry | undefined {
  if (r.name !== undefined) return store.committed.get(r.name);
  return [...store.committed.values()].find((e) => e.id === r.id);
}

const what = (r: Ref): string => (r.name !== undefined ? `named ${r.name}` : `with id ${r.id ?? ''}`);

export function extensionsConfigurePart(deps: { store: Store; installer: Installer; maxItems: number }): ConfigurePart {
  const { store, installer, maxItems } = deps;
  return {
    field: 'extensions',
    schema: lazy(() => z
      .array(ref(), { error: 'must be a list of {id} or {name}' })
      .max(maxItems, `at most ${maxItems} extensions (BROWSERD_EXTENSION_MAX_ITEMS)`)
      .meta({
        description:
          "The SDK's BrowserExtension list: installed extensions (POST /browsers/{id}/extensions) by name or Chromium id; each must exist, and is verified enabled in Chromium after the restart. Every installed extension is loaded at every launch.",
      })),
    check(value, _ctx, problems) {
      for (const [i, r] of (value as Ref[]).entries()) {
        if (find(store, r) === undefined) problems.missing.push(`extensions[${i}]: no installed extension ${what(r)}`);
      }
    },
    async stage(value) {
      const names = (value as Ref[]).map((r) => {
        const e = find(store, r);
        if (e === undefined) throw new NotFoundError(`no installed extension ${what(r)}: it was removed meanwhile`);
        return e.name;
      });
      return {
        verify: () => installer.verifyRunning(names),
        commit: async () => {},
        undo: async () => {},
      };
    },
  };
}
