// The live view: a page a person opens to watch the browser and take it over (GET
// /browsers/{id}/live), and its WebSocket. Its frames are the replays' screencast (one source for
// recordings and viewers), its input the computer controls' (one input queue for the agent and the
// person). Its public face is createLive().
import type { ComputerModule } from '../computer/index.js';
import type { Logger } from '../core/log.js';
import type { Scope } from '../http/auth.js';
import type { Route } from '../http/router.js';
import type { Screencast } from '../replays/index.js';
import { liveRoutes } from './routes.js';
import { LiveHub } from './viewers.js';

export interface LiveDeps {
  log: Logger;
  sessionId: string;
  /** The replays' shared screencast. */
  screencast: Screencast;
  computer: ComputerModule;
}

/**
 * Makes the token part of a live view URL: given the URL without a token and the scopes the link
 * grants (live:view, or live:view and live:control), returns the URL to hand out. The daemon's JWT
 * signer plugs in here (setLinkSigner) and adds `?jwt=<short-lived token>`; until then the URL goes
 * out without a token (the person's browser must be given one as ?token=).
 */
export type LinkSigner = (url: string, scopes: readonly Scope[]) => string;

export interface LiveModule {
  readonly routes: Route[];
  /** The live view URL for `browser_live_view_url` (scopes: what the link allows); null before the daemon listens. */
  liveViewUrl(scopes: readonly Scope[]): string | null;
  /** Where the JWT signer plugs in: every URL liveViewUrl() hands out goes through it. */
  setLinkSigner(signer: LinkSigner): void;
  setPublicAddress(host: string, port: number): void;
  close(): Promise<void>;
}

export function createLive(deps: LiveDeps): LiveModule {
  const log = deps.log.child({ module: 'live' });
  const hub = new LiveHub({ screencast: deps.screencast, computer: deps.computer, log });
  let base: string | null = null;
  let signer: LinkSigner = (url) => url;
  return {
    routes: liveRoutes(hub),
    liveViewUrl: (scopes) => (base === null ? null : signer(`${base}/browsers/${encodeURIComponent(deps.sessionId)}/live`, scopes)),
    setLinkSigner: (s) => {
      signer = s;
    },
    setPublicAddress: (host, port) => {
      const h = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
      base = `http://${h.includes(':') ? `[${h}]` : h}:${port}`;
    },
    close: async () => hub.close(),
  };
}
