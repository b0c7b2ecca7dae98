// The routes of the browser's configuration: …/chromium/policies, …/chromium/flags and …/configure
// (scope browser:configure; reading: browser:read). What each needs (a restart or not) is in
// docs/browser-configuration.md.
import { z, type ZodType } from 'zod';
import { lazy } from '../../core/lazy.js';
import { ForbiddenError } from '../../core/errors.js';
import { issuesToProblems } from '../../http/body.js';
import { waitQuery } from '../../http/query.js';
import type { Route, RouteDoc } from '../../http/router.js';
import { routesIn } from '../../http/route.js';
import type { ConfigurePart, ConfigureProblems } from '../types.js';
import { VIEWPORT_LIMITS } from '../../core/viewport.js';
import { MAX_API_FLAGS } from './api-flags.js';
import type { ApplyOutcome, Configurator } from './configurator.js';
import { POLICY_LIMITS } from './policies.js';
import { viewportSchema } from './viewport.js';

const route = routesIn('daemon/chromium/settings/routes.ts');

/** The longest start URL accepted. */
export const MAX_START_URL_CHARS = 8192;

const policiesMap = lazy(() => z.record(z.string().max(200, 'a policy name has at most 200 characters'), z.unknown()).meta({
  description: 'Chrome enterprise policies by name; null removes one. Only the names of the daemon\'s list, with their JSON types; the ones the daemon relies on are refused (422 setting_refused)',
}));
const flagList = lazy(() => z
  .array(z.string({ error: 'must be a string' }), { error: 'must be a list of strings' })
  .max(MAX_API_FLAGS, `at most ${MAX_API_FLAGS} flags`)
  .meta({ description: '--name or --name=value, on the allowlist (docs/browser-configuration.md); a flag replaces the one of the same name' }));

const policiesBody = lazy(() => z.strictObject({ policies: policiesMap() }));
const policiesAnswer = lazy(() => z.object({
  policies: z.record(z.string(), z.unknown()).meta({ description: "the daemon's own policies (its file in the policy folder)" }),
  file: z.string().meta({ description: "the daemon's policy file" }),
  chromium: z.object({ restarted: z.boolean(), pid: z.number().int().nullable(), ready_ms: z.number().nullable() }).optional(),
}));
const flagsBody = lazy(() => z.strictObject({ flags: flagList().optional(), remove: flagList().optional().meta({ description: 'names of flags to drop (--name)' }) }));
const flagsAnswer = lazy(() => z.object({
  flags: z.array(z.string()).meta({ description: 'the flags set through the API (after BROWSERD_CHROMIUM_FLAGS)' }),
  operator_flags: z.array(z.string()).meta({ description: 'BROWSERD_CHROMIUM_FLAGS (read-only)' }),
  chromium: z.object({ restarted: z.boolean(), pid: z.number().int().nullable(), ready_ms: z.number().nullable() }).optional(),
}));
const startUrl = lazy(() => z
  .string()
  .max(MAX_START_URL_CHARS, `must be at most ${MAX_START_URL_CHARS} characters`)
  .refine((s) => {
    try {
      const u = new URL(s);
      return u.protocol === 'http:' || u.protocol === 'https:' || s === 'about:blank';
    } catch {
      return false;
    }
  }, 'must be an http or https URL (or about:blank)'));
/** configure's own fields; the modules add theirs (extensions, profile) with Browser.addConfigurePart. */
const ownConfigureFields = lazy(() => ({
  policies: policiesMap().optional(),
  flags: flagList().optional(),
  viewport: viewportSchema().optional(),
  start_url: startUrl().optional().meta({ description: 'the page Chromium opens after this restart' }),
}));
const configureBodyOf = (parts: readonly ConfigurePart[]): ZodType =>
  z
    .strictObject({ ...ownConfigureFields(), ...Object.fromEntries(parts.map((p) => [p.field, p.schema().optional()])) })
    .meta({ description: 'Every part is optional; all are checked before anything changes' });
/** What configure reads first: a JSON object, each field checked on its own after (so every problem of every part, unknown fields included, is listed). */
const envelopeOf = (): ZodType => z.record(z.string(), z.unknown());
/** The fields configure knows: its own, then the parts'. */
const configureFields = (parts: readonly ConfigurePart[]): string[] => [...Object.keys(ownConfigureFields()), ...parts.map((p) => p.field)];

/** A part of configure checked against its schema; its problems (prefixed with the field) go to `invalid`. */
function part<T>(schema: ZodType<T>, value: unknown, field: string, invalid: string[]): T | undefined {
  if (value === undefined) return undefined;
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  invalid.push(...issuesToProblems(r.error.issues).map((p) => (p.startsWith('(body)') ? `${field}${p.slice('(body)'.length)}` : `${field}.${p}`)));
  return undefined;
}

