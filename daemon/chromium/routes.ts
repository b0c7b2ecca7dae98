// The browser routes: GET /browsers/{id} (the session, a superset of the SDK's BrowserRetrieveResponse),
// POST /browsers/{id}/restart, and PATCH /browsers/{id} (the SDK's BrowserUpdateParams). The browser
// module owns PATCH and its own fields (viewport; the ones this daemon cannot honour); other modules
// add theirs with addUpdateFields (the proxy module: proxy_id, disable_default_proxy; the profiles
// module: profile), as they add their fields to GET with addSnapshotFields. The body is checked whole (every part's schema and check) before any part applies; parts
// apply in the order they were added, the browser's own last.
import { z, type ZodType } from 'zod';
import { lazy } from '../core/lazy.js';
import { ForbiddenError, UnsupportedFieldError } from '../core/errors.js';
import { waitQuery } from '../http/query.js';
import type { RequestContext, Route, RouteDoc } from '../http/router.js';
import { routesIn } from '../http/route.js';
import type { BrowserSnapshot, BrowserUpdatePart, RestartResult } from './types.js';

const route = routesIn('daemon/chromium/routes.ts');

const STATES = ['starting', 'ready', 'restarting', 'failed', 'stopped'] as const;
const lastExitSchema = lazy(() => z.object({
  code: z.number().int().nullable().describe('exit code, null when ended by a signal'),
  signal: z.string().nullable().describe('e.g. SIGKILL, null when it exited with a code'),
  at: z.string().describe('ISO time'),
  reason: z.string().describe('crash, launch failed, restart requested, restart: <reason>, stopped'),
}));
export const snapshotSchema = lazy(() => z.looseObject({
  id: z.string(),
  session_id: z.string().describe('the SDK name of id'),
  state: z.enum(STATES),
  reason: z.string().nullable().describe('why the browser is failed (or restarting after a crash or failed launch), else null'),
  chromium: z.object({
    pid: z.number().int().nullable().describe('the current Chromium (null while none runs)'),
    version: z.string().nullable().describe('the product of Browser.getVersion, once ready'),
    started_at: z.string().nullable().describe('ISO time the current Chromium was spawned'),
    restarts: z.number().int().describe('launches since the daemon started, besides the first'),
    last_exit: lastExitSchema().nullable(),
  }),
  cdp_url: z.string().describe('ws://host:port/browsers/{id}/cdp: the same across Chromium restarts; needs the cdp scope'),
  cdp_ws_url: z
    .string()
    .describe(
      'cdp_url under base_url, with `?jwt=` the record\'s `jwt`: for clients that cannot send headers, and the SDK\'s direct calls (its route cache reads the token from `jwt`, else from here).',
    ),
  jwt: z
    .string()
    .describe(
      'a session token this daemon signed for the caller who read the record: the caller\'s scopes, never more; its project; it expires after BROWSERD_JWT_TTL_SEC, ' +
        'and never later than the caller\'s own token (docs/tokens.md). The same token is in cdp_ws_url and browser_live_view_url. POST /browsers/{id}/tokens mints a narrower one.',
    ),
  base_url: z
    .string()
    .describe("the daemon's URL as callers reach it: BROWSERD_BASE_URL, else http://<the request's Host>. The SDK sends its direct calls there (KERNEL_BROWSER_ROUTING_SUBRESOURCES)"),
  browser_live_view_url: z.string().describe('the live view page, with `?jwt=` the record\'s `jwt` (docs/live-view.md)'),
  webdriver_ws_url: z.string().describe('in GET /browsers/{id}: WebDriver BiDi, ws://<host>/browsers/{id}/webdriver/session?jwt=<the record\'s jwt> (session.new over the socket; docs/webdriver.md); "" in other answers'),
  created_at: z.string().describe('when this daemon started serving the session (ISO time)'),
  headless: z.boolean(),
  stealth: z.boolean().describe('always false'),
  timeout_seconds: z.number().int().describe('always 0: the VM has no inactivity timeout'),
  extensions: z.array(z.unknown()),
  viewport: z
    .object({ width: z.number().int(), height: z.number().int(), refresh_rate: z.number().int().optional() })
    .describe('the size every tab renders at (BROWSERD_VIEWPORT until PATCH /browsers/{id} changes it)'),
  chrome_policy: z.record(z.string(), z.unknown()).describe("the SDK's name for the daemon's own policies (GET /browsers/{id}/chromium/policies)"),
}));

/** What the record adds for its reader: the SDK's direct calls (its BrowserRouteCache) and the live view link. */
export interface DirectFields {
  base_url: string;
  /** A token of the reader's scopes, never past the reader's own expiry (KeyRing.derive). */
  jwt: string;
  cdp_ws_url: string;
  /** The live view page with the same token: the link to hand a person. */
  browser_live_view_url: string;
}

/** The browser record as its reader gets it (GET, PATCH and restart answer it): the snapshot and the reader's direct fields. */
export type BrowserRecord = (ctx: RequestContext, snapshot?: BrowserSnapshot) => Promise<BrowserSnapshot & DirectFields>;

export interface BrowserRouteDeps {
  record: BrowserRecord;
  /** Restart under the lifecycle lock (queued, or 409 busy with wait false); the snapshot is taken under the lock. */
  restart(opts: { wait: boolean; signal: AbortSignal }): Promise<{ result: RestartResult; snapshot: BrowserSnapshot }>;
}

