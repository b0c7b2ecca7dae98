// The telemetry field of PATCH /browsers/{id} (the SDK's BrowserUpdateParams.Telemetry) and of the
// browser record (BrowserRetrieveResponse.telemetry): the same category switches as PATCH /telemetry,
// with the SDK's rules. Omitted, null or {}: unchanged. enabled true: the default set plus the named
// categories (a fresh selection). enabled false: every category off (not with categories). Categories
// without enabled: merged onto the current selection, or onto the default set when nothing is on.
// A selection with every category off stops capture.
import { z } from 'zod';
import { BadRequestError } from '../core/errors.js';
import { lazy } from '../core/lazy.js';
import type { BrowserUpdatePart } from '../chromium/types.js';
import type { CategorySwitches, TelemetryBus } from './bus.js';
import { CATEGORIES, DEFAULT_ON } from './event.js';
import { configBody } from './routes.js';

const updateSchema = lazy(() =>
  configBody()
    .extend({
      enabled: z.boolean({ error: 'must be a boolean' }).optional().meta({ description: 'true: the default set plus the named categories; false: stop capture (not with browser)' }),
    })
    .nullable()
    .optional()
    .meta({ description: "The SDK's BrowserUpdateParams.Telemetry: omitted, null or {} leave it unchanged (scope telemetry:write)" }),
);
type Update = NonNullable<z.output<ReturnType<typeof updateSchema>>>;

/** The active configuration as the record shows it: the switches that are on, or null when capture is stopped. */
export function activeTelemetry(bus: TelemetryBus): { browser: Record<string, { enabled: boolean }> } | null {
  const s = bus.categories();
  if (!CATEGORIES.some((c) => s[c])) return null;
  return { browser: Object.fromEntries(CATEGORIES.map((c) => [c, { enabled: s[c] }])) };
}

/** The switches an update sets (all of them), or null when it leaves them unchanged. */
export function switchesAfter(update: Update, current: CategorySwitches): CategorySwitches | null {
  const named = Object.entries(update.browser ?? {}).filter(([, v]) => v?.enabled !== undefined) as [keyof CategorySwitches, { enabled: boolean }][];
  if (update.enabled === undefined && named.length === 0) return null;
  const defaults = Object.fromEntries(CATEGORIES.map((c) => [c, DEFAULT_ON.has(c)])) as CategorySwitches;
  if (update.enabled === false) return Object.fromEntries(CATEGORIES.map((c) => [c, false])) as CategorySwitches;
  const capturing = CATEGORIES.some((c) => current[c]);
  const base = update.enabled === true || !capturing ? defaults : { ...current };
  for (const [c, v] of named) base[c] = v.enabled;
  return base;
}

export function telemetryUpdatePart(bus: TelemetryBus): BrowserUpdatePart {
  return {
    fields: lazy(() => ({ telemetry: updateSchema() })),
    scope: 'telemetry:write',
    check(body) {
      const t = body.telemetry as Update | null | undefined;
      if (t?.enabled === false && Object.values(t.browser ?? {}).some((v) => v?.enabled !== undefined)) {
        throw BadRequestError.field('telemetry.enabled', 'false stops capture and cannot be combined with browser category settings');
      }
    },
    apply: async (body) => {
      const t = body.telemetry as Update | null | undefined;
      if (t === undefined || t === null) return;
      const next = switchesAfter(t, bus.categories());
      if (next !== null) await bus.setCategories(next);
    },
  };
}
