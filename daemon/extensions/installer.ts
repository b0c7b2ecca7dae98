// Installs and removes extensions while the caller holds the browser's lifecycle lock.
//
// install(): every item gets a mode: `policy` when managed policy forbids unpacked extensions or
// the manifest asks for webRequestBlocking; else `live` when Chromium is ready, `restart` when it
// is not. The checked trees are renamed into installed/<name> (a replaced version is put aside),
// then: live → Extensions.loadUnpacked and verification; a live failure, or any policy or
// restart item → one Chromium restart with the whole set at launch, every extension verified
// (a replaced policy install takes one more restart, see takeOutOfPolicy). Success commits
// installed.json; any failure puts everything back (files, policy file, the set) and, when
// Chromium was touched, relaunches it with the old set: 422 activation_failed (503 when Chromium
// does not come up at all).
import { performance } from 'node:perf_hooks';
import { readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import type { Metrics } from '../core/metrics.js';
import type { Browser, LaunchExtras, RestartResult } from '../chromium/types.js';
import { ApiError, BrowserUnavailableError, NotFoundError, OperationFailedError } from '../http/errors.js';
import { CdpClient, CdpError } from './cdp.js';
import { idFromPath, idFromPublicKey } from './crx3.js';
import { unpackedBlockedReason } from './policy.js';
import type { PreparedItem } from './prepare.js';
import type { PolicyPublisher } from './publisher.js';
import type { Activation, InstalledEntry, Store } from './store.js';
import { verifyGone, verifyInstalled, VerifyError, type Expectation } from './verify.js';

export interface InstallerDeps {
  config: Config;
  metrics: Metrics;
  browser: Browser;
  store: Store;
  publisher: PolicyPublisher;
}

export interface InstallResult {
  extensions: { name: string; id: string; version: string; activation: Activation }[];
  chromium: { restarted: boolean; pid: number | null; ready_ms: number };
}

interface Plan {
  item: PreparedItem;
  mode: Activation;
  entry: InstalledEntry;
  replaced: InstalledEntry | null;
  aside: string | null;
  placed: boolean;
}

const CONNECT_TIMEOUT_MS = 5000;
/** The test hook hold-activation lets go by itself after this long. */
const HOLD_MAX_MS = 120_000;

export class Installer {
  /** What the next Chromium launch applies: the committed set, plus an install in progress. */
  private effective = new Map<string, InstalledEntry>();

  constructor(private readonly deps: InstallerDeps) {}

  /** After store.open(). */
  reset(): void {
    this.effective = new Map(this.deps.store.committed);
  }

  launchExtras(): LaunchExtras {
    const all = [...this.effective.values()];
    return {
      extensionPaths: all.filter((e) => e.activation !== 'policy').map((e) => this.deps.store.installedPath(e.name)),
      allowBackgroundNetworking: all.some((e) => e.activation === 'policy'),
    };
  }

  list(): Omit<InstalledEntry, 'service_worker'>[] {
    return [...this.deps.store.committed.values()].map((e) => ({ name: e.name, id: e.id, version: e.version, activation: e.activation, installed_at: e.installed_at }));
  }

  /** A BROWSERD_TEST_HOOKS entry `name` (every subject) or `name=<subject>` (e.g. `my-ext` or `my-ext@2.0`). */
  private hook(name: string, ...subjects: string[]): boolean {
    const v = this.deps.config.testHooks.get(name);
    return v !== undefined && (v === '' || subjects.includes(v));
  }

  async install(items: PreparedItem[], log: Logger): Promise<InstallResult> {
    const { browser, store, publisher, config } = this.deps;
    const started = performance.now();
    await this.holdForTests(items, log);
    const blocked = await unpackedBlockedReason(config.chromium.policyDir);
    // Launches and crash restarts hold the same lock: inside it, a browser that is not ready is
    // stopped, failed or waiting out a crash-restart backoff, and a restart starts it now.
    const up = browser.snapshot().state === 'ready';

    const plans: Plan[] = [];
    for (const item of items) {
      const replaced = store.committed.get(item.name) ?? null;
      let mode: Activation = item.facts.needsPolicy || blocked !== null ? 'policy' : up ? 'live' : 'restart';
      // Leaving policy mode changes the forcelist, which only a restart applies.
      if (mode !== 'policy' && replaced?.activation === 'policy') mode = 'restart';
      const id = mode === 'policy' ? await publisher.idFor(item.name) : this.unpackedId(item);
      const entry: InstalledEntry = {
        name: item.name,
        id,
        version: item.facts.version,
        activation: mode,
        installed_at: new Date().toISOString(),
        service_worker: item.facts.serviceWorker,
      };
      plans.push({ item, mode, entry, replaced, aside: null, placed: false });
    }
    if (plans.some((p) => p.mode !== 'live')) for (const p of plans) if (p.mode === 'live') this.setMode(p, 'restart');
    const policyTouched = plans.some((p) => p.mode === 'policy' || p.replaced?.activation === 'policy');
    log.info({ event: 'extension_activation_started', names: plans.map((p) => p.entry.name), modes: plans.map((p) => p.mode), policy_block: blocked }, 'activating extensions');

    let relaunch = false;
    let restarted: RestartResult | null = null;
    let pid: number | null = null;
    try {
      for (const p of plans) {
        p.aside = await store.putAside(p.entry.name);
        p.placed = true;
        await store.place(p.entry.name, p.item.tree);
        this.effective.set(p.entry.name, p.entry);
      }
      for (const p of plans) if (p.mode === 'policy') p.entry.id = await publisher.pack(p.entry.name, p.entry.version);
      const reinstall = plans.filter((p) => p.mode === 'policy' && p.replaced?.activation === 'policy');
      if (reinstall.length > 0) {
        relaunch = true;
        await this.takeOutOfPolicy(reinstall.map((p) => p.entry));
      }
      if (policyTouched) await publisher.sync(this.effective.values());

      if (plans.every((p) => p.mode === 'live')) {
        relaunch = true;
        try {
          pid = await this.activateLive(plans, log);
        } catch (err) {
          log.warn({ event: 'extension_live_failed', reason: (err as Error).message }, 'live activation failed: restarting Chromium with the installed set');
          for (const p of plans) this.setMode(p, 'restart');
        }
      }
      if (plans.some((p) => p.mode !== 'live')) {
        relaunch = true;
        restarted = await browser.restartLocked(plans.some((p) => p.mode === 'policy') ? 'policy' : 'extensions');
        pid = restarted.pid;
        await this.verifyAfterRestart(plans);
      }

      for (const p of plans) store.committed.set(p.entry.name, p.entry);
      await store.save();
      for (const p of plans) await store.dropAside(p.aside);
      this.reset();
      if (policyTouched) await publisher.prune(this.effective.values());
    } catch (err) {
      await this.rollback(plans, policyTouched, relaunch, log);
      const seconds = (performance.now() - started) / 1000;
      for (const p of plans) {
        this.deps.metrics.extensionActivations.inc({ mode: p.mode, outcome: 'failed' });
        this.deps.metrics.extensionActivationDuration.observe({ mode: p.mode }, seconds);
      }
      throw this.activationFailed(err, relaunch, log);
    }

    const ms = Math.round(performance.now() - started);
    for (const p of plans) {
      this.deps.metrics.extensionActivations.inc({ mode: p.mode, outcome: 'ok' });
      this.deps.metrics.extensionActivationDuration.observe({ mode: p.mode }, ms / 1000);
      log.info({ event: 'extension_activated', name: p.entry.name, id: p.entry.id, version: p.entry.version, mode: p.mode, ms }, 'extension activated');
    }
    return {
      extensions: plans.map((p) => ({ name: p.entry.name, id: p.entry.id, version: p.entry.version, activation: p.mode })),
      chromium: { restarted: restarted !== null, pid, ready_ms: restarted?.readyMs ?? 0 },
    };
  }

  /**
   * Chromium updates a force-installed extension only on its own schedule (not at a restart) and
   * never to a lower version. A replacement is therefore taken out of the forcelist for one launch,
   * which uninstalls it, and comes back new with the next one (measured on Chromium 156).
   */
  private async takeOutOfPolicy(entries: InstalledEntry[]): Promise<void> {
    const { browser, config, publisher } = this.deps;
    const names = new Set(entries.map((e) => e.name));
    await publisher.sync([...this.effective.values()].filter((e) => !names.has(e.name)));
    const ep = await browser.restartLocked('policy').then(() => browser.waitReady(config.chromium.readyTimeoutMs));
    const cdp = await CdpClient.connect(ep.browserWsUrl, CONNECT_TIMEOUT_MS);
    try {
      await verifyGone(cdp, entries.map((e) => e.id), Date.now() + config.extensions.activationTimeoutMs, { policy: true });
    } finally {
      cdp.close();
    }
  }

  private setMode(p: Plan, mode: Activation): void {
    p.mode = mode;
    p.entry.activation = mode;
  }

  /** Chromium's id of an unpacked extension: from the manifest's key, else from its absolute path. */
  private unpackedId(item: PreparedItem): string {
    if (item.facts.key !== null) return idFromPublicKey(Buffer.from(item.facts.key, 'base64'));
    return idFromPath(this.deps.store.installedPath(item.name));
  }

  private expectation(e: InstalledEntry, inRequest: boolean): Expectation {
    return {
      name: e.name,
      id: e.id,
      version: e.version,
      kind: e.activation === 'policy' ? 'policy' : 'unpacked',
      worker: inRequest && e.service_worker !== null,
      forcedFailure: inRequest && this.hook('fail-activation', e.name, `${e.name}@${e.version}`),
    };
  }

  private async activateLive(plans: Plan[], log: Logger): Promise<number> {
    const { browser, config, store } = this.deps;
    const ep = await browser.waitReady(config.chromium.readyTimeoutMs);
    const deadline = Date.now() + config.extensions.activationTimeoutMs;
    const cdp = await CdpClient.connect(ep.browserWsUrl, CONNECT_TIMEOUT_MS);
    try {
      await cdp.watchWorkers(CONNECT_TIMEOUT_MS);
      for (const p of plans) {
        if (this.hook('fail-live-activation', p.entry.name)) throw new Error('live activation refused by the test hook fail-live-activation');
        const id = await cdp.loadUnpacked(store.installedPath(p.entry.name), Math.max(1, deadline - Date.now()));
        if (id !== p.entry.id) {
          log.warn({ event: 'extension_id_differs', name: p.entry.name, expected: p.entry.id, id }, 'Chromium gave the extension another id than expected');
          p.entry.id = id;
        }
      }
      await verifyInstalled(cdp, plans.map((p) => this.expectation(p.entry, true)), deadline);
      return ep.pid;
    } finally {
      cdp.close();
    }
  }

  /** Every extension of the set runs; those of this request with a service worker show it. */
  private async verifyAfterRestart(plans: Plan[]): Promise<void> {
    const { browser, config } = this.deps;
    const ep = await browser.waitReady(config.chromium.readyTimeoutMs);
    const deadline = Date.now() + config.extensions.activationTimeoutMs;
    const mine = new Set(plans.map((p) => p.entry.name));
    const cdp = await CdpClient.connect(ep.browserWsUrl, CONNECT_TIMEOUT_MS);
    try {
      await cdp.watchWorkers(CONNECT_TIMEOUT_MS);
      await verifyInstalled(cdp, [...this.effective.values()].map((e) => this.expectation(e, mine.has(e.name))), deadline);
    } finally {
      cdp.close();
    }
  }

  private async rollback(plans: Plan[], policyTouched: boolean, relaunch: boolean, log: Logger): Promise<void> {
    const { store, publisher, browser } = this.deps;
    for (const p of [...plans].reverse()) {
      if (!p.placed) continue;
      await store.restore(p.entry.name, p.aside).catch((err: unknown) => log.error({ event: 'extension_rollback_error', name: p.entry.name, err }, 'could not restore the previous files'));
    }
    this.reset();
    if (policyTouched) {
      await publisher.sync(this.effective.values()).catch((err: unknown) => log.error({ event: 'extension_rollback_error', err }, 'could not restore the policy file'));
      await publisher.prune(this.effective.values()).catch(() => undefined);
    }
    if (!relaunch) return;
    try {
      const r = await browser.restartLocked('extensions');
      log.info({ event: 'extension_rollback', pid: r.pid, ready_ms: r.readyMs }, 'Chromium relaunched with the previous extensions');
    } catch (err) {
      log.error({ event: 'extension_rollback_error', err }, 'Chromium did not come back with the previous extensions');
    }
  }

  private activationFailed(err: unknown, relaunched: boolean, log: Logger): ApiError {
    if (err instanceof BrowserUnavailableError) {
      log.warn({ event: 'extension_activation_failed', cause: err.code, reason: err.message }, 'Chromium did not become ready; previous state restored');
      return err;
    }
    let inner: { code: string; message: string };
    if (err instanceof VerifyError) inner = { code: 'not_verified', message: err.message };
    else if (err instanceof CdpError) inner = { code: 'devtools_error', message: err.message };
    else if (err instanceof ApiError) inner = { code: err.code, message: err.message };
    else {
      log.error({ event: 'extension_activation_error', err }, 'extension activation failed');
      inner = { code: 'internal_error', message: 'the daemon log has the details under this request id' };
    }
    log.warn({ event: 'extension_activation_failed', cause: inner.code, reason: inner.message }, 'extension activation failed; previous state restored');
    const restored = relaunched ? 'the previous extensions are back and Chromium was relaunched with them' : 'the previous extensions are back';
    return new OperationFailedError('activation_failed', `the extensions could not be activated; ${restored}: ${inner.message}`, inner);
  }

  /** Test hook `hold-activation=<name>`: holds the lock until <extensions>/release-<name> exists. */
  private async holdForTests(items: PreparedItem[], log: Logger): Promise<void> {
    const held = items.find((i) => this.hook('hold-activation', i.name));
    if (!held) return;
    const file = path.join(this.deps.store.root, `release-${held.name}`);
    log.info({ event: 'extension_activation_held', name: held.name, release_file: file }, 'held by the test hook hold-activation');
    const until = Date.now() + HOLD_MAX_MS;
    while (!(await readdir(this.deps.store.root)).includes(path.basename(file)) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    await rm(file, { force: true });
  }

  /**
   * Extensions.uninstall. Chromium refuses it for an extension loaded by --load-extension ("not an
   * unpacked extension"); loading the same path again over CDP turns it into an unpacked one,
   * which uninstall then removes (measured on Chromium 156).
   */
  private async unloadUnpacked(cdp: CdpClient, entry: InstalledEntry, deadline: number): Promise<void> {
    const left = (): number => Math.max(1, deadline - Date.now());
    if (!(await cdp.getExtensions(left())).some((x) => x.id === entry.id)) return; // not loaded: nothing to unload
    try {
      await cdp.uninstall(entry.id, left());
    } catch (err) {
      if (!(err instanceof CdpError)) throw err;
      await cdp.loadUnpacked(this.deps.store.installedPath(entry.name), left());
      await cdp.uninstall(entry.id, left());
    }
  }

  async remove(name: string, log: Logger): Promise<void> {
    const { store, publisher, browser, config } = this.deps;
    const entry = store.committed.get(name);
    if (!entry) throw new NotFoundError(`no extension named ${name}`);
    store.committed.delete(name);
    await store.save();
    this.reset();
    const up = browser.snapshot().state === 'ready'; // else the next launch simply leaves it out
    let how = 'not running';
    if (entry.activation === 'policy') {
      await publisher.sync(this.effective.values());
      if (up) {
        // Out of the forcelist, Chromium uninstalls it at the next launch.
        await browser.restartLocked('policy');
        how = 'restart';
        const ep = await browser.waitReady(config.chromium.readyTimeoutMs);
        const cdp = await CdpClient.connect(ep.browserWsUrl, CONNECT_TIMEOUT_MS);
        try {
          await verifyGone(cdp, [entry.id], Date.now() + config.extensions.activationTimeoutMs, { policy: true });
        } catch (err) {
          log.warn({ event: 'extension_uninstall_failed', name, reason: (err as Error).message }, 'the policy install is still present after the restart');
        } finally {
          cdp.close();
        }
      }
    } else if (up) {
      try {
        const ep = await browser.waitReady(config.chromium.readyTimeoutMs);
        const cdp = await CdpClient.connect(ep.browserWsUrl, CONNECT_TIMEOUT_MS);
        try {
          const deadline = Date.now() + config.extensions.activationTimeoutMs;
          await this.unloadUnpacked(cdp, entry, deadline);
          await verifyGone(cdp, [entry.id], deadline);
          how = 'uninstall';
        } finally {
          cdp.close();
        }
      } catch (err) {
        log.warn({ event: 'extension_uninstall_failed', name, reason: (err as Error).message }, 'Extensions.uninstall did not remove it cleanly: restarting Chromium');
        await browser.restartLocked('extensions');
        how = 'restart';
      }
    }
    await store.removeInstalled(name);
    await publisher.prune(this.effective.values());
    log.info({ event: 'extension_removed', name, id: entry.id, mode: entry.activation, unloaded_by: how }, 'extension removed');
  }
}
