// The Chromium module: the supervisor, the CDP endpoint over the pipe multiplexer and their
// routes, behind the `Browser` interface of ./types.ts (what main, the other modules and the
// systemd integration use).
import { lazy } from '../core/lazy.js';
import { ConfigError } from '../core/config.js';
import { BrowserUnavailableError } from '../core/errors.js';
import { CdpBridge } from '../cdp/bridge.js';
import { CdpClient } from '../cdp/client.js';
import { cdpRoutes } from '../cdp/routes.js';
import { profileDirOf } from './sweep/profile.js';
import { removeStaleTemps } from '../core/fs-atomic.js';
import { z } from 'zod';
import { browserRoutes, browserUpdateRoute, snapshotSchema, unsupportedUpdatePart, type BrowserRecord } from './routes.js';
import { Configurator } from './settings/configurator.js';
import { POLICIES_FILE } from './settings/policies.js';
import { settingsRoutes } from './settings/routes.js';
import { SettingsStore } from './settings/store.js';
import { fitNewWindows, viewportSchema } from './settings/viewport.js';
import { RESTART_OP, Supervisor } from './supervisor.js';
import type { Browser, BrowserSnapshot, BrowserUpdatePart } from './types.js';
import type { KeyRing } from '../http/auth.js';
import type { ModuleContext } from '../module.js';
import { baseUrlOf, listenHostPort, plainHost } from '../http/base-url.js';
import { BrowserPlugs } from './plugs.js';

export type { Browser, BrowserSnapshot, BrowserUpdatePart } from './types.js';
export { SlotTakenError, type BrowserPlug } from './plugs.js';

interface BrowserDeps {
  /** Every line Chromium writes (the log stream keeps recent ones). */
  onChromiumLine?(line: string): void;
  /** Signs the record's token for its reader (the key ring's derive: the reader's scopes, never past its expiry). */
  keyring: Pick<KeyRing, 'derive'>;
}

