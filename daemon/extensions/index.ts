// The extensions module: upload, list and remove extensions (routes.ts), applied at every
// Chromium launch through the browser's launch extras; policy installs served on loopback.
import type { Browser } from '../chromium/types.js';
import type { Module, ModuleContext } from '../module.js';
import type { TelemetrySink } from '../telemetry/index.js';
import type { Route } from '../http/router.js';
import { extensionsConfigurePart } from './configure.js';
import { Installer } from './installer.js';
import { PolicyPublisher } from './policy/publisher.js';
import { removeStaleTemps } from '../core/fs-atomic.js';
import { POLICY_FILE } from './policy/policy.js';
import { removeExtension } from './removal.js';
import { extensionRoutes } from './routes.js';
import { Store } from './store.js';

interface ExtensionsDeps {
  browser: Browser;
  /** An extension was activated (extension_installed). */
  telemetry?: TelemetrySink;
}

export interface Extensions extends Module {
  readonly routes: Route[];
  /** Reads the installed set, repairs an unfinished install, publishes policy installs. Before Chromium launches. */
  start(): Promise<void>;
  /** The loopback update server of policy installs (Chromium fetches from it through the forwarding proxy), null before it ever listened. */
  updateService(): { address: string; port: number } | null;
  close(): Promise<void>;
  destroy(): void;
}

/** Chromium stopped loading Manifest V2 extensions (unpacked or force-installed) in this major version; 156 measured. */
const MV2_REMOVED_IN = 139;

export function createExtensions(ctx: ModuleContext, deps: ExtensionsDeps): Extensions {
  const { config, metrics } = ctx;
  const { browser, telemetry } = deps;
  const log = ctx.log.child({ module: 'extensions' });
  const store = new Store(config.stateDir, log, config.agent.dir);
  const publisher = new PolicyPublisher(store, config.chromium.policyDir, log);
  const onInstalled = telemetry === undefined ? undefined : (e: Record<string, unknown>): void => telemetry.emit('extension_installed', 'system', { kind: 'kernel_api', event: 'extension_upload' }, e);
  const installer = new Installer({ config, metrics, browser, store, publisher, onInstalled });
  browser.use({
    name: 'extensions',
    launchExtras: () => installer.launchExtras(),
    snapshot: () => ({ extensions: installer.list() }),
    configure: extensionsConfigurePart({ store, installer, maxItems: config.extensions.maxItems }),
  });

  const allowManifestV2 = (): boolean => {
    const m = /(\d+)\.\d+/.exec(browser.snapshot().chromium.version ?? '');
    return m !== null && Number(m[1]) < MV2_REMOVED_IN;
  };
  let closing: Promise<void> | null = null;

  return {
    name: 'extensions',
    routes: extensionRoutes({ config, browser, store, installer, allowManifestV2, remove: (name, log) => removeExtension({ config, metrics, browser, store, publisher }, installer, name, log) }),
    async start() {
      try {
        await store.open();
        removeStaleTemps(config.chromium.policyDir, POLICY_FILE); // the machine's policy folder: only the daemon's own file's temps
        installer.reset();
        const all = [...store.committed.values()];
        if (all.some((e) => e.activation === 'policy') || store.policyFileWritten) await publisher.sync(all);
        log.info({ event: 'extensions_loaded', names: all.map((e) => e.name) }, `${all.length} installed extensions`);
        if (installer.unusable !== null) log.error({ event: 'extensions_unusable', reason: installer.unusable }, 'extension uploads are refused (422 activation_failed)');
      } catch (err) {
        log.error({ event: 'extensions_start_failed', err }, 'the installed extensions could not be read; none are applied');
      }
    },
    updateService: () => (store.updatePort === null ? null : { address: '127.0.0.1', port: store.updatePort }),
    close() {
      closing ??= publisher.close();
      return closing;
    },
    destroy() {
      void this.close();
    },
  };
}
