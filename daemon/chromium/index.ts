// The Chromium module: the supervisor, the CDP endpoint over the pipe multiplexer and their
// routes, behind the `Browser` interface of ./types.ts (what main, the other modules and the
// systemd integration use).
import type { Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import type { Metrics } from '../core/metrics.js';
import { CdpBridge } from '../cdp/bridge.js';
import { CdpClient } from '../cdp/client.js';
import { cdpRoutes } from '../cdp/routes.js';
import { profileDirOf } from './sweep/profile.js';
import { browserRoutes } from './routes.js';
import { RESTART_OP, Supervisor } from './supervisor.js';
import type { Browser, BrowserSnapshot } from './types.js';

export type { Browser, BrowserSnapshot } from './types.js';

export interface BrowserDeps {
  config: Config;
  log: Logger;
  metrics: Metrics;
  /** Every line Chromium writes (the log stream keeps recent ones). */
  onChromiumLine?(line: string): void;
}

export function createBrowser(deps: BrowserDeps): Browser {
  const { config, log: baseLog, metrics } = deps;
  const log = baseLog.child({ module: 'chromium' });
  const sessionId = config.sessionId;
  const createdAt = new Date().toISOString();
  let publicAddress = hostPort(config.listen.host, config.listen.port);
  const snapshotFields: (() => Record<string, unknown>)[] = [];
  let shutdownAt: number | null = null;

  const sup = new Supervisor({
    config,
    log,
    metrics,
    profileDir: profileDirOf(config.stateDir),
    tmpDir: config.chromium.tmpDir,
    onChromiumLine: deps.onChromiumLine,
  });
  const wsBase = (host?: string): string => `ws://${host !== undefined && /^[A-Za-z0-9.[\]:-]{1,300}$/.test(host) ? host : publicAddress}/browsers/${encodeURIComponent(sessionId)}/cdp`;
  // A client arriving while a launch is queued (the browser still stopped or failed) waits for it too.
  const bridge = new CdpBridge({ waitMux: (d) => sup.waitMux(d, { whileLaunchQueued: true }), notReadyReason: () => sup.notReadyReason() }, {
    maxMessageBytes: config.chromium.cdpMaxMessageBytes,
    clientQueueBytes: config.chromium.cdpClientQueueBytes,
    queueTotalBytes: config.chromium.cdpQueueTotalBytes,
    log,
  });
  metrics.memoryPool('cdp_client_queue', () => bridge.queuedBytes);

  const snapshot = (): BrowserSnapshot => {
    const s = sup.status();
    const cdpUrl = wsBase();
    const base: BrowserSnapshot = {
      id: sessionId,
      session_id: sessionId,
      state: s.state,
      reason: s.reason,
      chromium: { pid: s.pid, version: s.version, started_at: s.startedAt, restarts: s.restarts, last_exit: s.lastExit },
      cdp_url: cdpUrl,
      cdp_ws_url: cdpUrl,
      webdriver_ws_url: '',
      created_at: createdAt,
      headless: config.chromium.headless,
      stealth: false,
      timeout_seconds: 0,
      extensions: [],
    };
    for (const f of snapshotFields) Object.assign(base, f());
    return base;
  };
  const withLock = <T>(name: string, fn: () => Promise<T>, opts?: { wait?: boolean; signal?: AbortSignal }): Promise<T> => {
    const heldBy = sup.lock.heldBy;
    if (heldBy !== null && opts?.wait !== false) {
      log.info({ event: 'browser_lock_wait', op: name, held_by: heldBy, queued: sup.lock.waiting + 1 }, 'waiting for the browser lifecycle lock');
    }
    return sup.lock.run(name, fn, opts);
  };

  const routes = [
    ...browserRoutes({
      snapshot,
      restart: ({ wait, signal }) =>
        withLock(
          RESTART_OP,
          async () => {
            const result = await sup.restartLocked('request');
            return { result, snapshot: snapshot() };
          },
          { wait, signal },
        ),
    }),
    ...cdpRoutes({ waitMux: (d) => sup.waitMux(d, { whileLaunchQueued: true }), notReadyReason: () => sup.notReadyReason(), wsBase }, bridge),
  ];

  return {
    routes,
    start: () => sup.start(),
    notReadyReason: () => sup.notReadyReason(),
    snapshot,
    async withCdp(fn, deadline) {
      const { mux, pid } = await sup.waitMux(deadline);
      const cdp = await CdpClient.overChannel((sink) => mux.open({ kind: 'browser' }, sink, deadline.signal));
      try {
        return await fn(cdp, pid);
      } finally {
        cdp.close();
      }
    },
    withLock,
    restartLocked: (reason) => sup.restartLocked(reason),
    setLaunchExtras: (provider) => sup.setLaunchExtras(provider),
    setProxyPort: (provider) => sup.setProxyPort(provider),
    setStopHook: (provider) => sup.setStopHook(provider),
    setCdpPolicy: (policy) => sup.setCdpPolicy(policy),
    onLaunch: (hook) =>
      sup.onReady(async (run) => {
        if (run.cdp === null) throw new Error('the run has no session of its own');
        await hook(run.cdp, run.pid);
      }),
    async daemonCdp(deadline) {
      const { pid } = await sup.waitMux(deadline);
      const cdp = sup.runCdp();
      if (cdp === null) throw new Error('the ready run has no session of its own');
      return { cdp, pid };
    },
    addSnapshotFields: (provider) => void snapshotFields.push(provider),
    onStateChange: (listener) => {
      sup.onState((state) => listener(state, snapshot()));
    },
    sweep: () => sup.sweep(),
    beginShutdown: () => {
      shutdownAt ??= Date.now();
      bridge.close();
    },
    close: async () => {
      bridge.close();
      // The lifecycle lock is waited for until the shutdown deadline (counted from beginShutdown,
      // so the HTTP drain and this wait overlap), then Chromium is killed whoever holds it.
      await sup.close((shutdownAt ?? Date.now()) + config.http.shutdownTimeoutMs);
    },
    destroy: () => {
      bridge.destroy();
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

