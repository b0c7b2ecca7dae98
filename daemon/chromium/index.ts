// Placeholder until the supervisor lands: the browser is `stopped` and never ready.
import { z } from 'zod';
import type { Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import type { Metrics } from '../core/metrics.js';
import type { Route } from '../http/router.js';

export interface BrowserDeps {
  config: Config;
  log: Logger;
  metrics: Metrics;
}

export interface Browser {
  readonly routes: Route[];
  /** Begin launching (returns at once; state `starting`). */
  start(): void;
  /** null when ready, else why not. */
  notReadyReason(): string | null;
  /** Graceful stop of the whole tree. Idempotent. */
  close(): Promise<void>;
}

const browserSchema = z.object({ id: z.string(), state: z.enum(['starting', 'ready', 'restarting', 'failed', 'stopped']) });

export function createBrowser(deps: BrowserDeps): Browser {
  const { sessionId } = deps.config;
  return {
    routes: [
      {
        method: 'GET',
        path: '/browsers/{id}',
        scope: 'browser:read',
        doc: { summary: 'The browser session', responses: { 200: { description: 'the browser', schema: browserSchema } } },
        handler: async () => ({ status: 200, body: { id: sessionId, state: 'stopped' } }),
      },
    ],
    start() {},
    notReadyReason: () => 'Chromium is not started',
    close: async () => {},
  };
}
