// Installs and removes extensions while the caller holds the browser's lifecycle lock.
//
// install(): every item gets a mode: `policy` when managed policy forbids unpacked extensions or
// the manifest asks for webRequestBlocking; else `live` when Chromium is ready, `restart` when it
// is not. Ids are checked first (id_conflict). The checked trees are renamed into
// installed/<name> inside a store transaction (a replaced version is put aside), then:
// live → Extensions.loadUnpacked and verification; Chromium refusing an item rejects it (422
// extension_rejected, chromium_refused: the items already loaded are taken out again over CDP,
// no restart); a live timeout or failed verification, or any policy or restart item → one
// Chromium restart with the whole set at launch, every extension verified (a replaced policy
// install takes one more restart, see takeOutOfPolicy). A browser that is stopped or failed is
// not launched for an upload: the set is committed and applies at its next launch. Success
// commits installed.json; any failure puts everything back (files, policy file, the set) and,
// when Chromium was touched, relaunches it with the old set: 422 activation_failed (503 when
// Chromium does not come up at all).
import { performance } from 'node:perf_hooks';
import { readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import type { Metrics } from '../core/metrics.js';
import type { Browser, LaunchExtras, RestartResult } from '../chromium/types.js';
import { BrowserdError, BrowserUnavailableError, NotFoundError, OperationFailedError } from '../core/errors.js';
import { CdpClient, CdpError } from './activation/cdp.js';
import { activateLive, CONNECT_TIMEOUT_MS, LoadRefused, undoLive, unloadUnpacked, type LiveDeps } from './activation/live.js';
import { checkIds, planItems, setMode, type Plan } from './activation/plan.js';
import { unpackedBlockedReason } from './policy/policy.js';
import type { PreparedItem } from './intake/prepare.js';
import type { PolicyPublisher } from './policy/publisher.js';
import { Rejection, rejectedError } from './intake/rejection.js';
import type { Activation, InstalledEntry, Store } from './store.js';
import { verifyGone, verifyInstalled, VerifyError, type Expectation } from './activation/verify.js';

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

/** The test hook hold-activation lets go by itself after this long. */
const HOLD_MAX_MS = 120_000;

/** Why extensions cannot work with this state dir (Chromium's --load-extension splits paths at commas), else null. */
export function unusableReason(installedDir: string): string | null {
  if (!installedDir.includes(',')) return null;
  return (
    `the extensions folder ${installedDir} has a comma in its path, which Chromium's --load-extension cannot take ` +
    '(it separates paths with commas): set BROWSERD_STATE_DIR to a path without commas'
  );
}

export class Installer {
  /** What the next Chromium launch applies: the committed set, plus an install in progress. */
  private effective = new Map<string, InstalledEntry>();
  /** Set when the state dir cannot hold extensions Chromium loads at launch: uploads are refused. */
  readonly unusable: string | null;
  private readonly live: LiveDeps;

  constructor(private readonly deps: InstallerDeps) {
    this.unusable = unusableReason(deps.store.installedDir);
    this.live = {
      config: deps.config,
      browser: deps.browser,
      installedPath: (name) => deps.store.installedPath(name),
      expectation: (e, inRequest) => this.expectation(e, inRequest),
      forcedLiveFailure: (name) => this.hook('fail-live-activation', name),
    };
  }

  /** After store.open(). */
  reset(): void {
    this.effective = new Map(this.deps.store.committed);
  }

  launchExtras(): LaunchExtras {
    const all = [...this.effective.values()];
    return {
      // A path with a comma would be split by Chromium: such a state dir takes no uploads (see `unusable`).
      extensionPaths: all.filter((e) => e.activation !== 'policy').map((e) => this.deps.store.installedPath(e.name)).filter((p) => !p.includes(',')),
      allowBackgroundNetworking: all.some((e) => e.activation === 'policy'),
    };
  }

  list(): Omit<InstalledEntry, 'service_worker' | 'crx_file'>[] {
    return [...this.deps.store.committed.values()].map((e) => ({ name: e.name, id: e.id, version: e.version, activation: e.activation, installed_at: e.installed_at }));
  }

  /** 422 activation_failed when the state dir cannot hold extensions (checked before the upload is read). */
  refuseIfUnusable(): void {
    if (this.unusable !== null) {
      throw new OperationFailedError('activation_failed', `extensions cannot be installed: ${this.unusable}`, { code: 'state_dir_unusable', message: this.unusable });
    }
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
    this.refuseIfUnusable();
    if (store.pendingTx !== null) {
      // An earlier install could not put its files back (see restoreFiles); the next start finishes that.
      const why = 'an earlier install could not be undone completely; restart browserd, which finishes undoing it from the state dir';
      throw new OperationFailedError('activation_failed', `extensions cannot be installed now: ${why}`, { code: 'recovery_needed', message: why });
    }
    const blocked = await unpackedBlockedReason(config.chromium.policyDir);
    // Launches and crash restarts hold the same lock: inside it, a browser that is not ready is
    // stopped, failed or waiting out a crash-restart backoff (`restarting`: a launch is due, so
    // it happens now, with the new set). A stopped or failed browser is not launched for an
    // upload: the set is committed and applied at its next launch.
    const state = browser.snapshot().state;
    const up = state === 'ready';
    const deferred = state === 'stopped' || state === 'failed';

    const plans = await planItems(items, { store, publisher, blocked, up });
    checkIds(plans, store.committed, log);
    const twoLaunches = plans.find((p) => p.mode === 'policy' && p.replaced?.activation === 'policy');
    if (deferred && twoLaunches) {
      throw new BrowserUnavailableError(
        `Chromium is ${state}: replacing the policy install ${twoLaunches.entry.name} takes two Chromium launches, which an upload does not start; ` +
          'start Chromium first (POST /browsers/{id}/restart)',
      );
    }
    const policyTouched = plans.some((p) => p.mode === 'policy' || p.replaced?.activation === 'policy');
    log.info(
      { event: 'extension_activation_started', names: plans.map((p) => p.entry.name), modes: plans.map((p) => p.mode), policy_block: blocked, browser_state: state },
      'activating extensions',
    );

    let relaunch = false;
    let restarted: RestartResult | null = null;
    let pid: number | null = null;
    const tx = await store.begin();
    try {
      for (const p of plans) {
        p.aside = await store.putAside(tx, p.entry.name);
        p.placed = true;
        await store.place(p.entry.name, p.item.tree);
        this.effective.set(p.entry.name, p.entry);
      }
      for (const p of plans) {
        if (p.mode !== 'policy') continue;
        const packed = await publisher.pack(p.entry.name, p.entry.version);
        p.entry.id = packed.id;
        p.entry.crx_file = packed.crxFile;
      }
      const reinstall = plans.filter((p) => p.mode === 'policy' && p.replaced?.activation === 'policy');
      if (reinstall.length > 0) {
        relaunch = true;
        await this.takeOutOfPolicy(reinstall.map((p) => p.entry));
      }
      if (policyTouched) await publisher.sync(this.effective.values());

      if (deferred) {
        log.info({ event: 'extension_activation_deferred', state, names: plans.map((p) => p.entry.name) }, `Chromium is ${state}: the extensions apply at its next launch`);
      } else {
        if (plans.every((p) => p.mode === 'live')) {
          relaunch = true;
          try {
            pid = await activateLive(this.live, plans, log);
          } catch (err) {
            if (err instanceof LoadRefused) throw err;
            log.warn({ event: 'extension_live_failed', reason: (err as Error).message }, 'live activation failed: restarting Chromium with the installed set');
            for (const p of plans) setMode(p, 'restart');
          }
        }
        if (plans.some((p) => p.mode !== 'live')) {
          relaunch = true;
          restarted = await browser.restartLocked(plans.some((p) => p.mode === 'policy') ? 'policy' : 'extensions');
          pid = restarted.pid;
          await this.verifyAfterRestart(plans);
        }
      }

      await store.commit(tx, plans.map((p) => p.entry));
      this.reset();
      if (policyTouched) await publisher.prune(this.effective.values());
    } catch (err) {
      const seconds = (performance.now() - started) / 1000;
      for (const p of plans) {
        this.deps.metrics.extensionActivations.inc({ mode: p.mode, outcome: 'failed' });
        this.deps.metrics.extensionActivationDuration.observe({ mode: p.mode }, seconds);
      }
      if (err instanceof LoadRefused) throw await this.refused(plans, err, tx, log);
      await this.rollback(plans, tx, policyTouched, relaunch, log);
      throw this.activationFailed(err, relaunch, log);
    }

    const ms = Math.round(performance.now() - started);
    for (const p of plans) {
      this.deps.metrics.extensionActivations.inc({ mode: p.mode, outcome: 'ok' });
      this.deps.metrics.extensionActivationDuration.observe({ mode: p.mode }, ms / 1000);
      log.info({ event: 'extension_activated', name: p.entry.name, id: p.entry.id, version: p.entry.version, mode: p.mode, ms, deferred }, 'extension activated');
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

  /** The files of every placed item back as they were, the transaction ended. */
  private async restoreFiles(plans: Plan[], tx: string, log: Logger): Promise<void> {
    const { store } = this.deps;
    let restored = true;
    for (const p of [...plans].reverse()) {
      if (!p.placed) continue;
      try {
        await store.restore(p.entry.name, p.aside);
        p.placed = false;
      } catch (err) {
        restored = false;
        log.error({ event: 'extension_rollback_error', name: p.entry.name, err }, 'could not restore the previous files');
      }
    }
    // Left pending when a restore failed: the next daemon start finishes it from previous/<tx>/.
    if (restored) await store.abort(tx).catch((err: unknown) => log.error({ event: 'extension_rollback_error', err }, 'could not end the install'));
    this.reset();
  }

  /**
   * Chromium refused an item: the request's files go, the items loaded before it are taken out
   * over CDP (a replaced one back to its previous version), no restart. Should that fail,
   * Chromium is relaunched with the previous set. The answer is the item's rejection.
   */
  private async refused(plans: Plan[], refusal: LoadRefused, tx: string, log: Logger): Promise<BrowserdError> {
    const bad = plans[refusal.index] as Plan;
    log.warn({ event: 'extension_rejected', name: bad.entry.name, cause: 'chromium_refused', reason: refusal.chromiumText }, 'Chromium refused to load the extension');
    await this.restoreFiles(plans, tx, log);
    const loaded = plans.slice(0, refusal.index);
    const replaced = plans.flatMap((p) => (p.replaced === null ? [] : [p.replaced]));
    try {
      await undoLive(this.live, loaded, replaced);
      log.info({ event: 'extension_rollback', names: loaded.map((p) => p.entry.name), how: 'cdp' }, 'the items loaded before the refusal were taken out again');
    } catch (err) {
      log.warn({ event: 'extension_rollback_error', reason: (err as Error).message }, 'could not take the loaded items out over CDP: relaunching Chromium with the previous set');
      await this.relaunch(log);
    }
    return rejectedError([{ label: bad.item.label, name: bad.entry.name, rejection: new Rejection('chromium_refused', `Chromium refused to load it: ${refusal.chromiumText}`) }]);
  }

  private async rollback(plans: Plan[], tx: string, policyTouched: boolean, relaunch: boolean, log: Logger): Promise<void> {
    const { publisher } = this.deps;
    await this.restoreFiles(plans, tx, log);
    if (policyTouched) {
      await publisher.sync(this.effective.values()).catch((err: unknown) => log.error({ event: 'extension_rollback_error', err }, 'could not restore the policy file'));
      await publisher.prune(this.effective.values()).catch(() => undefined);
    }
    if (relaunch) await this.relaunch(log);
  }

  private async relaunch(log: Logger): Promise<void> {
    try {
      const r = await this.deps.browser.restartLocked('extensions');
      log.info({ event: 'extension_rollback', pid: r.pid, ready_ms: r.readyMs, how: 'restart' }, 'Chromium relaunched with the previous extensions');
    } catch (err) {
      log.error({ event: 'extension_rollback_error', err }, 'Chromium did not come back with the previous extensions');
    }
  }

  private activationFailed(err: unknown, relaunched: boolean, log: Logger): BrowserdError {
    if (err instanceof BrowserUnavailableError) {
      log.warn({ event: 'extension_activation_failed', cause: err.code, reason: err.message }, 'Chromium did not become ready; previous state restored');
      return err;
    }
    let inner: { code: string; message: string };
    if (err instanceof VerifyError) inner = { code: 'not_verified', message: err.message };
    else if (err instanceof CdpError) inner = { code: 'devtools_error', message: err.message };
    else if (err instanceof BrowserdError) inner = { code: err.code, message: err.message };
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
          await unloadUnpacked(cdp, entry, store.installedPath(name), deadline);
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