/** Opens `<stateDir>/browser-settings.json` synchronously; one that cannot be read or set aside is a ConfigError naming BROWSERD_STATE_DIR. */
export function createBrowser(ctx: ModuleContext, deps: BrowserDeps): Browser {
  const { config, metrics, api } = ctx;
  const log = ctx.log.child({ module: 'chromium' });
  const sessionId = config.sessionId;
  const createdAt = new Date().toISOString();
  const publicAddress = (): string => listenHostPort(api);
  let shutdownAt: number | null = null;
  // What the other modules add (browser.use): read at every launch, stop, snapshot and request.
  const plugs = new BrowserPlugs();

  const sup = new Supervisor({
    config,
    log,
    metrics,
    profileDir: profileDirOf(config.agent.dir),
    tmpDir: config.chromium.tmpDir,
    onChromiumLine: deps.onChromiumLine,
    plugs: {
      launchExtras: () => ({ ...plugs.launchExtras(), settings: configurator.launchSettings() }),
      stopWork: () => plugs.stopWork(),
      proxyPort: () => plugs.proxyPort(),
      cdpPolicy: () => plugs.cdpPolicy(),
      // The policy folder holds exactly the settings' policies when Chromium reads it (an earlier
      // run's stale file removed or rewritten): at each launch, not at start, as the folder is the
      // machine's and a daemon that launches nothing leaves it alone.
      beforeLaunch: () => configurator.restore(),
    },
  });
  // The browser's configuration through the API (viewport, policies, flags), kept in the state dir.
  let store: SettingsStore;
  try {
    store = SettingsStore.open(config.stateDir, log);
  } catch (err) {
    throw new ConfigError('BROWSERD_STATE_DIR', `cannot open the browser settings: ${(err as Error).message}`);
  }
  for (const name of removeStaleTemps(config.chromium.policyDir, POLICIES_FILE)) log.info({ event: 'store_temp_removed', file: name }, 'removed a temp file of an unfinished policy write');
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
  // Windows opened later get the viewport too (on the browser module's own session of each run); then
  // the modules' launch hooks, each with a browser-level session of its own for the run's life: its
  // Target discovery, auto-attach, the page sessions it attaches and their domains are its alone.
  sup.onReady(async (run) => {
    if (run.cdp === null) throw new Error('the run has no session of its own');
    await fitNewWindows(run.cdp, () => configurator.viewport(), config.chromium.headless, log);
    for (const hook of plugs.onLaunch) {
      const cdp = await CdpClient.overChannel((sink) => run.mux.open({ kind: 'browser' }, sink));
      await hook(cdp, run.pid);
    }
  });
  sup.onState((state) => {
    if (plugs.onState.length === 0) return;
    const snap = snapshot();
    for (const listener of plugs.onState) listener(state, snap);
  });
  const viewportPart: BrowserUpdatePart = {
    fields: lazy(() => ({
      viewport: viewportSchema()
        .extend({ force: z.boolean({ error: 'must be a boolean' }).optional().meta({ description: 'accepted, and not needed: a resize is never refused; live viewers see the new size, and a recording keeps its first size (frames are scaled into it)' }) })
        .optional()
        .meta({ description: 'The size every tab renders at, changed live (scope browser:configure)' }),
    })),
    scope: 'browser:configure',
    apply: async (body, ctx) => {
      const { force: _force, ...viewport } = body.viewport as z.output<ReturnType<typeof viewportSchema>> & { force?: boolean };
      await configurator.apply({ viewport }, { wait: true, signal: ctx.signal, log: ctx.log });
    },
  };
  // The modules' PATCH fields (browser.use) go before the browser's own (the viewport), in the order they are added.
  const updateParts: BrowserUpdatePart[] = [unsupportedUpdatePart, viewportPart];

  const wsBase = (host?: string): string => `ws://${plainHost(host) ?? publicAddress()}/browsers/${encodeURIComponent(sessionId)}/cdp`;
  // A client arriving while a launch is queued (the browser still stopped or failed) waits for it too.
  const bridge = new CdpBridge({ waitMux: (d) => sup.waitMux(d, { whileLaunchQueued: true }), notReadyReason: () => sup.notReadyReason() }, {
    maxMessageBytes: config.chromium.cdpMaxMessageBytes,
    clientQueueBytes: config.chromium.cdpClientQueueBytes,
    queueTotalBytes: config.chromium.cdpQueueTotalBytes,
    log,
    events: plugs.cdpClientEvents,
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
    for (const f of plugs.snapshot) Object.assign(base, f());
    return base;
  };
  const withLock = <T>(name: string, fn: () => Promise<T>, opts?: { wait?: boolean; signal?: AbortSignal }): Promise<T> => {
    const heldBy = sup.lock.heldBy;
    if (heldBy !== null && opts?.wait !== false) {
      log.info({ event: 'browser_lock_wait', op: name, held_by: heldBy, queued: sup.lock.waiting + 1 }, 'waiting for the browser lifecycle lock');
    }
    return sup.lock.run(name, fn, opts);
  };

  // The record as its reader gets it: base_url, and one token of the reader's own scopes (the SDK's route cache, the CDP and live view links).
  const record: BrowserRecord = async (ctx, snap) => {
    const baseUrl = baseUrlOf(config.baseUrl, ctx.req, api);
    const wsUrl = `${baseUrl.replace(/^http/, 'ws')}/browsers/${encodeURIComponent(sessionId)}/cdp`;
    const jwt = ctx.identity === null ? '' : (await deps.keyring.derive(ctx.identity)).token;
    return {
      ...(snap ?? snapshot()),
      base_url: baseUrl,
      jwt,
      cdp_ws_url: `${wsUrl}?jwt=${jwt}`,
      browser_live_view_url: `${baseUrl}/browsers/${encodeURIComponent(sessionId)}/live?jwt=${jwt}`,
      ...Object.assign({}, ...plugs.links.map((f) => f({ wsBase: wsUrl.slice(0, -'/cdp'.length), cdpToken: jwt }))),
    };
  };
  const routes = [
    ...browserRoutes({
      record,
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
    browserUpdateRoute(updateParts, record, snapshotSchema),
    ...settingsRoutes({ configurator, operatorFlags: config.chromium.extraFlags, configureParts: plugs.configure }),
    ...cdpRoutes({ waitMux: (d) => sup.waitMux(d, { whileLaunchQueued: true }), notReadyReason: () => sup.notReadyReason(), wsBase }, bridge),
  ];

  return {
    name: 'chromium',
    routes,
    launch: () => sup.start(),
    notReadyReason: () => sup.notReadyReason(),
    ensureReady: () => {
      const reason = sup.notReadyReason();
      if (reason === null) return;
      const { state } = sup.status();
      throw new BrowserUnavailableError(`Chromium is not ready (${state}): ${reason}`, { retryable: state === 'starting' || state === 'restarting' });
    },
    snapshot,
    async withCdp(fn, deadline) {
      const { mux, pid } = await sup.waitMux(deadline);
      const cdp = await CdpClient.overChannel((sink) => mux.open({ kind: 'browser' }, sink, deadline));
      try {
        return await fn(cdp, pid);
      } finally {
        cdp.close();
      }
    },
    withLock,
    restartLocked: (reason) => sup.restartLocked(reason),
    cdpAccess: { bridge, waitMux: (d) => sup.waitMux(d, { whileLaunchQueued: true }) },
    use: (plug) => {
      plugs.use(plug);
      if (plug.update) updateParts.splice(updateParts.length - 1, 0, plug.update);
    },
    // At start, before listening: also the daemon's policy file as the settings store has it.
    start: async () => {
      await sup.sweep();
      // A test hook: the last launch hook, once every module has added its own.
      const held = config.testHooks.holdReady;
      if (held !== undefined) plugs.use({ name: 'test-hooks', onLaunch: (_cdp, pid) => held(pid, log) });
    },
    serve: () => {
      if (config.chromium.autostart) sup.start();
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
  };
}
