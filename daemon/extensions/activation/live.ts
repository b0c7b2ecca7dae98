// Live activation over CDP, in the running Chromium: Extensions.loadUnpacked for each item, then
// verification. A refusal by Chromium (an error answer of loadUnpacked) is told apart from a
// timeout or a lost connection: it rejects the item (LoadRefused), and undoLive() takes the items
// of the request that were already loaded back out, without a restart.
import type { Logger } from '../../core/log.js';
import type { Config } from '../../core/config.js';
import { Deadline } from '../../core/deadline.js';
import type { Browser } from '../../chromium/types.js';
import type { CdpClient } from '../../cdp/client.js';
import type { InstalledEntry } from '../store.js';
import { CdpCallError, listExtensions, loadUnpacked, uninstall, WorkerWatch } from './devtools.js';
import { verifyGone, verifyInstalled, type Expectation } from './verify.js';

/** One item of an install, as live activation sees it. */
interface LiveItem {
  entry: InstalledEntry;
  /** The installed version of the same name that this item replaces, else null. */
  replaced: InstalledEntry | null;
}

export interface LiveDeps {
  config: Config;
  browser: Browser;
  installedPath(name: string): string;
  expectation(e: InstalledEntry, inRequest: boolean): Expectation;
  /** Test hook fail-live-activation: this item fails as if it timed out (the restart path). */
  forcedLiveFailure(name: string): boolean;
}

/** Chromium answered Extensions.loadUnpacked for `items[index]` with an error: a rejection. */
export class LoadRefused extends Error {
  constructor(
    /** The refused item; those before it are loaded. */
    readonly index: number,
    /** Chromium's text. */
    readonly chromiumText: string,
  ) {
    super(`Chromium refused to load the extension: ${chromiumText}`);
    this.name = 'LoadRefused';
  }
}

/** Runs `fn` on a CDP session of the ready Chromium, under the activation's deadline (BROWSERD_EXTENSION_ACTIVATION_TIMEOUT_MS). */
export function withActivationCdp<T>(deps: { config: Config; browser: Browser }, fn: (cdp: CdpClient, deadline: Deadline, pid: number) => Promise<T>): Promise<T> {
  const deadline = Deadline.in(deps.config.extensions.activationTimeoutMs, 'extension activation');
  return deps.browser.withCdp((cdp, pid) => fn(cdp, deadline, pid), deadline).finally(() => deadline.dispose());
}

/**
 * Loads every item with Extensions.loadUnpacked and verifies them; returns the Chromium pid.
 * Throws LoadRefused when Chromium refuses an item, any other error when an answer is missing
 * or the verification fails.
 */
export function activateLive(deps: LiveDeps, items: LiveItem[], log: Logger): Promise<number> {
  return withActivationCdp(deps, async (cdp, deadline, pid) => {
    const watch = await WorkerWatch.start(cdp, deadline);
    try {
      for (const [index, it] of items.entries()) {
        if (deps.forcedLiveFailure(it.entry.name)) throw new Error('live activation refused by the test hook fail-live-activation');
        let id: string;
        try {
          id = await loadUnpacked(cdp, deps.installedPath(it.entry.name), deadline);
        } catch (err) {
          if (err instanceof CdpCallError && err.answered) throw new LoadRefused(index, err.text);
          throw err;
        }
        if (id !== it.entry.id) {
          log.warn({ event: 'extension_id_differs', name: it.entry.name, expected: it.entry.id, id }, 'Chromium gave the extension another id than expected');
          it.entry.id = id;
        }
      }
      await verifyInstalled(cdp, watch, items.map((it) => deps.expectation(it.entry, true)), deadline);
      return pid;
    } finally {
      watch.stop();
    }
  });
}

/**
 * Undoes the items that activateLive() loaded before a refusal; their files are already back
 * (a replaced version in installed/<name>, a new one gone). A new name is uninstalled; a replaced
 * one is loaded again from its path, which brings the previous version back under its id. Then
 * verified: the new ids are gone, every replaced version (the refused item's too) runs.
 */
export function undoLive(deps: LiveDeps, loaded: LiveItem[], replaced: InstalledEntry[]): Promise<void> {
  return withActivationCdp(deps, async (cdp, deadline) => {
    const watch = await WorkerWatch.start(cdp, deadline);
    try {
      const gone: string[] = [];
      for (const it of [...loaded].reverse()) {
        if (it.replaced === null || it.replaced.id !== it.entry.id) {
          await uninstall(cdp, it.entry.id, deadline);
          gone.push(it.entry.id);
        }
        if (it.replaced !== null) await loadUnpacked(cdp, deps.installedPath(it.replaced.name), deadline);
      }
      await verifyGone(cdp, gone, deadline);
      await verifyInstalled(cdp, watch, replaced.map((e) => deps.expectation(e, false)), deadline);
    } finally {
      watch.stop();
    }
  });
}

/**
 * Extensions.uninstall. Chromium refuses it for an extension loaded by --load-extension ("not an
 * unpacked extension"); loading the same path again over CDP turns it into an unpacked one,
 * which uninstall then removes (measured on Chromium 156).
 */
export async function unloadUnpacked(cdp: CdpClient, entry: InstalledEntry, installedPath: string, deadline: Deadline): Promise<void> {
  if (!(await listExtensions(cdp, deadline)).some((x) => x.id === entry.id)) return; // not loaded: nothing to unload
  try {
    await uninstall(cdp, entry.id, deadline);
  } catch (err) {
    if (!(err instanceof CdpCallError)) throw err;
    await loadUnpacked(cdp, installedPath, deadline);
    await uninstall(cdp, entry.id, deadline);
  }
}
