// The REPL module: POST /browsers/{id}/repl, JavaScript in one long-lived Node process per session
// (worker/main.ts) whose top-level bindings persist between calls, with helpers for the browser
// (worker/helpers.ts). The process is started by the Playwright module's runner machinery (the
// agent user, a `cdp` token of its own, the daemon's CDP endpoint), which also ends it. Its face
// is createRepl().
import type { Playwright } from '../playwright/index.js';
import type { Route } from '../http/router.js';
import type { Module } from '../module.js';
import { REPL_ANSWER_LIMIT_BYTES, REPL_MAX_HEAP_MB, REPL_TEXT_LIMIT_BYTES } from './limits.js';
import { replRoutes } from './routes.js';
import { ReplSession } from './session.js';

interface ReplDeps {
  playwright: Pick<Playwright, 'runnerPool'>;
  /** The worker program (dist/daemon/repl/worker/main.js). */
  script: string;
}

export interface Repl extends Module {
  readonly routes: Route[];
}

export function createRepl(deps: ReplDeps): Repl {
  const pool = deps.playwright.runnerPool({ kind: 'repl', script: deps.script, maxHeapMb: REPL_MAX_HEAP_MB, outputLimitBytes: REPL_TEXT_LIMIT_BYTES, resultLimitBytes: REPL_ANSWER_LIMIT_BYTES });
  return { name: 'repl', routes: replRoutes({ session: new ReplSession(pool) }) };
}
