// The browser's configuration through the API: the viewport (live, no restart), managed policies
// and flags (one restart each), and configure (all of them, and a start URL, with one restart).
// Every change is checked whole before anything changes; then, under the lifecycle lock, written
// to the settings store (it survives daemon restarts) and applied. A restart that fails with the new
// settings puts the previous ones back (store, policy file) and restarts with them.
import { readFile } from 'node:fs/promises';
import { settingsError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import { viewportProblems, type Viewport } from '../../core/viewport.js';
import type { CdpClient } from '../../cdp/client.js';
import type { LaunchSettings, RestartResult, StagedConfigure } from '../types.js';
import { checkApiFlags, MAX_API_FLAGS, mergeFlags } from './api-flags.js';
import { checkPolicies, mergePolicies, policyLimitProblems, POLICIES_FILE, writePolicyFile } from './policies.js';
import type { BrowserSettings, SettingsStore } from './store.js';
import { applyViewport } from './viewport.js';

export interface ConfiguratorDeps {
  store: SettingsStore;
  headless: boolean;
  defaultViewport: Viewport;
  policyDir: string;
  log: Logger;
  withLock<T>(name: string, fn: () => Promise<T>, opts?: { wait?: boolean; signal?: AbortSignal }): Promise<T>;
  restartLocked(reason: string): Promise<RestartResult>;
  /** The browser module's own session of the ready run; null when not ready. */
  runCdp(): CdpClient | null;
  /** The current Chromium's pid (null while none runs). */
  pid(): number | null;
}

/** A whole change: what each field leaves unchanged when absent. */
export interface SettingsChange {
  viewport?: Viewport;
  /** Merged: null removes a policy. */
  policies?: Record<string, unknown>;
  /** Merged by name. */
  flags?: string[];
  removeFlags?: string[];
  /** The page the restart opens (this restart only). */
  startUrl?: string;
}

export interface ApplyOutcome {
  restarted: boolean;
  /** The Chromium that has the settings (the new one after a restart), null while none runs. */
  pid: number | null;
  /** ms from spawn until ready, when it restarted. */
  ready_ms: number | null;
  /** true when the viewport changed in the running Chromium (no restart). */
  live: boolean;
}

export class Configurator {
  private startUrl: string | null = null;

  constructor(private readonly deps: ConfiguratorDeps) {}

  get settings(): BrowserSettings {
    return this.deps.store.get();
  }

  viewport(): Viewport {
    return this.settings.viewport ?? this.deps.defaultViewport;
  }

  /** What the next launch adds (supervisor's launch extras). */
  launchSettings(): LaunchSettings {
    return { viewport: this.viewport(), flags: this.settings.flags, startUrl: this.startUrl };
  }

  /**
   * At daemon start: the policy folder holds exactly the store's policies. The daemon's file is
   * written as the store has it (it may have been removed meanwhile), or removed when the store has
   * none: a file an earlier run left (a store reset, another state dir) would otherwise stay in force
   * while GET …/chromium/policies answers {}.
   */
  async restore(): Promise<void> {
    const policies = this.settings.policies;
    const file = `${this.deps.policyDir}/${POLICIES_FILE}`;
    let found: string | null = null;
    try {
      found = await readFile(file, 'utf8');
    } catch {
      // none (or unreadable: written over below)
    }
    const want = Object.keys(policies).length === 0 ? null : `${JSON.stringify(policies, null, 2)}\n`;
    if (found === want) return;
    try {
      await writePolicyFile(this.deps.policyDir, policies);
      if (found !== null) this.deps.log.warn({ event: 'browser_policies_stale', file, action: want === null ? 'removed' : 'rewritten' }, "the policy folder held a policy file the daemon's settings do not have (an earlier run's): made to match them");
    } catch (err) {
      this.deps.log.error({ event: 'browser_policies_restore_failed', dir: this.deps.policyDir, err }, 'the daemon\'s policy file could not be written');
    }
  }

  /** Every problem of a change, as one error (nothing changed); returns the settings after it. */
  check(change: SettingsChange, extraInvalid: string[] = [], extraRefused: string[] = [], missing: string[] = []): BrowserSettings {
    const invalid = [...extraInvalid];
    const refused = [...extraRefused];
    const cur = this.settings;
    let next: BrowserSettings = cur;
    if (change.viewport !== undefined) {
      invalid.push(...viewportProblems(change.viewport).map((p) => `viewport: ${p}`));
      next = { ...next, viewport: change.viewport };
    }
    if (change.policies !== undefined) {
      const p = checkPolicies(change.policies);
      invalid.push(...p.invalid);
      refused.push(...p.refused);
      const merged = mergePolicies(cur.policies, change.policies);
      invalid.push(...policyLimitProblems(merged));
      next = { ...next, policies: merged };
    }
    if (change.flags !== undefined || change.removeFlags !== undefined) {
      invalid.push(...checkApiFlags(change.flags ?? []));
      const merged = mergeFlags(cur.flags, change.flags ?? [], change.removeFlags ?? []);
      if (merged.length > MAX_API_FLAGS) invalid.push(`flags: at most ${MAX_API_FLAGS} flags set through the API (this would make ${merged.length})`);
      next = { ...next, flags: merged };
    }
    if (invalid.length > 0 || refused.length > 0 || missing.length > 0) throw settingsError(invalid, refused, missing);
    return next;
  }

  /**
   * Applies a checked change under the lifecycle lock: a viewport alone changes live (no restart);
   * policies, flags, a start URL or a staged part (configure's extensions, profile) restart Chromium
   * once. `restart` forces the restart. Parts are staged before anything else changes, verified once
   * Chromium is ready, and undone with everything else when the restart or a verification fails.
   */
  async apply(
    change: SettingsChange,
    opts: { wait: boolean; signal: AbortSignal; log: Logger; restart?: boolean; parts?: readonly (() => Promise<StagedConfigure>)[] },
  ): Promise<ApplyOutcome> {
    this.check(change);
    const parts = opts.parts ?? [];
    return this.deps.withLock(
      'configure',
      async () => {
        const prev = this.settings;
        const next = this.check(change); // again under the lock: another change may have landed meanwhile
        const policiesChanged = JSON.stringify(prev.policies) !== JSON.stringify(next.policies);
        const flagsChanged = JSON.stringify(prev.flags) !== JSON.stringify(next.flags);
        const restart = opts.restart === true || policiesChanged || flagsChanged || change.startUrl !== undefined || parts.length > 0;
        const staged: StagedConfigure[] = [];
        try {
          for (const stage of parts) staged.push(await stage());
        } catch (err) {
          for (const s of staged.reverse()) await s.undo().catch((e: unknown) => opts.log.error({ event: 'browser_configure_undo_failed', err: e }, 'a staged part could not be undone'));
          throw err;
        }
        await this.deps.store.set(next);
        if (policiesChanged) await this.writePolicies(next.policies, prev);
        opts.log.info({ event: 'browser_configured', viewport: next.viewport, policies: Object.keys(next.policies), flags: next.flags, parts: parts.length, restart }, 'browser settings changed');
        if (!restart) {
          const live = await this.applyLive(opts.log);
          return { restarted: false, pid: this.deps.pid(), ready_ms: null, live };
        }
        this.startUrl = change.startUrl ?? null;
        try {
          const r = await this.deps.restartLocked('configure');
          for (const s of staged) await s.verify();
          for (const s of staged) await s.commit();
          return { restarted: true, pid: r.pid, ready_ms: r.readyMs, live: false };
        } catch (err) {
          opts.log.warn({ event: 'browser_configure_rolled_back', err }, 'Chromium did not start with the new settings: the previous ones are put back');
          await this.deps.store.set(prev);
          if (policiesChanged) await this.writePolicies(prev.policies, prev);
          for (const s of [...staged].reverse()) await s.undo().catch((e: unknown) => opts.log.error({ event: 'browser_configure_undo_failed', err: e }, 'a staged part could not be undone'));
          this.startUrl = null;
          await this.deps.restartLocked('configure_rollback').catch(() => undefined);
          throw err;
        } finally {
          this.startUrl = null;
        }
      },
      { wait: opts.wait, signal: opts.signal },
    );
  }

  /** The viewport in the running Chromium, when it is ready; false when it is not (the next launch has it). */
  private async applyLive(log: Logger): Promise<boolean> {
    const cdp = this.deps.runCdp();
    if (cdp === null) return false;
    await applyViewport(cdp, this.viewport(), this.deps.headless);
    log.info({ event: 'viewport_applied', viewport: this.viewport() }, 'viewport changed live');
    return true;
  }

  private async writePolicies(set: Record<string, unknown>, prev: BrowserSettings): Promise<void> {
    try {
      await writePolicyFile(this.deps.policyDir, set);
    } catch (err) {
      await this.deps.store.set(prev);
      throw err;
    }
  }

  /** The daemon's own policy file (for GET). */
  policyFile(): string {
    return `${this.deps.policyDir}/${POLICIES_FILE}`;
  }
}
