// The browser's configuration set through the API, kept in `<stateDir>/browser-settings.json`:
// the viewport, the managed policies of the daemon's own policy file and the extra Chromium flags.
// A core/json-store.ts JsonStore: read once at start through its schema (a file that cannot be read
// as settings is renamed aside and logged, never overwritten); every change is written atomically
// before it takes effect, and the in-memory value only changes once its write is on disk.
import path from 'node:path';
import { z } from 'zod';
import { lazy } from '../../core/lazy.js';
import { JsonStore } from '../../core/json-store.js';
import type { Logger } from '../../core/log.js';
import { allowedFlags } from './api-flags.js';
import type { Viewport } from './viewport.js';

export const SETTINGS_FILE = 'browser-settings.json';
const SETTINGS_VERSION = 1;

export interface BrowserSettings {
  /** null: the default (BROWSERD_VIEWPORT). */
  viewport: Viewport | null;
  /** Chrome enterprise policies of the daemon's own file in the policy folder. */
  policies: Record<string, unknown>;
  /** Extra Chromium flags, after BROWSERD_CHROMIUM_FLAGS. */
  flags: string[];
}

const fileSchema = lazy(() => z.object({
  version: z.literal(SETTINGS_VERSION),
  viewport: z.object({ width: z.number().int(), height: z.number().int(), refresh_rate: z.number().int().optional() }).nullable(),
  policies: z.record(z.string(), z.unknown()),
  flags: z.array(z.string()),
}));

export class SettingsStore {
  private constructor(private readonly store: JsonStore<z.output<ReturnType<typeof fileSchema>>>) {}

  static open(stateDir: string, log: Logger): SettingsStore {
    const store = JsonStore.open<z.output<ReturnType<typeof fileSchema>>>({
      file: path.join(stateDir, SETTINGS_FILE),
      schema: fileSchema,
      empty: () => ({ version: SETTINGS_VERSION, viewport: null, policies: {}, flags: [] }),
      indent: 2,
      log,
      event: 'browser_settings',
      what: 'the browser settings file',
    });
    // Flags kept by an older daemon are held to today's allowlist (flag-allowlist.ts): the ones it no
    // longer accepts are dropped here, the one way stored flags come back, and logged; the file is
    // written without them.
    const { kept, dropped } = allowedFlags(store.value.flags);
    if (dropped.length > 0) {
      log.warn({ event: 'browser_flags_dropped', flags: dropped }, 'stored flags not on the allowlist are dropped');
      store.set({ ...store.value, flags: kept }).catch((err: unknown) => log.error({ event: 'browser_settings_write_failed', err }, 'the browser settings file could not be written without the dropped flags'));
    }
    return new SettingsStore(store);
  }

  get(): BrowserSettings {
    const { version: _v, ...settings } = this.store.value;
    return settings;
  }

  /** Writes `next` (atomically, one write at a time), then makes it current. */
  set(next: BrowserSettings): Promise<void> {
    return this.store.set({ version: SETTINGS_VERSION, ...next });
  }
}