const configureAnswer = lazy(() => z.object({
  viewport: viewportSchema(),
  policies: z.record(z.string(), z.unknown()),
  flags: z.array(z.string()),
  chromium: z.object({ restarted: z.boolean(), pid: z.number().int().nullable(), ready_ms: z.number().nullable() }),
}));

const chromiumOf = (o: ApplyOutcome) => ({ restarted: o.restarted, pid: o.pid, ready_ms: o.ready_ms });

const CONFIGURE_DOC =
  'Every part is checked before anything changes: any bad part and nothing changes, every problem listed in `details` (400 bad_request when any is invalid, ' +
  'else 422 setting_refused; a detail\'s code says which: invalid_input, refused, not_found). ' +
  'Then, under the lifecycle lock, the settings are written and Chromium restarts once with all of them (a viewport alone also restarts here: use PATCH /browsers/{id} for a live change), opening `start_url` instead of about:blank. ' +
  '`extensions` [{id | name}] (the SDK\'s BrowserExtension) names installed extensions (POST /browsers/{id}/extensions; by name or Chromium id): each must exist (else not_found), and after the restart each is verified enabled in Chromium (Extensions.getExtensions; a policy install on chrome://policy); ' +
  'every installed extension is loaded at every launch, named or not. `profile` {id | name, save_changes} (the SDK\'s BrowserProfile; scope profiles:read) puts that stored profile in place at the restart, as PATCH /browsers/{id} does (the loaded profile is saved first when it was loaded with save_changes; open tabs are lost); an unknown profile is not_found. ' +
  'When Chromium does not become ready with the new settings, or a part is not in effect after the restart, everything is put back (settings, policy file, the previous user data folder and loaded profile) and Chromium restarts with the previous settings (503 browser_unavailable, or 422 activation_failed for an extension that did not start). ' +
  `Limits: viewport ${VIEWPORT_LIMITS.minWidth}–${VIEWPORT_LIMITS.maxWidth} × ${VIEWPORT_LIMITS.minHeight}–${VIEWPORT_LIMITS.maxHeight}; at most ${MAX_API_FLAGS} flags; ${POLICY_LIMITS.maxPolicies} policies; start_url ${MAX_START_URL_CHARS} characters; extensions: BROWSERD_EXTENSION_MAX_ITEMS items. ` +
  'Headful (BROWSERD_HEADLESS=false): the viewport sizes the window; the X display is not the daemon\'s and is not resized (docs/browser-configuration.md).';

export interface SettingsRouteDeps {
  configurator: Configurator;
  operatorFlags: readonly string[];
  /** The modules' configure parts (registered after the routes are made: read at each request). */
  configureParts: readonly ConfigurePart[];
}

