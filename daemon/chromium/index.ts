// The Chromium module: the supervisor, the CDP endpoint over the pipe multiplexer and their
// routes, behind the `Browser` interface of ./types.ts (what main, the other modules and the
// systemd integration use).
import { lazy } from '../core/lazy.js';
import { ConfigError, type Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import type { Metrics } from '../core/metrics.js';
import { CdpBridge, type CdpClientEvents } from '../cdp/bridge.js';
import { CdpClient } from '../cdp/client.js';
import { composePolicies, type CommandPolicy } from '../cdp/mux.js';
import { cdpRoutes } from '../cdp/routes.js';
import { profileDirOf } from './sweep/profile.js';
import { removeStaleTemps } from '../core/fs-atomic.js';
import { z } from 'zod';
import { browserRoutes, browserUpdateRoute, snapshotSchema, unsupportedUpdatePart } from './routes.js';
import { Configurator } from './settings/configurator.js';
import { POLICIES_FILE } from './settings/policies.js';
import { settingsRoutes } from './settings/routes.js';
import { SettingsStore } from './settings/store.js';
import { fitNewWindows, viewportSchema } from './settings/viewport.js';
import { RESTART_OP, Supervisor } from './supervisor.js';
import type { Browser, BrowserSnapshot, BrowserUpdatePart, ConfigurePart, LaunchExtras } from './types.js';
import type { Identity, Scope } from '../http/auth.js';

export type { Browser, BrowserSnapshot, BrowserUpdatePart } from './types.js';

interface BrowserDeps {
  config: Config;
  log: Logger;
  metrics: Metrics;
  /** Every line Chromium writes (the log stream keeps recent ones). */
  onChromiumLine?(line: string): void;
  /** Signs the session token of cdp_ws_url (the key ring): the caller's scopes among `narrowTo`. */
  issueToken(identity: Identity, narrowTo: readonly Scope[]): Promise<{ token: string }>;
  /** CDP clients connecting and leaving (the telemetry). */
  cdpClientEvents?: CdpClientEvents;
}

/** The scopes a cdp_ws_url token carries at most: the CDP endpoint, and the SDK's direct /curl calls. */
export const CDP_URL_SCOPES: readonly Scope[] = ['cdp', 'browser:fetch'];
/** The scopes a browser_live_view_url token carries at most: the live view, to watch and to take over. */
export const LIVE_URL_SCOPES: readonly Scope[] = ['live:view', 'live:control'];

/** Opens `<stateDir>/browser-settings.json` synchronously; one that cannot be read or set aside is a ConfigError naming BROWSERD_STATE_DIR. */
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
    profileDir: profileDirOf(config.agent.dir),
    tmpDir: config.chromium.tmpDir,
    onChromiumLine: deps.onChromiumLine,
  });
  // The browser's configuration through the API (viewport, policies, flags), kept in the state dir.
  let store: SettingsStore;
  try {
    store = SettingsStore.open(config.stateDir, log);
  } catch (err) {
    throw new ConfigError('BROWSERD_STATE_DIR', `cannot open the browser settings: ${(err as Error).message}`);
  }
  for (const name of removeStaleTemps(config.chromium.policyDir, POLICIES_FILE)) log.info({ event: 'store_temp_removed', file: name }, 'removed a temp file of an unfinished policy write');
  let extras: () => LaunchExtras = () => ({ extensionPaths: [], allowBackgroundNetworking: false });
  sup.setLaunchExtras(() => ({ ...extras(), settings: configurator.launchSettings() }));
  const configurator: Configurator = new Configurator({
    store,
    headless: config.chromium.headless,
    defaultViewport: config.chromium.viewport,
    policyDir: config.chromium.policyDir,
    log,
    withLock: (name, fn, opts) => withLock(name, fn, opts),
    restartLocked: (reason) => sup.restartLocked(reason),
    runCdp: () => sup.runCdp(),
    pid: () => sup.status().pid,
  });
  // Windows opened later get the viewport too (on the daemon's own session of each run).
  sup.onReady(async (run) => {
    if (run.cdp !== null) await fitNewWindows(run.cdp, () => configurator.viewport(), config.chromium.headless, log);
  });
  const viewportPart: BrowserUpdatePart = {
    fields: lazy(() => ({
      viewport: viewportSchema()
        .extend({ force: z.boolean({ error: 'must be a boolean' }).optional().meta({ description: 'accepted: this daemon has no live view or recording that would refuse a resize' }) })
        .optional()
        .meta({ description: 'The size every tab renders at, changed live (scope browser:configure)' }),
    })),
    scope: 'browser:configure',
    apply: async (body, ctx) => {
      const { force: _force, ...viewport } = body.viewport as z.output<ReturnType<typeof viewportSchema>> & { force?: boolean };
      await configurator.apply({ viewport }, { wait: true, signal: ctx.signal, log: ctx.log });
    },
  };
  const updateParts: BrowserUpdatePart[] = [unsupportedUpdatePart, viewportPart];
  // configure's parts of other modules (extensions, profile), in the order they are added.
  const configureParts: ConfigurePart[] = [];
  const cdpPolicies: CommandPolicy[] = [];

  const wsBase = (host?: string): string => `ws://${host !== undefined && /^[A-Za-z0-9.[\]:-]{1,300}$/.test(host) ? host : publicAddress}/browsers/${encodeURIComponent(sessionId)}/cdp`;
  // A client arriving while a launch is queued (the browser still stopped or failed) waits for it too.
  const bridge = new CdpBridge({ waitMux: (d) => sup.waitMux(d, { whileLaunchQueued: true }), notReadyReason: () => sup.notReadyReason() }, {
    maxMessageBytes: config.chromium.cdpMaxMessageBytes,
    clientQueueBytes: config.chromium.cdpClientQueueBytes,
    queueTotalBytes: config.chromium.cdpQueueTotalBytes,
    log,
    events: deps.cdpClientEvents,
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
      viewport: configurator.viewport(),
      // The SDK's name for the policies applied to the session (echoed back for verification).
      chrome_policy: configurator.settings.policies,
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

  const hostOf = (host: unknown): string => (typeof host === 'string' && /^[A-Za-z0-9.[\]:-]{1,300}$/.test(host) ? host : publicAddress);
  const routes = [
    ...browserRoutes({
      snapshot,
      async direct(ctx) {
        const baseUrl = config.baseUrl ?? `http://${hostOf(ctx.req.headers.host)}`;
        const wsUrl = `${baseUrl.replace(/^http/, 'ws')}/browsers/${encodeURIComponent(sessionId)}/cdp`;
        const sign = async (scopes: readonly Scope[]): Promise<string> => (ctx.identity === null ? '' : (await deps.issueToken(ctx.identity, scopes)).token);
        const [cdpToken, liveToken] = await Promise.all([sign(CDP_URL_SCOPES), sign(LIVE_URL_SCOPES)]);
        return {
          base_url: baseUrl,
          cdp_ws_url: `${wsUrl}?jwt=${cdpToken}`,
          browser_live_view_url: `${baseUrl}/browsers/${encodeURIComponent(sessionId)}/live?jwt=${liveToken}`,
        };
      },
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
    browserUpdateRoute(updateParts, snapshot, snapshotSchema),
    ...settingsRoutes({ configurator, operatorFlags: config.chromium.extraFlags, configureParts }),
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
    setLaunchExtras: (provider) => {
      extras = provider;
    },
    addUpdateFields: (part) => void updateParts.splice(updateParts.length - 1, 0, part),
    setProxyPort: (provider) => sup.setProxyPort(provider),
    setStopHook: (provider) => sup.setStopHook(provider),
    addCdpPolicy: (policy) => {
      cdpPolicies.push(policy);
      sup.setCdpPolicy(composePolicies(cdpPolicies));
    },
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
    addConfigurePart: (part) => void configureParts.push(part),
    addSnapshotFields: (provider) => void snapshotFields.push(provider),
    onStateChange: (listener) => {
      sup.onState((state) => listener(state, snapshot()));
    },
    // At start, before listening: also the daemon's policy file as the settings store has it.
    sweep: async () => {
      await sup.sweep();
      await configurator.restore();
    },
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

