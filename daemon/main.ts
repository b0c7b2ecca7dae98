// browserd: wiring only. Settings → logger → keys → modules → routes → server → signals.
import { readFileSync } from 'node:fs';
import { ConfigError, loadConfig, type Config } from './core/config.js';
import { createLogger, type Logger } from './core/log.js';
import { createMetrics } from './core/metrics.js';
import { createSystemd } from './core/systemd.js';
import { createBrowser } from './chromium/index.js';
import { createProxies } from './proxies/index.js';
import { createExtensions } from './extensions/index.js';
import { createProcesses } from './processes/index.js';
import { createFs } from './fs/index.js';
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

function settingsOrExit(): { config: Config; log: Logger } {
  try {
    const config = loadConfig();
    return { config, log: createLogger(config.logLevel) };
  } catch (err) {
    exitBadSetting(createLogger('info'), err);
  }
}

function exitBadSetting(log: Logger, err: unknown): never {
  if (!(err instanceof ConfigError)) throw err;
  log.fatal({ event: 'bad_setting', setting: err.setting }, err.message);
  process.exit(EXIT_BAD_SETTING);
}

async function main(): Promise<void> {
  const { config, log } = settingsOrExit();
  const version = packageVersion();
  const metrics = createMetrics();
  // First: it takes NOTIFY_SOCKET & co. out of process.env before anything spawns.
  const systemd = createSystemd({ log, waitForBrowser: config.chromium.autostart });
  let keyring: KeyRing;
  try {
    keyring = KeyRing.create(config, log);
  } catch (err) {
    exitBadSetting(log, err);
  }

  const browser = createBrowser({ config, log, metrics });
  systemd.watchBrowser(browser);
  await browser.sweep(); // a Chromium left by a daemon killed with SIGKILL, whatever BROWSERD_BROWSER_AUTOSTART says
  let proxies: ReturnType<typeof createProxies>;
  try {
    proxies = createProxies({ config, log, metrics });
  } catch (err) {
    exitBadSetting(log, err);
  }
  const extensions = createExtensions({ config, log, metrics, browser });
  await extensions.start();
  const processes = createProcesses({ config, log, metrics });
  // files.downloadBehavior() gives the Browser.setDownloadBehavior params for every Chromium launch (wired with the CDP client).
  let files: ReturnType<typeof createFs>;
  try {
    files = createFs({ config, log, metrics });
  } catch (err) {
    exitBadSetting(log, err);
  }
  const modules: Closable[] = [browser, proxies, extensions, processes, files];

  let openapi: Record<string, unknown> = {};
  const routes = [
    ...systemRoutes({ metrics, notReadyReason: () => browser.notReadyReason(), openapi: () => openapi }),
    ...browser.routes,
    ...proxies.routes,
    ...extensions.routes,
    ...processes.routes,
    ...files.routes,
  ];
  const server = new HttpServer({ config, log, metrics, keyring, routes });
  openapi = buildOpenApi(server.router.routes, {
    version,
    description: 'browserd: the per-VM browser-host daemon. Every route but /healthz, /readyz and /openapi.json takes a bearer token.',
  });

  let stopping = false;
  const shutdown = async (signal: string): Promise<void> => {
    if (stopping) {
      log.warn({ event: 'stopping', signal }, 'second signal: stopping now');
      server.destroy();
      browser.destroy();
      processes.destroy();
      files.destroy();
      process.exit(1);
    }
    stopping = true;
    systemd.stopping();
    log.info({ event: 'stopping', signal, deadline_ms: config.http.shutdownTimeoutMs }, 'stopping');
    browser.beginShutdown();
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
  log.info({ event: 'listening', address: `${host}:${address.port}`, port: address.port, version, state_dir: config.stateDir }, 'listening');
  systemd.listening(`${host}:${address.port}`);
  browser.setPublicAddress(address.address, address.port);
  if (config.chromium.autostart) browser.start();
}

// A bug that escapes every handler: one JSON line for the journal, then exit 1 (systemd restarts;
// the next start ends whatever this run left on the Chromium profile).
for (const kind of ['unhandledRejection', 'uncaughtException'] as const) {
  process.on(kind, (err: unknown) => {
    createLogger('fatal').fatal({ event: 'crash', kind, err }, kind);
    process.exit(1);
  });
}

await main();