export function settingsRoutes({ configurator: c, operatorFlags, configureParts }: SettingsRouteDeps): Route[] {
  let built: { n: number; body: ZodType; envelope: ZodType } | null = null;
  const schemas = (): { body: ZodType; envelope: ZodType } => {
    if (built === null || built.n !== configureParts.length) built = { n: configureParts.length, body: configureBodyOf(configureParts), envelope: envelopeOf() };
    return built;
  };
  const configureDoc = (): RouteDoc => ({
    summary: 'Policies, flags, viewport, extensions, a profile and a start URL together, with one restart; all or nothing',
    description: CONFIGURE_DOC,
    query: waitQuery(),
    get body() {
      return schemas().body;
    },
    responses: { 200: { description: 'the settings once Chromium is ready with them', schema: configureAnswer() } },
    errors: [400, 403, 409, 422, 503],
  });
  const policiesNow = () => ({ policies: c.settings.policies, file: c.policyFile() });
  const flagsNow = () => ({ flags: c.settings.flags, operator_flags: [...operatorFlags] });
  return [
    route({
      method: 'GET',
      path: '/browsers/{id}/chromium/policies',
      scope: 'browser:read',
      doc: () => ({ summary: "The daemon's own Chrome enterprise policies", responses: { 200: { description: 'the policies', schema: policiesAnswer() } } }),
      handler: async () => ({ status: 200, body: policiesNow() }),
    }),
    route({
      method: 'PATCH',
      path: '/browsers/{id}/chromium/policies',
      scope: 'browser:configure',
      doc: () => ({
        summary: 'Merge Chrome enterprise policies; Chromium restarts to apply them',
        description:
          `Merges into the daemon's own file in the policy folder (BROWSERD_POLICY_DIR; other files there are never written): a value sets a policy, null removes it. ` +
          `Names and JSON types are checked against the daemon's policy list (400 naming each unknown name or wrong type); the policies the daemon relies on are refused with 422 setting_refused naming each. ` +
          `At most ${POLICY_LIMITS.maxPolicies} policies. Kept across daemon restarts. Chromium reads policies at start: a change restarts it once (under the lifecycle lock; ?wait=false: 409 busy instead of queueing); a merge that changes nothing does not.`,
        query: waitQuery(),
        body: policiesBody(),
        responses: { 200: { description: 'the policies once Chromium is ready with them', schema: policiesAnswer() } },
        errors: [400, 409, 422, 503],
      }),
      handler: async (ctx) => {
        const body = ctx.body;
        const o = await c.apply({ policies: body.policies }, { wait: ctx.query.wait !== false, signal: ctx.signal, log: ctx.log });
        return { status: 200, body: { ...policiesNow(), chromium: chromiumOf(o) } };
      },
    }),
    route({
      method: 'GET',
      path: '/browsers/{id}/chromium/flags',
      scope: 'browser:read',
      doc: () => ({ summary: 'The Chromium flags set through the API, and the operator\'s', responses: { 200: { description: 'the flags', schema: flagsAnswer() } } }),
      handler: async () => ({ status: 200, body: flagsNow() }),
    }),
    route({
      method: 'PATCH',
      path: '/browsers/{id}/chromium/flags',
      scope: 'browser:configure',
      doc: () => ({
        summary: 'Merge Chromium flags; Chromium restarts to apply them',
        description:
          `Each flag must be --name or --name=value, on the daemon's allowlist with a value of its grammar (docs/browser-configuration.md: no flag that runs a command, loads code, takes a path, or takes over the profile, DevTools, the proxy, the viewport or the sandbox); anything else is 400 naming each. A flag replaces the one of the same name, \`remove\` drops names. ` +
          `At most ${MAX_API_FLAGS} flags. They come after BROWSERD_CHROMIUM_FLAGS (the last of a switch wins). Kept across daemon restarts. A change restarts Chromium once; a merge that changes nothing does not.`,
        query: waitQuery(),
        body: flagsBody(),
        responses: { 200: { description: 'the flags once Chromium is ready with them', schema: flagsAnswer() } },
        errors: [400, 409, 503],
      }),
      handler: async (ctx) => {
        const body = ctx.body;
        const o = await c.apply({ flags: body.flags ?? [], removeFlags: body.remove ?? [] }, { wait: ctx.query.wait !== false, signal: ctx.signal, log: ctx.log });
        return { status: 200, body: { ...flagsNow(), chromium: chromiumOf(o) } };
      },
    }),
    route({
      method: 'POST',
      path: '/browsers/{id}/configure',
      scope: 'browser:configure',
      doc: configureDoc,
      readsBody: true, // its envelope first, then each part: every problem listed
      handler: async (ctx) => {
        const raw = (await ctx.json(schemas().envelope)) as Record<string, unknown>;
        const present = configureParts.filter((p) => raw[p.field] !== undefined);
        for (const p of present) {
          if (p.scope !== undefined && ctx.identity !== null && !ctx.identity.scopes.has(p.scope)) throw new ForbiddenError(p.scope);
        }
        const invalid: string[] = [];
        const problems: ConfigureProblems = { invalid, missing: [] };
        const known = configureFields(configureParts);
        for (const k of Object.keys(raw)) if (!known.includes(k)) invalid.push(`${k}: unknown field (configure takes ${known.join(', ')})`);
        const policies = part(policiesMap(), raw.policies, 'policies', invalid);
        const flags = part(flagList(), raw.flags, 'flags', invalid);
        const viewport = part(viewportSchema(), raw.viewport, 'viewport', invalid);
        const start = part(startUrl(), raw.start_url, 'start_url', invalid);
        const values = new Map<ConfigurePart, unknown>();
        for (const p of present) {
          const before = invalid.length;
          const value = part(p.schema(), raw[p.field], p.field, invalid);
          if (invalid.length === before) {
            p.check(value, ctx, problems);
            values.set(p, value);
          }
        }
        const change = {
          ...(policies !== undefined ? { policies } : {}),
          ...(flags !== undefined ? { flags } : {}),
          ...(viewport !== undefined ? { viewport } : {}),
          ...(start !== undefined ? { startUrl: start } : {}),
        };
        c.check(change, invalid, [], problems.missing);
        const stages = [...values].map(([p, value]) => () => p.stage(value, ctx));
        const o = await c.apply(change, { wait: ctx.query.wait !== false, signal: ctx.signal, log: ctx.log, restart: true, parts: stages });
        const s = c.settings;
        return { status: 200, body: { viewport: c.viewport(), policies: s.policies, flags: s.flags, chromium: chromiumOf(o) } };
      },
    }),
  ];
}
