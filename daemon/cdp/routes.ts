// The CDP routes: the WebSocket endpoint (browser-level, and per target), and the DevTools HTTP
// discovery endpoints (answered by the daemon; Chromium listens on no port). All need the `cdp` scope.
import { z } from 'zod';
import { lazy } from '../core/lazy.js';
import { Deadline } from '../core/deadline.js';
import type { RequestContext, Route, UpgradeContext } from '../http/router.js';
import { routesIn } from '../http/route.js';
import { CDP_READY_WAIT_MS, type BridgeHost, type CdpBridge, type ReadyMux } from './bridge.js';
import { protocolDocument, targetList, versionInfo } from './discovery.js';

const route = routesIn('daemon/cdp/routes.ts');

interface CdpRoutesHost extends BridgeHost {
  /** ws://<host>/browsers/{id}/cdp for a request that came to `hostHeader` (else the listen address). */
  wsBase(hostHeader: string | undefined): string;
}

const CLOSE_CODES =
  'A Chromium restart or exit closes the socket with 1012 (reconnect to the same URL); daemon shutdown with 1001; a message over ' +
  'BROWSERD_CDP_MAX_MESSAGE_BYTES (either direction) with 1009; a client that reads too slowly with 1013: more than BROWSERD_CDP_CLIENT_QUEUE_BYTES ' +
  'unsent to it (reason slow_client: …), or the most unsent when every client together holds more than BROWSERD_CDP_QUEUE_TOTAL_BYTES (reason ' +
  'cdp_queue_full: …); a closed client that still does not read is cut without a close frame.';

const versionSchema = lazy(() => z.object({
  Browser: z.string(),
  'Protocol-Version': z.string(),
  'User-Agent': z.string(),
  'V8-Version': z.string(),
  'WebKit-Version': z.string(),
  webSocketDebuggerUrl: z.string(),
}));
const listSchema = lazy(() => z.array(
  z.object({ description: z.string(), id: z.string(), title: z.string(), type: z.string(), url: z.string(), webSocketDebuggerUrl: z.string() }),
));

export function cdpRoutes(host: CdpRoutesHost, bridge: CdpBridge): Route[] {
  const base = '/browsers/{id}/cdp';
  const wsBase = (ctx: RequestContext): string => host.wsBase(typeof ctx.req.headers.host === 'string' ? ctx.req.headers.host : undefined);
  const withMux = async <T>(ctx: RequestContext, fn: (ready: ReadyMux) => Promise<T>): Promise<T> => {
    const deadline = Deadline.in(CDP_READY_WAIT_MS, 'waiting for Chromium', ctx.signal);
    try {
      return await fn(await host.waitMux(deadline));
    } finally {
      deadline.dispose();
    }
  };
  const list: Route['handler'] = async (ctx) => withMux(ctx, async ({ mux }) => ({ status: 200, body: await targetList(mux, wsBase(ctx), ctx.signal) }));

  return [
    route({
      method: 'GET',
      path: base,
      scope: 'cdp',
      doc: () => ({
        summary: 'WebSocket: the Chrome DevTools Protocol of the browser',
        description:
          'Chromium runs with --remote-debugging-pipe (no TCP port); every client of this endpoint gets its own browser-level session over ' +
          'that pipe (Target.attachToBrowserTarget): its Target.setDiscoverTargets and setAutoAttach state, its events and the sessions it ' +
          'attaches are its own, and its message ids are its own. The URL stays the same across restarts. ' +
          `A starting or restarting browser (or a stopped or failed one with a launch queued) is waited for up to ${CDP_READY_WAIT_MS / 1000} s, else 503 (at once when failed or stopped). ` +
          'Browser.close from a client is answered {} and Chromium is restarted afresh (reason client_close; not counted as a crash; ' +
          'every client is closed with 1012 and may reconnect). ' +
          CLOSE_CODES,
        responses: { 101: { description: 'Switching Protocols: the WebSocket has its session in Chromium' } },
        errors: [400, 503],
      }),
      upgrade: (ctx: UpgradeContext) => bridge.handle(ctx, { kind: 'browser' }),
    }),
    route({
      method: 'GET',
      path: `${base}/devtools/page/{target_id}`,
      scope: 'cdp',
      doc: () => ({
        summary: 'WebSocket: the DevTools Protocol of one target (as webSocketDebuggerUrl of /json/list names it)',
        description:
          'A session attached to the target (flat); messages without a sessionId go to it. The socket closes with 1000 when the target closes. ' +
          `An unknown target is 404. ${CLOSE_CODES}`,
        responses: { 101: { description: 'Switching Protocols: the WebSocket is attached to the target' } },
        errors: [400, 503],
      }),
      upgrade: (ctx) => bridge.handle(ctx, { kind: 'target', targetId: ctx.params.target_id }),
    }),
    route({
      method: 'GET',
      path: `${base}/json/version`,
      scope: 'cdp',
      doc: () => ({
        summary: "The browser's version, as Chromium's /json/version, with webSocketDebuggerUrl pointing at this daemon",
        description: 'For puppeteer.connect({browserURL}) and playwright chromium.connectOverCDP("http://…"): both fetch this (send the bearer token as a header to both).',
        responses: { 200: { description: 'the version', schema: versionSchema() } },
        errors: [503],
      }),
      handler: async (ctx) =>
        withMux(ctx, async ({ version }) => ({ status: 200, body: versionInfo(version, wsBase(ctx)) })),
    }),
    route({
      method: 'GET',
      path: `${base}/json/list`,
      scope: 'cdp',
      doc: () => ({
        summary: 'The inspectable targets, as Chromium\'s /json/list, each webSocketDebuggerUrl under this daemon',
        description: 'devtoolsFrontendUrl is left out: the DevTools front end is not served.',
        responses: { 200: { description: 'the targets', schema: listSchema() } },
        errors: [503],
      }),
      handler: list,
    }),
    route({
      method: 'GET',
      path: `${base}/json`,
      scope: 'cdp',
      doc: () => ({ summary: 'The same as /json/list', responses: { 200: { description: 'the targets', schema: listSchema() } }, errors: [503] }),
      handler: list,
    }),
    route({
      method: 'GET',
      path: `${base}/json/protocol`,
      scope: 'cdp',
      doc: () => ({
        summary: 'The DevTools protocol schema (the browser and JavaScript domains of the devtools-protocol release the daemon was built with)',
        responses: { 200: { description: 'the protocol', schema: { type: 'object' } } },
      }),
      handler: async (ctx) => {
        const text = protocolDocument();
        ctx.res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) }).end(text);
        return null;
      },
    }),
  ];
}
