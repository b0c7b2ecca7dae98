// browserd: wiring only. Settings → logger → keys → the modules (one list) → routes → server →
// start each module → listen → serve; the signals stop the list in reverse. The process's own steps
// are core/boot.ts's; a module's shape is module.ts's.
import { fileURLToPath } from 'node:url';
import { afterListening, harden, listenOrExit, logListening, orExitBadSetting, packageVersion, prepare, settingsOrExit } from './core/boot.js';
import { createMetrics } from './core/metrics.js';
import { createSystemd } from './core/systemd.js';
import { createBrowser, type Browser } from './chromium/index.js';
import { createProxies } from './proxies/index.js';
import { createEgress } from './egress/index.js';
import { createProfiles } from './profiles/index.js';
import { createExtensions } from './extensions/index.js';
import { createProcesses } from './processes/index.js';
import { createComputer } from './computer/index.js';
import { createReplays } from './replays/index.js';
import { createLive } from './live/index.js';
import { createPlaywright } from './playwright/index.js';
import { createWebMcp } from './webmcp/index.js';
import { createRepl } from './repl/index.js';
import { createLogRings, createLogs, type LogRings } from './logs/index.js';
import { createFs } from './fs/index.js';
import { createDownloads } from './downloads/index.js';
import { createCurl } from './curl/index.js';
import { createTelemetry, type Telemetry } from './telemetry/index.js';
import { createWebDriver } from './webdriver/index.js';
import { ListenAddress, serveAll, startAll, stopOnSignals, type Module, type ModuleContext } from './module.js';
import { KeyRing } from './http/auth.js';
import { HttpServer } from './http/server.js';
import { systemRoutes } from './http/system-routes.js';
import { tokenRoutes } from './http/jwt/routes.js';

async function main(): Promise<void> {
  const hardened = harden();
  const metrics = createMetrics();
  // The log streams' rings exist before the logger, which writes every line into one of them.
  const { config, log, rings } = settingsOrExit((c) => {
    const r = createLogRings(c);
    return { rings: r, tap: r.daemonLine };
  });
  prepare(config, log, metrics, hardened);
  const version = packageVersion(import.meta.url);
  const api = new ListenAddress(config.listen);
  const ctx: ModuleContext = { config, log, metrics, api };
  // First: it takes NOTIFY_SOCKET & co. out of process.env before anything spawns.
  const systemd = createSystemd({ log, waitForBrowser: config.chromium.autostart, api });
  const keyring = orExitBadSetting(log, () => KeyRing.create(config, log, metrics));
  const { browser, telemetry, ...made } = orExitBadSetting(log, () => makeModules(ctx, keyring, rings));
  systemd.watchBrowser(browser);
  const modules: Module[] = [systemd, ...made.modules]; // systemd first: it stops last (its watchdog pings go on while the rest stops)

  const system = systemRoutes({ metrics, version, notReadyReason: () => browser.notReadyReason(), routes: () => server.router.routes });
  const routes = [...system, ...tokenRoutes(keyring), ...modules.flatMap((m) => m.routes ?? [])];
  const server = new HttpServer({ config, log, metrics, keyring, routes, onRequestDone: (r) => telemetry.requestDone(r) });

  await startAll(modules, log);
  stopOnSignals(modules, server, log, config.http.shutdownTimeoutMs);
  process.on('SIGHUP', () => keyring.reload());

  const address = await listenOrExit(log, () => server.listen());
  api.bound(address);
  logListening(config, log, address, version);
  serveAll(modules); // systemd's READY=1, Chromium's autostart
  afterListening(config, log);
}

/**
 * Every module, in start order (they stop in reverse): a module another needs is made first and
 * listed by name; one nobody needs is made in the list. Adding a module is one entry here.
 */
function makeModules(ctx: ModuleContext, keyring: KeyRing, rings: LogRings): { modules: Module[]; browser: Browser; telemetry: Telemetry } {
  const browser = createBrowser(ctx, { keyring, onChromiumLine: rings.chromiumLine });
  const telemetry = createTelemetry(ctx, { browser });
  const profiles = createProfiles(ctx, { browser });
  const egress = createEgress(ctx, { browser, telemetry, forwarderPort: () => proxies.forwarderPort(), onChange: () => proxies.resetConnections('the egress policy changed; retry') });
  const proxies = createProxies(ctx, { browser, telemetry, egress: egress.gate });
  const extensions = createExtensions(ctx, { browser, telemetry });
  egress.addService(() => extensions.updateService()); // Chromium fetches policy installs there through the forwarding proxy
  const processes = createProcesses(ctx, { telemetry, extraEnv: () => egress.processEnv() });
  const computer = createComputer(ctx, { browser });
  const files = createFs(ctx);
  const playwright = createPlaywright(ctx, { keyring, browser, downloadsDir: files.downloadsDir, runnerScript: fileURLToPath(new URL('./playwright/runner/main.js', import.meta.url)) });
  const modules: Module[] = [
    telemetry,
    profiles, // before the browser: it stops after it (the browser's stop work saves the profile into its store)
    browser,
    proxies, // the forwarding proxy listens before Chromium launches (it is Chromium's --proxy-server)
    egress, // after the forwarding proxy listens (Chromium's managed policy names its port), before Chromium launches
    extensions,
    processes,
    files,
    createDownloads(ctx, { browser, downloadsDir: files.downloadsDir, telemetry }),
    computer,
    createReplays(ctx, { computer, browser }),
    createLive(ctx, { computer }),
    playwright,
    createRepl({ playwright, script: fileURLToPath(new URL('./repl/worker/main.js', import.meta.url)) }),
    createWebMcp({ browser, onInvoked: (data) => telemetry.emit('webmcp', 'control', { kind: 'kernel_api', event: 'webmcp_invoke' }, data) }),
    createCurl(ctx, { browser, proxies }),
    createLogs(ctx, { rings, files }),
    createWebDriver(ctx, { browser, issueToken: (identity, scopes) => keyring.derive(identity, { scopes }), relayScript: fileURLToPath(new URL('./webdriver/relay.js', import.meta.url)) }),
  ];
  return { modules, browser, telemetry };
}

await main();
