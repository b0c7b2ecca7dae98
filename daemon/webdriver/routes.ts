// The WebDriver routes: classic (every command, proxied to ChromeDriver) and the BiDi WebSockets.
// Scope `cdp`: a WebDriver session can do nothing a CDP client cannot (ChromeDriver drives the
// browser over CDP), so the scope that grants CDP grants WebDriver, and cdp_ws_url's token serves
// webdriver_ws_url too.
import type { Route, RouteDoc, UpgradeContext } from '../http/router.js';
import { routesIn } from '../http/route.js';
import type { Reply, RequestContext } from '../http/router.js';
import type { BidiBridge } from './bidi.js';
import { WEBDRIVER_BODY_LIMIT_BYTES, type ClassicReply, type ClassicRequest } from './classic.js';

const route = routesIn('daemon/webdriver/routes.ts');

const ABOUT =
  'WebDriver classic (W3C), proxied to ChromeDriver (Debian\'s chromium-driver, the same build as the Chromium), which the daemon runs attached ' +
  'to its own Chromium (docs/webdriver.md). The answer is ChromeDriver\'s, in WebDriver\'s own shape ({"value": …}; errors {"value": {"error", "message", "stacktrace"}}); ' +
  'the daemon\'s own errors (token, scope, refused capabilities, ChromeDriver unavailable) are in the API\'s error shape. ' +
  `Request bodies up to ${WEBDRIVER_BODY_LIMIT_BYTES} bytes. A Chromium restart ends every WebDriver session (a command in flight answers 503).`;

const anyJson = { type: 'object', description: 'the WebDriver command\'s answer: {"value": …}' };

export interface WebDriverRouteDeps {
  /** A classic command; `bidiUrl` makes a session's webSocketUrl for this request's caller. */
  classic(req: ClassicRequest, bidiUrl: (sessionId: string) => Promise<string>): Promise<ClassicReply>;
  /** ws://<host>/browsers/{id}/webdriver/session/<sid>?jwt=<a token of the caller's cdp scope>. */
  bidiUrl(ctx: RequestContext, sessionId: string): Promise<string>;
  bidi: BidiBridge;
}

export function webdriverRoutes(deps: WebDriverRouteDeps): Route[] {
  const base = '/browsers/{id}/webdriver';
  const command = (summary: string, extra = ''): (() => RouteDoc) => () => ({
    summary,
    description: `${ABOUT}${extra}`,
    body: { mediaType: 'application/json', schema: { type: 'object', description: 'the WebDriver command\'s parameters' }, required: false },
    responses: { 200: { description: 'ChromeDriver\'s answer', schema: anyJson } },
    errors: [400, 413, 503],
  });
  const handler = (ctx: RequestContext): Promise<Reply> => deps.classic(ctx, (sessionId) => deps.bidiUrl(ctx, sessionId));
  const routes: Route[] = [
    route({ method: 'GET', path: `${base}/status`, scope: 'cdp', doc: () => ({ summary: 'WebDriver Status: whether ChromeDriver can create sessions (starts it when it is not running)', description: ABOUT, responses: { 200: { description: 'ChromeDriver\'s status', schema: anyJson } }, errors: [503] }), handler }),
    route({
      method: 'POST',
      path: `${base}/session`,
      scope: 'cdp',
      doc: command(
        'WebDriver New Session, attached to the daemon\'s Chromium',
        ' The capabilities get goog:chromeOptions.debuggerAddress (the daemon\'s Chromium, never another browser). Refused with 400 bad_request, one detail per capability: ' +
          'goog:chromeOptions binary, args, extensions, debuggerAddress, excludeSwitches, localState, prefs, detach, minidumpPath or any other option than mobileEmulation, ' +
          'perfLoggingPrefs, windowTypes, w3c, enableExtensionTargets; and proxy. With webSocketUrl: true the answer\'s capabilities.webSocketUrl is this daemon\'s BiDi socket of the session, with ?jwt=.',
      ),
      handler,
    }),
    route({
      method: 'GET',
      path: `${base}/session`,
      scope: 'cdp',
      doc: () => ({
        summary: 'WebSocket: WebDriver BiDi, a session made over the socket (session.new)',
        description:
          'webdriver_ws_url of GET /browsers/{id}. Send session.new first (its capabilities are checked as New Session\'s: a refusal is the BiDi error "invalid argument" with the daemon\'s ' +
          'bad_request message and details). The session lives as long as the socket; its tabs (browsingContext.create) are closed when it ends. A Chromium restart closes the socket with 1012.',
        responses: { 101: { description: 'Switching Protocols: connected to ChromeDriver\'s BiDi endpoint' } },
        errors: [400, 503],
      }),
      upgrade: (ctx: UpgradeContext) => deps.bidi.handle(ctx, null),
    }),
    route({
      method: 'GET',
      path: `${base}/session/{session_id}`,
      scope: 'cdp',
      doc: () => ({
        summary: 'WebSocket: WebDriver BiDi of a classic session (its capabilities.webSocketUrl)',
        description: 'An unknown session is 404. The socket closes with 1000 when the session ends, 1012 when Chromium restarts or ChromeDriver exits.',
        responses: { 101: { description: 'Switching Protocols: connected to the session\'s BiDi endpoint' } },
        errors: [400, 503],
      }),
      upgrade: (ctx: UpgradeContext) => deps.bidi.handle(ctx, ctx.params.session_id ?? ''),
    }),
    route({ method: 'DELETE', path: `${base}/session/{session_id}`, scope: 'cdp', doc: command('WebDriver Delete Session', ' The tabs the session opened (New Window) are closed; no other.'), handler }),
  ];
  // Every other command: /session/{session_id}/<command>[/<a>[/<b>[/<c>]]], as WebDriver and ChromeDriver name them.
  const tails = ['{command}', '{command}/{a}', '{command}/{a}/{b}', '{command}/{a}/{b}/{c}'];
  for (const tail of tails) {
    for (const method of ['GET', 'POST', 'DELETE'] as const) {
      routes.push(route({ method, path: `${base}/session/{session_id}/${tail}`, scope: 'cdp', doc: command(`WebDriver command (${method} /session/{session_id}/${tail})`), handler }));
    }
  }
  return routes;
}
