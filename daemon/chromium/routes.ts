// The browser routes: GET /browsers/{id} (the session, a superset of the SDK's BrowserRetrieveResponse)
// and POST /browsers/{id}/restart.
import { z } from 'zod';
import { waitQuery } from '../http/query.js';
import type { Route } from '../http/router.js';
import type { BrowserSnapshot, RestartResult } from './types.js';

const STATES = ['starting', 'ready', 'restarting', 'failed', 'stopped'] as const;
const lastExitSchema = z.object({
  code: z.number().int().nullable().describe('exit code, null when ended by a signal'),
  signal: z.string().nullable().describe('e.g. SIGKILL, null when it exited with a code'),
  at: z.string().describe('ISO time'),
  reason: z.string().describe('crash, launch failed, restart requested, restart: <reason>, stopped'),
});
export const snapshotSchema = z.looseObject({
  id: z.string(),
  session_id: z.string().describe('the SDK name of id'),
  state: z.enum(STATES),
  reason: z.string().nullable().describe('why the browser is failed (or restarting after a crash or failed launch), else null'),
  chromium: z.object({
    pid: z.number().int().nullable().describe('the current Chromium (null while none runs)'),
    version: z.string().nullable().describe('the product of Browser.getVersion, once ready'),
    started_at: z.string().nullable().describe('ISO time the current Chromium was spawned'),
    restarts: z.number().int().describe('launches since the daemon started, besides the first'),
    last_exit: lastExitSchema.nullable(),
  }),
  cdp_url: z.string().describe('ws://host:port/browsers/{id}/cdp: the same across Chromium restarts; needs the cdp scope'),
  cdp_ws_url: z.string().describe('the SDK name of cdp_url'),
  webdriver_ws_url: z.string().describe('always "": WebDriver BiDi is not served'),
  created_at: z.string().describe('when this daemon started serving the session (ISO time)'),
  headless: z.boolean(),
  stealth: z.boolean().describe('always false'),
  timeout_seconds: z.number().int().describe('always 0: the VM has no inactivity timeout'),
  extensions: z.array(z.unknown()),
});

export interface BrowserRouteDeps {
  snapshot(): BrowserSnapshot;
  /** Restart under the lifecycle lock (queued, or 409 busy with wait false); the snapshot is taken under the lock. */
  restart(opts: { wait: boolean; signal: AbortSignal }): Promise<{ result: RestartResult; snapshot: BrowserSnapshot }>;
}

export function browserRoutes(deps: BrowserRouteDeps): Route[] {
  return [
    {
      method: 'GET',
      path: '/browsers/{id}',
      scope: 'browser:read',
      doc: {
        summary: 'The browser session: state, the current Chromium, its last exit, the CDP URL',
        description:
          "A superset of the SDK's BrowserRetrieveResponse: its names (session_id, cdp_ws_url, created_at, headless, stealth, timeout_seconds, " +
          'webdriver_ws_url) beside the daemon\'s own (id, state, chromium, cdp_url, extensions, and the fields other modules add: proxy_id and proxy, downloads_dir, browser_live_view_url — the live view page to hand a person).',
        responses: { 200: { description: 'the browser', schema: snapshotSchema } },
      },
      handler: async () => ({ status: 200, body: deps.snapshot() }),
    },
    {
      method: 'POST',
      path: '/browsers/{id}/restart',
      scope: 'browser:write',
      doc: {
        summary: 'Restart Chromium; answers once DevTools is ready again',
        description:
          'Stops the whole Chromium tree (SIGTERM, SIGKILL after BROWSERD_STOP_GRACE_MS) and launches it again with the installed extensions. ' +
          'A `failed` browser (crash loop) is started afresh with its crash history cleared; a `stopped` one is started. ' +
          'Restarts, extension installs and shutdown share one lock: a request queues behind a running operation in arrival order, ' +
          'and each queued request restarts again when its turn comes; with `?wait=false` it is refused with 409 busy instead. ' +
          'Live CDP connections are closed with code 1012. 503 when Chromium does not become ready within BROWSERD_READY_TIMEOUT_MS.',
        query: waitQuery,
        responses: { 200: { description: 'Chromium is ready again', schema: snapshotSchema } },
        errors: [400, 409, 503],
      },
      handler: async (ctx) => {
        const { snapshot } = await deps.restart({ wait: ctx.query.wait !== false, signal: ctx.signal });
        return { status: 200, body: snapshot };
      },
    },
  ];
}
