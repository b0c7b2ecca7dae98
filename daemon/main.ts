// browserd: wiring only. Settings → logger → keys → modules → routes → server → signals.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ConfigError, loadConfig, type Config } from './core/config.js';
import { createLogger, flushLogs, type Logger } from './core/log.js';
import { createMetrics, type Metrics } from './core/metrics.js';
import { removeStaleTemps } from './core/fs-atomic.js';
import { lockStateDir, StateDirLockedError } from './core/state-lock.js';
import { createSystemd, NOTIFY_FD_ENV } from './core/systemd.js';
import { collectAfterStart, START_GC_DELAY_MS } from './core/start-gc.js';
import { compileCacheState, saveCompileCache } from './core/compile-cache.js';
import { closeStrayFds, inheritableFds, makeNonDumpable } from './core/harden.js';
import { coverInChildren } from './core/process/launch.js';
import { createBrowser, type Browser } from './chromium/index.js';
import { createProxies } from './proxies/index.js';
import { createEgress, type Egress } from './egress/index.js';
import { createProfiles } from './profiles/index.js';
import { createExtensions } from './extensions/index.js';
import { createProcesses, PtyUnavailableError } from './processes/index.js';
import { createComputer } from './computer/index.js';
import { createReplays } from './replays/index.js';
import { createLive } from './live/index.js';
import { createPlaywright } from './playwright/index.js';
import { createLogs, type Logs } from './logs/index.js';
import { createFs } from './fs/index.js';
import { createDownloads } from './downloads/index.js';
import { createCurl } from './curl/index.js';
import { createTelemetry } from './telemetry/index.js';
import { KeyRing } from './http/auth.js';
import { buildOpenApi } from './http/openapi.js';
import { HttpServer } from './http/server.js';
import { systemRoutes } from './http/system-routes.js';

const EXIT_BAD_SETTING = 2;
/** Restartable (the unit's RestartPreventExitStatus is 2): e.g. the port is still held by the previous instance. */
const EXIT_RETRY = 1;

interface Closable {
  close(): Promise<void>;
}

function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

/** The files module's read rules, for the log streams (set once the files module exists). */
let readable: (file: string) => Promise<string> = () => Promise.reject(new Error('the files module is not ready'));

function settingsOrExit(metrics: Metrics): { config: Config; log: Logger; logs: Logs } {
  try {
    const config = loadConfig();
    // The log streams' rings exist before the logger, which writes every line into one of them.
    // A `path` stream reads files under the filesystem API's rules (its module exists once the daemon serves).
    const logs = createLogs({ config, metrics, resolveReadable: (file) => readable(file) });
    return { config, logs, log: createLogger(config.logLevel, undefined, logs.daemonLine) };
  } catch (err) {
    exitBadSetting(createLogger('info'), err);
  }
}

function exitBadSetting(log: Logger, err: unknown): never {
  if (!(err instanceof ConfigError)) throw err;
  log.fatal({ event: 'bad_setting', setting: err.setting }, err.message);
  process.exit(EXIT_BAD_SETTING);
}

/** One daemon per state dir (held until exit, released by the kernel however the daemon ends). */
function lockOrExit(config: Config, log: Logger): void {
  try {
    lockStateDir(config.stateDir);
  } catch (err) {
    if (err instanceof StateDirLockedError) {
      log.fatal({ event: 'state_dir_locked', setting: 'BROWSERD_STATE_DIR', holder_pid: err.holderPid, lock_file: err.lockFile }, err.message);
      process.exit(EXIT_RETRY);
    }
    log.fatal({ event: 'state_dir_lock_failed', setting: 'BROWSERD_STATE_DIR', err }, (err as Error).message);
    process.exit(EXIT_BAD_SETTING);
  }
}

