// The Playwright module: POST /browsers/{id}/playwright/execute, run by a small pool of runner
// processes (pool.ts, runner-process.ts; the runner program is runner/main.ts). Its face is
// createPlaywright(); close() ends every runner (SIGTERM, SIGKILL after a grace), destroy() at once.
import { chown, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Module, ModuleContext } from '../module.js';
import type { KeyRing } from '../http/auth.js';
import type { Route } from '../http/router.js';
import { childEnv, resolveCwd, resolveUser } from '../processes/index.js';
import { RunnerPool, type PoolDeps } from './pool.js';
import { Executors } from './executors.js';
import type { Browser } from '../chromium/types.js';
import { Deadline } from '../core/deadline.js';
import { playwrightRoutes } from './routes.js';

/** How long closing a deleted executor's tab may take. */
const CLOSE_TAB_TIMEOUT_MS = 10_000;

interface PlaywrightDeps {
  /** Where each runner's token (scope `cdp` only) is registered and revoked. */
  keyring: Pick<KeyRing, 'addEphemeral'>;
  /** The runner program: main.ts knows it (tsc's output and the one-file bundle both sit in dist/daemon/). */
  runnerScript: string;
  /** The real path of the downloads folder (the files module's). */
  downloadsDir: string;
  /** Closes a deleted executor's tab, on a CDP session of the daemon's own. */
  browser: Pick<Browser, 'withCdp'>;
}

/** A pool of runner processes of another program (the REPL's), started like Playwright's: the agent user, a `cdp` token each, the daemon's CDP endpoint. */
export interface RunnerPoolSpec {
  kind: 'repl';
  script: string;
  maxHeapMb: number;
  outputLimitBytes: number;
  resultLimitBytes: number;
}

export type { RunnerPool } from './pool.js';
export type { RunnerProcess, Execution } from './runner-process.js';

export interface Playwright extends Module {
  readonly routes: Route[];
  /** A pool of runners of another program (one at most; ended with this module's close and destroy). */
  runnerPool(spec: RunnerPoolSpec): RunnerPool;
  close(): Promise<void>;
  destroy(): void;
}

/** A wildcard listen address is reached on loopback. */
function reachable(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  if (host === '::' || host === '::0') return '::1';
  return host;
}

export function createPlaywright(ctx: ModuleContext, deps: PlaywrightDeps): Playwright {
  const { config, metrics, api } = ctx;
  const log = ctx.log.child({ module: 'playwright' });
  const poolOf = (spec: Omit<PoolDeps, 'downloadsDir' | 'cdpUrl' | 'registerToken' | 'childSetup' | 'log' | 'metrics'>): RunnerPool => new RunnerPool({
    ...spec,
    downloadsDir: deps.downloadsDir,
    cdpUrl: () => {
      // The address the HTTP server listens on: the runners connect to its CDP endpoint.
      const host = reachable(api.host);
      return `ws://${host.includes(':') ? `[${host}]` : host}:${api.port ?? 0}/browsers/${encodeURIComponent(config.sessionId)}/cdp`;
    },
    registerToken: (id, token) => deps.keyring.addEphemeral(id, token, ['cdp']),
    childSetup: async () => {
      // The agent user (BROWSERD_AGENT_USER), as every process of the API.
      const user = await resolveUser(undefined, false, { agent: config.agent.user, maySwitch: config.agent.maySwitch });
      // The user's home, unless that is the state directory (the browserd user's, under systemd):
      // files the code writes by a relative path must be reachable by the filesystem API.
      const home = resolveCwd(undefined, user);
      const inState = home === config.stateDir || home.startsWith(`${config.stateDir}/`);
      // A TMPDIR of its own (the agent's), removed once it ends: what Playwright and the code leave
      // there (a runner killed at its timeout cleans nothing up) never stays in /tmp.
      const tmp = await mkdtemp(path.join(tmpdir(), 'browserd-runner-'));
      if (user.switchUser) await chown(tmp, user.uid, user.gid);
      return {
        env: { ...childEnv(user, undefined), TMPDIR: tmp },
        cwd: inState ? tmp : home,
        ...(user.switchUser ? { user: { uid: user.uid, gid: user.gid } } : {}),
        cleanup: () => rm(tmp, { recursive: true, force: true }).catch(() => {}),
      };
    },
    log,
    metrics,
  });
  const pool = poolOf({
    script: deps.runnerScript,
    max: config.playwright.runners,
    maxHeapMb: config.playwright.maxHeapMb,
    outputLimitBytes: config.playwright.outputLimitBytes,
    resultLimitBytes: config.playwright.resultLimitBytes,
  });
  /** The pools of other programs (runnerPool). */
  const others: RunnerPool[] = [];
  const executors = new Executors({
    pool,
    max: config.playwright.executors,
    closeTab: (targetId) =>
      deps.browser.withCdp(async (cdp) => {
        // A tab already gone (closed by the code, or by a Chromium restart) is fine.
        await cdp.send('Target.closeTarget', { targetId }).catch(() => undefined);
      }, Deadline.in(CLOSE_TAB_TIMEOUT_MS, 'closing the executor\'s tab')),
  });
  return {
    name: 'playwright',
    routes: playwrightRoutes({ executors, metrics }),
    runnerPool: (spec) => {
      const other = poolOf({ ...spec, max: 1 });
      others.push(other);
      return other;
    },
    close: async () => void (await Promise.all([pool, ...others].map((p) => p.close()))),
    destroy: () => [pool, ...others].forEach((p) => p.destroy()),
  };
}
