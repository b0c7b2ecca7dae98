// The browser's configuration set through the API, kept in `<stateDir>/browser-settings.json`:
// the viewport, the managed policies of the daemon's own policy file and the extra Chromium flags.
// Read once at start (a file that cannot be read as settings is renamed aside and logged, never
// overwritten); every change is written atomically (core/fs-atomic.ts) before it takes effect, and
// the in-memory value only changes once its write is on disk.
import { readFileSync, renameSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { lazy } from '../../core/lazy.js';
import { writeFileAtomic } from '../../core/fs-atomic.js';
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
  private current: BrowserSettings;
  private writing: Promise<void> = Promise.resolve();

  private constructor(
    private readonly file: string,
    initial: BrowserSettings,
  ) {
    this.current = initial;
  }

  static open(stateDir: string, log: Logger): SettingsStore {
    const file = path.join(stateDir, SETTINGS_FILE);
    let initial: BrowserSettings = { viewport: null, policies: {}, flags: [] };
    let text: string | null = null;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    if (text !== null) {
      const parsed = (() => {
        try {
          return fileSchema().safeParse(JSON.parse(text));
        } catch {
          return null;
        }
      })();
      if (parsed?.success === true) {
        const { version: _v, ...rest } = parsed.data;
        // Flags kept by an older daemon are held to today's allowlist (flag-allowlist.ts): the ones
        // it no longer accepts are dropped here, the one way stored flags come back, and logged.
        const { kept, dropped } = allowedFlags(rest.flags);
        if (dropped.length > 0) log.warn({ event: 'browser_flags_dropped', flags: dropped }, 'stored flags not on the allowlist are dropped');
        initial = { ...rest, flags: kept };
      } else {
        const aside = `${file}.broken-${Date.now()}`;
        renameSync(file, aside);
        log.error({ event: 'browser_settings_broken', file, moved_to: aside }, 'the browser settings file could not be read: set aside, starting from the defaults');
      }
    }
    return new SettingsStore(file, initial);
  }

  get(): BrowserSettings {
    return this.current;
  }

  /** Writes `next` (atomically, one write at a time), then makes it current. */
  set(next: BrowserSettings): Promise<void> {
    const run = this.writing.then(async () => {
      await writeFileAtomic(this.file, `${JSON.stringify({ version: SETTINGS_VERSION, ...next }, null, 2)}\n`, 0o600);
      this.current = next;
    });
    this.writing = run.catch(() => undefined);
    return run;
  }
}
