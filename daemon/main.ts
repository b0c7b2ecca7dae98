// browserd: wiring only. Settings → logger → keys → modules → routes → server → signals.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ConfigError, loadConfig, type Config } from './core/config.js';
import { createLogger, flushLogs, type Logger } from './core/log.js';
import { createMetrics, type Metrics } from './core/metrics.js';
import { removeStaleTemps } from './core/fs-atomic.js';
import { lockStateDir, StateDirLockedError } from './core/state-lock.js';
import { createSystemd } from './core/systemd.js';
import { createBrowser } from './chromium/index.js';
import { createProxies } from './proxies/index.js';
import { createProfiles } from './profiles/index.js';
import { createExtensions } from './extensions/index.js';
import { createProcesses, PtyUnavailableError } from './processes/index.js';
import { createComputer } from './computer/index.js';
import { createReplays } from './replays/index.js';
import { createPlaywright } from './playwright/index.js';
import { createLogs, type Logs } from './logs/index.js';
import { createFs } from './fs/index.js';
import { createDownloads } from './downloads/index.js';
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
  const metrics = createMetrics();
  const { config, log, logs } = settingsOrExit(metrics);
  lockOrExit(config, log); // before anything in the state dir is read or written
  // Atomic writes a killed daemon left unfinished (proxies.json, chromium-executables.json, ...).
  for (const name of removeStaleTemps(config.stateDir)) log.info({ event: 'store_temp_removed', file: name }, 'removed a temp file of an unfinished store write');
  const version = packageVersion();
  // First: it takes NOTIFY_SOCKET & co. out of process.env before anything spawns.
  const systemd = createSystemd({ log, waitForBrowser: config.chromium.autostart });
  let keyring: KeyRing;
  try {
    keyring = KeyRing.create(config, log);
  } catch (err) {
    exitBadSetting(log, err);
  }

  const browser = createBrowser({ config, log, metrics, onChromiumLine: logs.chromiumLine });
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
  try {
    proxies = createProxies({ config, log, metrics, browserBody: () => ({ ...browser.snapshot() }), profileUpdate: (value, ctx) => profiles.updateBrowser(value, ctx) });
  } catch (err) {
    exitBadSetting(log, err);
  }
  // The browser's forwarding proxy listens before Chromium can launch (its --proxy-server port: proxies.forwarderPort()).
  await proxies.start();
  browser.setProxyPort(() => proxies.forwarderPort());
  browser.addSnapshotFields(() => {
    const active = proxies.active();
    return active === null ? { proxy: null } : { proxy_id: active.id, proxy: active };
  });
  const extensions = createExtensions({ config, log, metrics, browser });
  await extensions.start();
  const processes = createProcesses({ config, log, metrics });
  try {
    await processes.start(); // the terminal module, and the process groups a daemon killed with SIGKILL left
  } catch (err) {
    if (!(err instanceof PtyUnavailableError)) throw err;
    log.fatal({ event: 'dependency_missing', package: err.pkg }, err.message);
    process.exit(EXIT_BAD_SETTING);
  }
  const computer = createComputer({ config, log, metrics, browser });
  const replays = createReplays({ config, log, currentPage: (deadline) => computer.shownPage(deadline), notReadyReason: () => browser.notReadyReason() });
  let files: ReturnType<typeof createFs>;
  try {
    files = createFs({ config, log, metrics });
  } catch (err) {
    exitBadSetting(log, err);
  }
  readable = (file) => files.resolveReadable(file);
  // The browser's downloads: the daemon owns the download behaviour, whichever CDP client sets it.
  const downloads = createDownloads({ config, log, browser, downloadsDir: files.downloadsDir });
  const playwright = createPlaywright({ config, log, metrics, keyring, downloadsDir: files.downloadsDir, runnerScript: fileURLToPath(new URL('./playwright/runner/main.js', import.meta.url)) });
  // Closed in reverse: the runners end before Chromium.
  const modules: Closable[] = [profiles, browser, proxies, extensions, processes, files, computer, replays, playwright];

  // Built at its first request: ~30 ms of zod's JSON Schema conversion, and the document's memory,
  // that neither the start nor an idle daemon pays for.
  let openapi: Record<string, unknown> | null = null;
  const openapiDoc = (): Record<string, unknown> =>
    (openapi ??= buildOpenApi(server.router.routes, {
      version,
      description: 'browserd: the per-VM browser-host daemon. Every route but /healthz, /readyz and /openapi.json takes a bearer token.',
    }));
  const routes = [
    ...systemRoutes({ metrics, notReadyReason: () => browser.notReadyReason(), openapi: openapiDoc }),
    ...browser.routes,
    ...proxies.routes,
    ...profiles.routes,
    ...extensions.routes,
    ...processes.routes,
    ...computer.routes,
    ...playwright.routes,
    ...logs.routes,
    ...files.routes,
    ...downloads.routes,
    ...replays.routes,
  ];
  const server = new HttpServer({ config, log, metrics, keyring, routes });

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
  log.info({ event: 'listening', address: `${host}:${address.port}`, port: address.port, version, node: process.version, state_dir: config.stateDir }, 'listening');
  systemd.listening(`${host}:${address.port}`);
  browser.setPublicAddress(address.address, address.port);
  proxies.setApiPort(address.port);
  playwright.setListenAddress(address.address, address.port);
  if (config.chromium.autostart) browser.start();
}

// A bug that escapes every handler: one JSON line for the journal, then exit 1 (systemd restarts;
// the next start ends whatever this run left on the Chromium profile).
for (const kind of ['unhandledRejection', 'uncaughtException'] as const) {
  process.on(kind, (err: unknown) => {
    flushLogs(); // the lines before it first
    createLogger('fatal').fatal({ event: 'crash', kind, err }, kind);
    process.exit(1);
  });
}

await main();
