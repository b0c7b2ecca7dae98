// Installs extensions while the caller holds the browser's lifecycle lock. The algorithm:
//   1. plan: each item gets a mode — `policy` when managed policy forbids unpacked extensions or
//      the manifest asks for webRequestBlocking, else `live` when Chromium is ready, `restart`
//      when it is not — and its id; ids are checked (id_conflict).
//   2. place: the checked trees are renamed into installed/<name> inside a store transaction (a
//      replaced version is put aside); policy items are packed (CRX3) and published.
//   3. activate: live → Extensions.loadUnpacked and verification (a refusal by Chromium rejects
//      the item and is undone over CDP); a live timeout or failed verification, or any policy or
//      restart item → one Chromium restart with the whole set, every extension verified. A
//      stopped or failed browser is not launched: the set applies at its next launch.
//   4. commit installed.json — or undo everything (activation/undo.ts) and answer why.
import { performance } from 'node:perf_hooks';
import type { Config } from '../core/config.js';
import { OperationFailedError, BrowserUnavailableError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { TestHooks } from '../core/test-hooks.js';
import type { Metrics } from '../core/metrics.js';
import type { Browser, LaunchExtras, RestartResult } from '../chromium/types.js';
import { WorkerWatch } from './activation/devtools.js';
import { activateLive, LoadRefused, withActivationCdp, type LiveDeps } from './activation/live.js';
import { checkIds, planItems, setMode, type Plan } from './activation/plan.js';
import { activationFailed, rollback, undoRefusal, type UndoDeps } from './activation/undo.js';
import { verifyGone, verifyInstalled, VerifyError, type Expectation } from './activation/verify.js';
import type { PreparedItem } from './intake/prepare.js';
import { unpackedBlockedReason } from './policy/policy.js';
import type { PolicyPublisher } from './policy/publisher.js';
import type { Activation, InstalledEntry, Store } from './store.js';

export interface InstallerDeps {
  config: Config;
  metrics: Metrics;
  browser: Browser;
  store: Store;
  publisher: PolicyPublisher;
  /** An extension was activated (the telemetry's extension_installed). */
  onInstalled?(e: { name: string; id: string; version: string; activation: string; deferred: boolean }): void;
}

export interface InstallResult {
  extensions: { name: string; id: string; version: string; activation: Activation }[];
  chromium: { restarted: boolean; pid: number | null; ready_ms: number };
}

/** Why extensions cannot work with this state dir (Chromium's --load-extension splits paths at commas), else null. */
function unusableReason(installedDir: string): string | null {
  if (!installedDir.includes(',')) return null;
  return `the extensions folder ${installedDir} has a comma in its path, which Chromium's --load-extension cannot take (it separates paths with commas): set BROWSERD_AGENT_DIR to a path without commas`;
}

export class Installer {
  /** What the next Chromium launch applies: the committed set, plus an install in progress. */
  private effective = new Map<string, InstalledEntry>();
  /** Set when the state dir cannot hold extensions Chromium loads at launch: uploads are refused. */
  readonly unusable: string | null;
  readonly live: LiveDeps;
  readonly undo: UndoDeps;

  constructor(private readonly deps: InstallerDeps) {
    this.unusable = unusableReason(deps.store.installedDir);
    const hooks = deps.config.testHooks;
    this.live = {
      config: deps.config,
      browser: deps.browser,
      installedPath: (name) => deps.store.installedPath(name),
      expectation: (e, inRequest) => expectation(e, inRequest, hooks),
      forcedLiveFailure: (name) => hooks.failLiveActivation(name),
    };
    this.undo = { ...deps, live: this.live, effective: () => this.effective.values(), reset: () => this.reset() };
  }

  /** After store.open() and after every commit or undo. */
  reset(): void {
    this.effective = new Map(this.deps.store.committed);
  }

  effectiveSet(): InstalledEntry[] {
    return [...this.effective.values()];
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

  async install(items: PreparedItem[], log: Logger): Promise<InstallResult> {
    const { browser, store, publisher, config } = this.deps;
    const started = performance.now();
    await config.testHooks.holdActivation(store.root, items.map((i) => i.name), log);
    this.refuseIfUnusable();
    if (store.pendingTx !== null) {
      // An earlier install could not put its files back (see restoreFiles); the next start finishes that.
      const why = 'an earlier install could not be undone completely; restart browserd, which finishes undoing it from the state dir';
      throw new OperationFailedError('activation_failed', `extensions cannot be installed now: ${why}`, { code: 'recovery_needed', message: why });
    }
    // Inside the lock, a browser that is not ready is stopped, failed or waiting out a crash-restart
    // backoff (`restarting`: a launch is due, so it happens now, with the new set).
    const state = browser.snapshot().state;
    const deferred = state === 'stopped' || state === 'failed';
    const blocked = await unpackedBlockedReason(config.chromium.policyDir);
    const plans = await planItems(items, { store, publisher, blocked, up: state === 'ready' });
    checkIds(plans, store.committed, log);
    const twoLaunches = plans.find((p) => p.mode === 'policy' && p.replaced?.activation === 'policy');
    if (deferred && twoLaunches) {
      throw new BrowserUnavailableError(
        `Chromium is ${state}: replacing the policy install ${twoLaunches.entry.name} takes two Chromium launches, which an upload does not start; start Chromium first (POST /browsers/{id}/restart)`,
        { retryable: false },
      );
    }
    const policyTouched = plans.some((p) => p.mode === 'policy' || p.replaced?.activation === 'policy');
    log.info({ event: 'extension_activation_started', names: plans.map((p) => p.entry.name), modes: plans.map((p) => p.mode), policy_block: blocked, browser_state: state }, 'activating extensions');

    let touchedChromium = false;
    let restarted: RestartResult | null = null;
    let pid: number | null = null;
    const tx = await store.begin();
    try {
      await this.place(plans, tx);
      const reinstall = plans.filter((p) => p.mode === 'policy' && p.replaced?.activation === 'policy');
      if (reinstall.length > 0) {
        touchedChromium = true;
        await this.takeOutOfPolicy(reinstall.map((p) => p.entry));
      }
      if (policyTouched) await publisher.sync(this.effective.values());
      if (deferred) {
        log.info({ event: 'extension_activation_deferred', state, names: plans.map((p) => p.entry.name) }, `Chromium is ${state}: the extensions apply at its next launch`);
      } else {
        if (plans.every((p) => p.mode === 'live')) {
          touchedChromium = true;
          try {
            pid = await activateLive(this.live, plans, log);
          } catch (err) {
            if (err instanceof LoadRefused) throw err;
            log.warn({ event: 'extension_live_failed', reason: (err as Error).message }, 'live activation failed: restarting Chromium with the installed set');
            for (const p of plans) setMode(p, 'restart');
          }
        }
        if (plans.some((p) => p.mode !== 'live')) {
          touchedChromium = true;
          restarted = await browser.restartLocked(plans.some((p) => p.mode === 'policy') ? 'policy' : 'extensions');
          pid = restarted.pid;
          await this.verifyAfterRestart(plans);
        }
      }
      await store.commit(tx, plans.map((p) => p.entry));
      this.reset();
      if (policyTouched) await publisher.prune(this.effective.values());
    } catch (err) {
      this.count(plans, 'failed', performance.now() - started);
      if (err instanceof LoadRefused) throw await undoRefusal(this.undo, plans, err, tx, log);
      await rollback(this.undo, plans, tx, policyTouched, touchedChromium, log);
      throw activationFailed(err, touchedChromium, log);
    }
    const ms = Math.round(performance.now() - started);
    this.count(plans, 'ok', ms);
    for (const p of plans) {
      log.info({ event: 'extension_activated', name: p.entry.name, id: p.entry.id, version: p.entry.version, mode: p.mode, ms, deferred }, 'extension activated');
      this.deps.onInstalled?.({ name: p.entry.name, id: p.entry.id, version: p.entry.version, activation: p.mode, deferred });
    }
    return {
      extensions: plans.map((p) => ({ name: p.entry.name, id: p.entry.id, version: p.entry.version, activation: p.mode })),
      chromium: { restarted: restarted !== null, pid, ready_ms: restarted?.readyMs ?? 0 },
    };
  }

  /** Renames each checked tree into installed/<name> (the replaced one aside), packs the policy items. */
  private async place(plans: Plan[], tx: string): Promise<void> {
    const { store, publisher } = this.deps;
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
  }

  /**
   * Chromium updates a force-installed extension only on its own schedule (not at a restart) and
   * never to a lower version. A replacement is therefore taken out of the forcelist for one launch,
   * which uninstalls it, and comes back new with the next one (measured on Chromium 156).
   */
  private async takeOutOfPolicy(entries: InstalledEntry[]): Promise<void> {
    const { browser, publisher } = this.deps;
    const names = new Set(entries.map((e) => e.name));
    await publisher.sync([...this.effective.values()].filter((e) => !names.has(e.name)));
    await browser.restartLocked('policy');
    await withActivationCdp(this.deps, (cdp, deadline) => verifyGone(cdp, entries.map((e) => e.id), deadline, { policy: true }));
  }

  /**
   * configure's check after its restart: every extension it names is enabled in Chromium (listed by
   * Extensions.getExtensions; a policy install on chrome://policy). Not its service worker: an MV3
   * worker starts on an event (its install, a message), not at every launch of a profile that has
   * the extension already. Throws 422 activation_failed naming what does not run.
   */
  async verifyRunning(names: readonly string[]): Promise<void> {
    const named = new Set(names);
    try {
      await withActivationCdp(this.deps, async (cdp, deadline) => {
        const watch = await WorkerWatch.start(cdp, deadline);
        try {
          const expect = [...this.effective.values()].filter((e) => named.has(e.name)).map((e) => ({ ...this.live.expectation(e, true), worker: false }));
          await verifyInstalled(cdp, watch, expect, deadline);
        } finally {
          watch.stop();
        }
      });
    } catch (err) {
      if (err instanceof BrowserUnavailableError) throw err;
      const inner = { code: err instanceof VerifyError ? 'not_verified' : 'devtools_error', message: (err as Error).message };
      throw new OperationFailedError('activation_failed', `the extensions do not run after the restart: ${inner.message}`, inner);
    }
  }

  /** Every extension of the set runs; those of this request with a service worker show it. */
  private async verifyAfterRestart(plans: Plan[]): Promise<void> {
    const mine = new Set(plans.map((p) => p.entry.name));
    await withActivationCdp(this.deps, async (cdp, deadline) => {
      const watch = await WorkerWatch.start(cdp, deadline);
      try {
        await verifyInstalled(cdp, watch, [...this.effective.values()].map((e) => this.live.expectation(e, mine.has(e.name))), deadline);
      } finally {
        watch.stop();
      }
    });
  }

  private count(plans: Plan[], outcome: 'ok' | 'failed', ms: number): void {
    for (const p of plans) {
      this.deps.metrics.extensionActivations.inc({ mode: p.mode, outcome });
      this.deps.metrics.extensionActivationDuration.observe({ mode: p.mode }, ms / 1000);
    }
  }
}

function expectation(e: InstalledEntry, inRequest: boolean, hooks: TestHooks): Expectation {
  return {
    name: e.name,
    id: e.id,
    version: e.version,
    kind: e.activation === 'policy' ? 'policy' : 'unpacked',
    worker: inRequest && e.service_worker !== null,
    forcedFailure: inRequest && hooks.failActivation(e.name, `${e.name}@${e.version}`),
  };
}
