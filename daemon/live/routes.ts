// The live view's routes: the page and its WebSocket. Both take the token also as ?jwt= or
// ?token= (a link opened by a person; a page's WebSocket cannot send headers), and the page
// answers errors as a small HTML page to a browser.
import { z } from 'zod';
import { lazy } from '../core/lazy.js';
import { ForbiddenError } from '../core/errors.js';
import type { Identity } from '../http/auth.js';
import { qBool, qString } from '../http/query.js';
import type { Route } from '../http/router.js';
import { routesIn } from '../http/route.js';
import { LIVE_PAGE, LIVE_PAGE_CSP } from './page.js';
import type { LiveHub } from './viewers.js';

const route = routesIn('daemon/live/routes.ts');

const query = lazy(() => z.strictObject({
  readOnly: qBool('true: watch only, input is ignored (also without the live:control scope)'),
  jwt: qString('the token, for clients that cannot send an Authorization header (a link handed to a person)'),
  token: qString('the same as jwt'),
}));

/** May watch: live:view or live:control. */
function canView(identity: Identity | null): boolean {
  if (identity === null || !(identity.scopes.has('live:view') || identity.scopes.has('live:control'))) throw new ForbiddenError('live:view');
  return true;
}

export function liveRoutes(hub: LiveHub): Route[] {
  return [
    route({
      method: 'GET',
      path: '/browsers/{id}/live',
      scope: 'any',
      queryToken: true,
      htmlErrors: true,
      doc: () => ({
        summary: 'The live view: a page that shows the browser and lets a person take it over',
        description:
          'A self-contained HTML page (nothing fetched but its own WebSocket): the current tab as a screencast scaled to the window, ' +
          'tabs, address bar, back/forward/reload, and the mouse, keyboard, text input and clipboard (paste in, copy out) of the person. ' +
          'Needs live:view (watch) or live:control (watch and act; readOnly=true makes it watch only). The token may be given as ?jwt= or ?token= ' +
          'and goes along to the WebSocket. Errors are an HTML page for a browser (Accept: text/html).',
        query: query(),
        responses: { 200: { description: 'the page', mediaType: 'text/html', schema: { type: 'string' } } },
      }),
      handler: async (ctx) => {
        canView(ctx.identity);
        ctx.res.writeHead(200, {
          'content-type': 'text/html; charset=utf-8',
          'content-length': Buffer.byteLength(LIVE_PAGE),
          'content-security-policy': LIVE_PAGE_CSP,
          'cache-control': 'no-store',
          'referrer-policy': 'no-referrer',
          'x-content-type-options': 'nosniff',
        });
        ctx.res.end(LIVE_PAGE);
        return null;
      },
    }),
    route({
      method: 'GET',
      path: '/browsers/{id}/live/ws',
      scope: 'any',
      queryToken: true,
      doc: () => ({
        summary: "WebSocket: the live view's frames and input",
        description:
          'Binary messages to the client are JPEG frames of the current tab (the newest only: a slow client skips frames). Text messages are JSON: ' +
          'to the client {"t":"hello","control"}, {"t":"state","tabs","url","canGoBack","canGoForward"}, {"t":"copied","text"}, {"t":"error","message"}; ' +
          'from it (live:control, not readOnly) {"t":"move"|"down"|"up"|"wheel","x","y",…} with x and y from 0 to 1 over the frame, ' +
          '{"t":"keydown"|"keyup","key","code","keyCode","text"?,"mods"}, {"t":"text","text"}, {"t":"copy"}, {"t":"navigate","url"}, {"t":"back"|"forward"|"reload"}, ' +
          '{"t":"activate","targetId"}. Input goes through the computer controls\' input queue. Closes with 1001 when the daemon stops, ' +
          '1013 when more than 1000 input messages wait.',
        query: query(),
        responses: { 101: { description: 'Switching Protocols: frames follow' } },
        errors: [400, 503],
      }),
      upgrade: (ctx) => {
        try {
          canView(ctx.identity);
        } catch (err) {
          ctx.refuse(err);
          return;
        }
        hub.handle(ctx, ctx.identity.scopes.has('live:control') && ctx.query.readOnly !== true);
      },
    }),
  ];
}
