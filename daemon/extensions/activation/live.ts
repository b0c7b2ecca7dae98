// Live activation over CDP, in the running Chromium: Extensions.loadUnpacked for each item,
// then verification. A refusal by Chromium (an error answer of loadUnpacked) is told apart from
// a timeout or a lost connection: it rejects the item (LoadRefused), and undoLive() takes the
// items of the request that were already loaded back out, without a restart.
import type { Config } from '../../core/config.js';
import type { Logger } from '../../core/log.js';
import type { Browser } from '../../chromium/types.js';
import { CdpClient, CdpError } from './cdp.js';
import type { InstalledEntry } from '../store.js';
import { verifyGone, verifyInstalled, type Expectation } from './verify.js';

export const CONNECT_TIMEOUT_MS = 5000;

/** One item of an install, as live activation sees it. */
export interface LiveItem {
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

async function connect(deps: LiveDeps): Promise<{ cdp: CdpClient; pid: number; deadline: number }> {
  const ep = await deps.browser.waitReady(deps.config.chromium.readyTimeoutMs);
  const deadline = Date.now() + deps.config.extensions.activationTimeoutMs;
  const cdp = await CdpClient.connect(ep.browserWsUrl, CONNECT_TIMEOUT_MS);
  return { cdp, pid: ep.pid, deadline };
}

/**
 * Loads every item with Extensions.loadUnpacked and verifies them; returns the Chromium pid.
 * Throws LoadRefused when Chromium refuses an item, any other error when an answer is missing
 * or the verification fails.
 */
export async function activateLive(deps: LiveDeps, items: LiveItem[], log: Logger): Promise<number> {
  const { cdp, pid, deadline } = await connect(deps);
  try {
    await cdp.watchWorkers(CONNECT_TIMEOUT_MS);
    for (const [index, it] of items.entries()) {
      if (deps.forcedLiveFailure(it.entry.name)) throw new Error('live activation refused by the test hook fail-live-activation');
      let id: string;
      try {
        id = await cdp.loadUnpacked(deps.installedPath(it.entry.name), Math.max(1, deadline - Date.now()));
      } catch (err) {
        if (err instanceof CdpError && err.answered) throw new LoadRefused(index, err.text);
        throw err;
      }
      if (id !== it.entry.id) {
        log.warn({ event: 'extension_id_differs', name: it.entry.name, expected: it.entry.id, id }, 'Chromium gave the extension another id than expected');
        it.entry.id = id;
      }
    }
    await verifyInstalled(cdp, items.map((it) => deps.expectation(it.entry, true)), deadline);
    return pid;
  } finally {
    cdp.close();
  }
}

/**
 * Undoes the items that activateLive() loaded before a refusal; their files are already back
 * (a replaced version in installed/<name>, a new one gone). A new name is uninstalled; a replaced
 * one is loaded again from its path, which brings the previous version back under its id. Then
 * verified: the new ids are gone, every replaced version (the refused item's too) runs.
 */
export async function undoLive(deps: LiveDeps, loaded: LiveItem[], replaced: InstalledEntry[]): Promise<void> {
  const { cdp, deadline } = await connect(deps);
  const left = (): number => Math.max(1, deadline - Date.now());
  try {
    const gone: string[] = [];
    for (const it of [...loaded].reverse()) {
      if (it.replaced === null || it.replaced.id !== it.entry.id) {
        await cdp.uninstall(it.entry.id, left());
        gone.push(it.entry.id);
      }
      if (it.replaced !== null) await cdp.loadUnpacked(deps.installedPath(it.replaced.name), left());
    }
    await verifyGone(cdp, gone, deadline);
    await verifyInstalled(cdp, replaced.map((e) => deps.expectation(e, false)), deadline);
  } finally {
    cdp.close();
  }
}

/**
 * Extensions.uninstall. Chromium refuses it for an extension loaded by --load-extension ("not an
 * unpacked extension"); loading the same path again over CDP turns it into an unpacked one,
 * which uninstall then removes (measured on Chromium 156).
 */
export async function unloadUnpacked(cdp: CdpClient, entry: InstalledEntry, installedPath: string, deadline: number): Promise<void> {
  const left = (): number => Math.max(1, deadline - Date.now());
  if (!(await cdp.getExtensions(left())).some((x) => x.id === entry.id)) return; // not loaded: nothing to unload
  try {
    await cdp.uninstall(entry.id, left());
  } catch (err) {
    if (!(err instanceof CdpError)) throw err;
    await cdp.loadUnpacked(installedPath, left());
    await cdp.uninstall(entry.id, left());
  }
}