async function main(): Promise<void> {
  // Before anything else: no descriptor of the daemon's reaches a child, and /proc/<daemon> is root's.
  const notifyFd = Number(process.env[NOTIFY_FD_ENV]);
  const strayFds = closeStrayFds(new Set(Number.isInteger(notifyFd) ? [notifyFd] : []));
  coverInChildren(inheritableFds());
  const nonDumpable = makeNonDumpable();
  const metrics = createMetrics();
  const { config, log, logs } = settingsOrExit(metrics);
  strayLog = log;
  strayCount = metrics.unhandledRejections;
  lockOrExit(config, log); // before anything in the state dir is read or written
  if (strayFds.length > 0) log.info({ event: 'stray_fds_closed', fds: strayFds }, 'closed descriptors the daemon inherited without close-on-exec');
  if (!nonDumpable) log.warn({ event: 'dumpable' }, 'the daemon could not make itself non-dumpable (it changes its egid for that: CAP_SETGID)');
  if (!config.agent.separated) {
    log.warn({ event: 'agent_not_separated', setting: 'BROWSERD_AGENT_USER', user: config.agent.user.name }, "the agent user is the daemon's own: Chromium and every process of the API can read the daemon's secrets");
  }
  // Atomic writes a killed daemon left unfinished (proxies.json, chromium-executables.json, ...).
  for (const name of removeStaleTemps(config.stateDir)) log.info({ event: 'store_temp_removed', file: name }, 'removed a temp file of an unfinished store write');
  const version = packageVersion();
  // First: it takes NOTIFY_SOCKET & co. out of process.env before anything spawns.
  const systemd = createSystemd({ log, waitForBrowser: config.chromium.autostart });
  let keyring: KeyRing;
  try {
    keyring = KeyRing.create(config, log, metrics);
  } catch (err) {
    exitBadSetting(log, err);
  }

  // The live event stream: the browser's CDP clients, its runs and the daemon's requests feed it.
  const telemetry = createTelemetry({ config, log });
  let browser: Browser;
  try {
    browser = createBrowser({
      config,
      log,
      metrics,
      onChromiumLine: logs.chromiumLine,
      issueToken: (identity, scopes) => keyring.issueFor(identity, scopes),
      cdpClientEvents: { connected: (c) => telemetry.cdpConnected(c), closed: (c) => telemetry.cdpDisconnected(c) },
    });
  } catch (err) {
    exitBadSetting(log, err);
  }
  telemetry.watchBrowser(browser);
  systemd.watchBrowser(browser);
  await browser.sweep(); // a Chromium left by a daemon killed with SIGKILL, whatever BROWSERD_BROWSER_AUTOSTART says
  let profiles: ReturnType<typeof createProfiles>;
  try {
    profiles = createProfiles({ config, log, browser });
  } catch (err) {
    exitBadSetting(log, err);
  }
  await profiles.start();
  let proxies: ReturnType<typeof createProxies>;
  let egress: Egress;
  try {
    egress = createEgress({ config, log, forwarderPort: () => proxies.forwarderPort(), onChange: () => proxies.resetConnections('the egress policy changed; retry'), onDecision: (d) => telemetry.emit('network_policy_decision', 'system', { kind: 'kernel_api', event: 'egress_policy' }, d) });
    proxies = createProxies({
      config,
      log,
      metrics,
      egress: egress.gate,
      onSwitch: (sw) => telemetry.emit('proxy_switched', 'system', { kind: 'kernel_api', event: 'proxy_switch' }, sw),
    });
  } catch (err) {
    exitBadSetting(log, err);
  }
  // The browser's forwarding proxy listens before Chromium can launch (its --proxy-server port: proxies.forwarderPort()).
  await proxies.start();
  await egress.start(); // Chromium's managed policy names the forwarding proxy's port: before Chromium launches
  browser.addCdpPolicy(egress.cdpPolicy);
  browser.setProxyPort(() => proxies.forwarderPort());
  browser.addUpdateFields(proxies.updatePart); // PATCH /browsers/{id} proxy_id
  browser.addSnapshotFields(() => {
    const active = proxies.active();
    return active === null ? { proxy: null } : { proxy_id: active.id, proxy: active };
  });
  const extensions = createExtensions({ config, log, metrics, browser, onInstalled: (e) => telemetry.emit('extension_installed', 'system', { kind: 'kernel_api', event: 'extension_upload' }, e) });
  await extensions.start();
  egress.addService(() => extensions.updateService()); // Chromium fetches policy installs there through the forwarding proxy
  const processes = createProcesses({ config, log, metrics, extraEnv: () => egress.processEnv(), onExit: (p) => telemetry.emit('process_exited', 'system', { kind: 'local_process', event: 'exit' }, p) });
  try {
    await processes.start(); // the terminal module, and the process groups a daemon killed with SIGKILL left
  } catch (err) {
    if (!(err instanceof PtyUnavailableError)) throw err;
    log.fatal({ event: 'dependency_missing', package: err.pkg }, err.message);
    process.exit(EXIT_BAD_SETTING);
  }
  const computer = createComputer({ config, log, metrics, browser });
  const replays = createReplays({ config, log, currentPage: (deadline) => computer.shownPage(deadline), notReadyReason: () => browser.notReadyReason() });
  const live = createLive({ log, screencast: replays.screencast, computer });
  let files: ReturnType<typeof createFs>;
  try {
    files = createFs({ config, log, metrics });
  } catch (err) {
    exitBadSetting(log, err);
  }
  readable = (file) => files.resolveReadable(file);
  // The browser's downloads: the daemon owns the download behaviour, whichever CDP client sets it.
  const downloads = createDownloads({ config, log, browser, downloadsDir: files.downloadsDir, onChange: (event, d) => telemetry.download(event, d) });
  const playwright = createPlaywright({ config, log, metrics, keyring, downloadsDir: files.downloadsDir, runnerScript: fileURLToPath(new URL('./playwright/runner/main.js', import.meta.url)) });
  // Requests through the browser never target the daemon's own ports (its API: known once it listens).
  let apiPort: number | null = config.listen.port === 0 ? null : config.listen.port;
  const curl = createCurl({ config, log, browser, ownPorts: () => [apiPort, proxies.forwarderPort()].filter((p): p is number => p !== null) });
  const held = config.testHooks.holdReady; // a test hook: the last ready hook, once every other is added
  if (held !== undefined) browser.onLaunch((_cdp, pid) => held(pid, log));
  // Closed in reverse: the runners end before Chromium.
  const modules: Closable[] = [profiles, browser, proxies, egress, extensions, processes, files, computer, replays, live, playwright];

  // Built at its first request: ~30 ms of zod's JSON Schema conversion, and the document's memory,
  // that neither the start nor an idle daemon pays for.
  let openapi: Record<string, unknown> | null = null;
  const openapiDoc = (): Record<string, unknown> =>
    (openapi ??= buildOpenApi(server.router.routes, {
      version,
      description: 'browserd: the per-VM browser-host daemon. Every route but /healthz, /readyz, /openapi.json and /docs (this document as a page to read) takes a bearer token.',
    }));
  const routes = [
    ...systemRoutes({ metrics, notReadyReason: () => browser.notReadyReason(), openapi: openapiDoc }),
    ...browser.routes,
    ...proxies.routes,
    ...egress.routes,
    ...profiles.routes,
    ...extensions.routes,
    ...processes.routes,
    ...computer.routes,
    ...playwright.routes,
    ...logs.routes,
    ...files.routes,
    ...downloads.routes,
    ...replays.routes,
    ...curl.routes,
    ...telemetry.routes,
    ...live.routes,
  ];
  const server = new HttpServer({ config, log, metrics, keyring, routes, onRequestDone: (r) => telemetry.requestDone(r) });

  let stopping = false;
  const shutdown = async (signal: string): Promise<void> => {
    if (stopping) {
      log.warn({ event: 'stopping', signal }, 'second signal: stopping now');
      server.destroy();
      browser.destroy();
      processes.destroy();
      proxies.destroy();
      playwright.destroy();
      files.destroy();
      process.exit(1);
    }
    stopping = true;
    systemd.stopping();
    log.info({ event: 'stopping', signal, deadline_ms: config.http.shutdownTimeoutMs }, 'stopping');
    browser.beginShutdown();
    processes.beginShutdown();
    await server.close(config.http.shutdownTimeoutMs);
    for (const m of [...modules].reverse()) {
      try {
        await m.close();
      } catch (err) {
        log.error({ event: 'stop_error', err }, 'a module did not stop cleanly');
      }
    }
    await systemd.close(); // last: the watchdog pings go on while the modules stop
    log.info({ event: 'stopped' }, 'stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGHUP', () => keyring.reload());

  let address;
  try {
    address = await server.listen();
  } catch (err) {
    log.fatal({ event: 'listen_failed', setting: 'BROWSERD_LISTEN', err }, `BROWSERD_LISTEN: cannot listen: ${(err as Error).message}`);
    process.exit((err as NodeJS.ErrnoException).code === 'EADDRINUSE' ? EXIT_RETRY : EXIT_BAD_SETTING);
  }
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const compileCache = compileCacheState(process.env);
  if (compileCache.dir === null && compileCache.setting !== null) {
    log.warn({ event: 'compile_cache_unused', setting: 'BROWSERD_COMPILE_CACHE_DIR', dir: compileCache.setting, reason: compileCache.why }, `the compile cache folder is not used (${compileCache.why}): every start compiles the daemon afresh`);
  }
  log.info({ event: 'listening', address: `${host}:${address.port}`, port: address.port, version, node: process.version, state_dir: config.stateDir, compile_cache: compileCache.dir }, 'listening');
  systemd.listening(`${host}:${address.port}`);
  browser.setPublicAddress(address.address, address.port);
  proxies.setApiPort(address.port);
  await egress.setApiAddress(address.address, address.port);
  apiPort = address.port;
  playwright.setListenAddress(address.address, address.port);
  if (config.chromium.autostart) browser.start();
  // What the start compiled, for the next start, even if this daemon is then killed (before the collection below, same delay).
  setTimeout(() => {
    if (saveCompileCache()) log.debug({ event: 'compile_cache_saved', dir: compileCache.dir }, 'saved the compiled code of this start for the next');
  }, START_GC_DELAY_MS).unref();
  collectAfterStart((ms) => {
    log.debug({ event: 'start_gc', ms: ms === null ? null : Math.round(ms) }, ms === null ? "V8's collector could not be reached: the start's garbage stays until V8 collects it" : 'collected the garbage of the start');
  });
  config.testHooks.afterListening(); // the test build's faults for the crash policy above; nothing in the shipped one
}

// Bugs that escape every handler (docs/operations.md, "Crashes and stray rejections").
//
// A rejected promise nobody handles is logged at error with its stack and counted
// (browserd_unhandled_rejections_total), and the daemon goes on. Such a promise was not awaited:
// the operation it belonged to has already answered or ended, and no state of the daemon waits on
// it (the lifecycle lock, the process table and the stores settle in their owners' own try/finally).
// Exiting for it would end every browser session, process and upload of the VM for an error that
// has already done all its harm. The type-aware lint (no-floating-promises) keeps them rare.
//
// An uncaught exception is different: it unwound a synchronous stack part-way, so an invariant may
// be half-updated (a lock not released, a map entry half-written). One JSON line for the journal,
// then exit 1: systemd restarts, and the next start ends whatever this run left on the Chromium profile.
let strayLog: Logger | null = null;
let strayCount: Metrics['unhandledRejections'] | null = null;
process.on('unhandledRejection', (err: unknown) => {
  (strayLog ?? createLogger('error')).error({ event: 'unhandled_rejection', err }, 'a promise was rejected with no handler (a bug): logged, the daemon goes on');
  strayCount?.inc();
});
process.on('uncaughtException', (err: unknown) => {
  flushLogs(); // the lines before it first
  createLogger('fatal').fatal({ event: 'crash', kind: 'uncaughtException', err }, 'uncaughtException');
  process.exit(1);
});

await main();