export function browserRoutes(deps: BrowserRouteDeps): Route[] {
  return [
    route({
      method: 'GET',
      path: '/browsers/{id}',
      scope: 'browser:read',
      doc: () => ({
        summary: 'The browser session: state, the current Chromium, its last exit, the CDP URL',
        description:
          "A superset of the SDK's BrowserRetrieveResponse: its names (session_id, cdp_ws_url, created_at, headless, stealth, timeout_seconds, " +
          'webdriver_ws_url, base_url) beside the daemon\'s own (id, state, chromium, cdp_url, extensions, and the fields other modules add: proxy_id and proxy, downloads_dir, browser_live_view_url — the live view page to hand a person). ' +
          "session_id, base_url and jwt fill the SDK's route cache: after `browsers.retrieve(id)` its direct calls (curl, telemetry/stream, and every subresource named in KERNEL_BROWSER_ROUTING_SUBRESOURCES) go to base_url with that token, " +
          'which carries the reader\'s scopes and expires no later than the reader\'s own token.',
        responses: { 200: { description: 'the browser', schema: snapshotSchema() } },
      }),
      handler: async (ctx) => ({ status: 200, body: await deps.record(ctx) }),
    }),
    route({
      method: 'POST',
      path: '/browsers/{id}/restart',
      scope: 'browser:write',
      doc: () => ({
        summary: 'Restart Chromium; answers once DevTools is ready again',
        description:
          'Stops the whole Chromium tree (SIGTERM, SIGKILL after BROWSERD_STOP_GRACE_MS) and launches it again with the installed extensions. ' +
          'A `failed` browser (crash loop) is started afresh with its crash history cleared; a `stopped` one is started. ' +
          'Restarts, extension installs and shutdown share one lock: a request queues behind a running operation in arrival order, ' +
          'and each queued request restarts again when its turn comes; with `?wait=false` it is refused with 409 busy instead. ' +
          'Live CDP connections are closed with code 1012. 503 when Chromium does not become ready within BROWSERD_READY_TIMEOUT_MS.',
        query: waitQuery(),
        responses: { 200: { description: 'Chromium is ready again', schema: snapshotSchema() } },
        errors: [400, 409, 503],
      }),
      handler: async (ctx) => {
        const { snapshot } = await deps.restart({ wait: ctx.query.wait !== false, signal: ctx.signal });
        return { status: 200, body: await deps.record(ctx, snapshot) };
      },
    }),
  ];
}

export const UPDATE_DOC = [
  "The SDK's browsers.update. Each field is owned by one module of the daemon: `proxy_id` (and `disable_default_proxy`) sets the browser's proxy, live (see the proxies docs); `viewport` {width, height, refresh_rate?} changes the size every tab renders at, live, without a restart (same Chromium pid, open tabs included), and is kept across Chromium and daemon restarts (scope browser:configure besides browser:write). Headless: the virtual screen and every window are the viewport. Headful (BROWSERD_HEADLESS=false): every window's outer size (toolbar included) is the viewport; the X display is the operator's and is not resized (docs/browser-configuration.md).",
  'The whole body is checked before anything changes (unknown fields: 400). `profile` {id | name, save_changes} restarts Chromium on a stored profile (open tabs are lost; docs/profiles.md; scope profiles:read besides browser:write). `telemetry` {enabled?, browser?} sets the telemetry category switches as the SDK describes (omitted, null or {}: unchanged; enabled true: the default set plus the named categories; enabled false: capture stops; categories alone merge onto the current selection; scope telemetry:write; docs/telemetry.md). Fields this daemon cannot honour are 422 unsupported_field naming the field: `name`, `tags`. An empty body changes nothing and returns the browser.',
].join('\n\n');

/** The fields of BrowserUpdateParams this daemon cannot honour (422 unsupported_field). */
export const unsupportedUpdatePart: BrowserUpdatePart = {
  fields: lazy(() => ({
    name: z.unknown().optional().meta({ description: 'Not supported: 422 unsupported_field' }),
    tags: z.unknown().optional().meta({ description: 'Not supported: 422 unsupported_field' }),
  })),
  check(body) {
    for (const field of ['name', 'tags'] as const) {
      if (body[field] !== undefined) throw new UnsupportedFieldError(field, 'is not supported by this daemon');
    }
  },
  apply: async () => {},
};

export function browserUpdateRoute(parts: readonly BrowserUpdatePart[], record: BrowserRecord, responseSchema: () => ZodType): Route {
  let schema: ZodType | null = null;
  let built = 0;
  const bodySchema = (): ZodType => {
    if (schema === null || built !== parts.length) {
      const shape: Record<string, ZodType> = {};
      for (const p of parts) Object.assign(shape, p.fields());
      schema = z.strictObject(shape).meta({ description: "The SDK's BrowserUpdateParams" });
      built = parts.length;
    }
    return schema;
  };
  const makeDoc = (): RouteDoc => ({
    summary: 'Update the browser: its proxy and its viewport (live), its profile (a restart)',
    description: UPDATE_DOC,
    get body() {
      return bodySchema();
    },
    responses: { 200: { description: 'the browser (as GET /browsers/{id}) once every change is in effect', schema: responseSchema() } },
    errors: [400, 409, 422, 503],
  });
  return route({
    method: 'PATCH',
    path: '/browsers/{id}',
    scope: 'browser:write',
    doc: makeDoc,
    handler: async (ctx) => {
      const body = ctx.body as Record<string, unknown>;
      const present = (p: BrowserUpdatePart): boolean => Object.keys(p.fields()).some((f) => body[f] !== undefined);
      for (const p of parts) {
        if (p.scope !== undefined && present(p) && ctx.identity !== null && !ctx.identity.scopes.has(p.scope)) throw new ForbiddenError(p.scope);
      }
      for (const p of parts) p.check?.(body, ctx);
      for (const p of parts) if (present(p)) await p.apply(body, ctx);
      return { status: 200, body: await record(ctx) };
    },
  });
}
