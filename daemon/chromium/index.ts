// The Chromium module: the supervisor, the CDP proxy and their routes, behind the `Browser`
// interface of ./types.ts (what main, the extensions module and the systemd integration use).
import { z } from 'zod';
import type { Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import type { Metrics } from '../core/metrics.js';
import { waitQuery } from '../http/query.js';
import type { Route } from '../http/router.js';
import { CDP_READY_WAIT_MS, CdpProxy, CLOSE_SERVICE_RESTART } from './cdp-proxy.js';
import { profileDirOf } from './profile.js';
import { RESTART_OP, Supervisor } from './supervisor.js';
import type { Browser, BrowserSnapshot } from './types.js';

export type { Browser, BrowserSnapshot } from './types.js';

export interface BrowserDeps {
  config: Config;
  log: Logger;
  metrics: Metrics;
}

const STATES = ['starting', 'ready', 'restarting', 'failed', 'stopped'] as const;
const lastExitSchema = z.object({
  code: z.number().int().nullable().describe('exit code, null when ended by a signal'),
  signal: z.string().nullable().describe('e.g. SIGKILL, null when it exited with a code'),
  at: z.string().describe('ISO time'),
  reason: z.string().describe('crash, launch failed, restart requested, restart: <reason>, stopped'),
});
const snapshotSchema = z.object({
  id: z.string(),
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
  extensions: z.array(z.unknown()),
});

export function createBrowser(deps: BrowserDeps): Browser {
  const { config, log: baseLog, metrics } = deps;
  const log = baseLog.child({ module: 'chromium' });
  const sessionId = config.sessionId;
  let publicAddress = hostPort(config.listen.host, config.listen.port);
  let listExtensions: () => unknown[] = () => [];
  let shutdownAt: number | null = null;

  let proxy: CdpProxy | null = null;
  const sup = new Supervisor({
    config,
    log,
    metrics,
    profileDir: profileDirOf(config.stateDir),
    onRunEnded: (pid) => proxy?.closeAll(CLOSE_SERVICE_RESTART, 'Chromium restarted; reconnect to the same URL', pid),
  });
  proxy = new CdpProxy({
    log,
    maxMessageBytes: config.chromium.cdpMaxMessageBytes,
    // A client arriving while a restart is queued (the browser still stopped or failed) waits for it too.
    waitEndpoint: (ms) => sup.waitReady(ms, { whileRestartQueued: true }),
    currentPid: () => sup.endpoint()?.pid ?? null,
    notReadyReason: () => sup.notReadyReason(),
  });
  const cdp = proxy;

  const snapshot = (): BrowserSnapshot => {
    const s = sup.status();
    return {
      id: sessionId,
      state: s.state,
      reason: s.reason,
      chromium: { pid: s.pid, version: s.version, started_at: s.startedAt, restarts: s.restarts, last_exit: s.lastExit },
      cdp_url: `ws://${publicAddress}/browsers/${encodeURIComponent(sessionId)}/cdp`,
      extensions: listExtensions(),
    };
  };
  const withLock = <T>(name: string, fn: () => Promise<T>, opts?: { wait?: boolean; signal?: AbortSignal }): Promise<T> => {
    const heldBy = sup.lock.heldBy;
    if (heldBy !== null && opts?.wait !== false) {
      log.info({ event: 'browser_lock_wait', op: name, held_by: heldBy, queued: sup.lock.waiting + 1 }, 'waiting for the browser lifecycle lock');
    }
    return sup.lock.run(name, fn, opts);
  };

  const routes: Route[] = [
    {
      method: 'GET',
      path: '/browsers/{id}',
      scope: 'browser:read',
      doc: { summary: 'The browser session: state, the current Chromium, its last exit, the CDP URL', responses: { 200: { description: 'the browser', schema: snapshotSchema } } },
      handler: async () => ({ status: 200, body: snapshot() }),
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
        const wait = ctx.query.wait !== false;
        // The snapshot is taken under the lock: a queued operation may change the state right after.
        const body = await withLock(
          RESTART_OP,
          async () => {
            await sup.restartLocked('request');
            return snapshot();
          },
          { wait, signal: ctx.signal },
        );
        return { status: 200, body };
      },
    },
    {
      method: 'GET',
      path: '/browsers/{id}/cdp',
      scope: 'cdp',
      doc: {
        summary: 'WebSocket: the Chrome DevTools Protocol of the browser',
        description:
          "Proxied to the current Chromium's browser endpoint; the URL stays the same across restarts. " +
          `A starting or restarting browser (or a stopped or failed one with a restart queued) is waited for up to ${CDP_READY_WAIT_MS / 1000} s, else 503 (at once when failed or stopped). ` +
          'Messages are limited to BROWSERD_CDP_MAX_MESSAGE_BYTES (close code 1009 past it, either direction). ' +
          'A Chromium restart or exit closes the socket with code 1012 (reconnect); daemon shutdown with 1001.',
        responses: { 101: { description: 'Switching Protocols: the WebSocket is connected to Chromium' } },
        errors: [400, 503],
      },
      upgrade: (ctx) => cdp.handle(ctx),
    },
  ];

  return {
    routes,
    start: () => sup.start(),
    notReadyReason: () => sup.notReadyReason(),
    snapshot,
    waitReady: (ms) => sup.waitReady(ms),
    withLock,
    restartLocked: (reason) => sup.restartLocked(reason),
    setLaunchExtras: (provider) => sup.setLaunchExtras(provider),
    setExtensionsLister: (lister) => {
      listExtensions = lister;
    },
    onStateChange: (listener) => {
      sup.onState((state) => listener(state, snapshot()));
    },
    sweep: () => sup.sweep(),
    beginShutdown: () => {
      shutdownAt ??= Date.now();
      cdp.close();
    },
    close: async () => {
      cdp.close();
      // The lifecycle lock is waited for until the shutdown deadline (counted from beginShutdown,
      // so the HTTP drain and this wait overlap), then Chromium is killed whoever holds it.
      await sup.close((shutdownAt ?? Date.now()) + config.http.shutdownTimeoutMs);
    },
    destroy: () => {
      cdp.destroy();
      sup.destroy();
    },
    setPublicAddress: (host, port) => {
      publicAddress = hostPort(host, port);
    },
  };
}

function hostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

