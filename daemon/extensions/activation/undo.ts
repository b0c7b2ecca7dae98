// Undoing an install that did not complete: the files of every placed item back as they were, the
// policy file and the loopback server back in line with the set, and, when Chromium was touched,
// Chromium relaunched with the previous set. A refusal by Chromium is undone over CDP, without a
// restart. Every failure becomes the answer the client gets: 422 extension_rejected (a refusal),
// 422 activation_failed with the cause, or 503 when Chromium does not come up.
import type { Browser } from '../../chromium/types.js';
import { BrowserdError, BrowserUnavailableError, OperationFailedError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import type { PolicyPublisher } from '../policy/publisher.js';
import { Rejection, rejectedError } from '../intake/rejection.js';
import type { InstalledEntry, Store } from '../store.js';
import { CdpCallError } from './devtools.js';
import { undoLive, type LiveDeps, type LoadRefused } from './live.js';
import type { Plan } from './plan.js';
import { VerifyError } from './verify.js';

export interface UndoDeps {
  browser: Browser;
  store: Store;
  publisher: PolicyPublisher;
  live: LiveDeps;
  /** The set the next launch applies, after the files are back. */
  effective(): Iterable<InstalledEntry>;
  /** Resets the effective set to the committed one. */
  reset(): void;
}

/** The files of every placed item back as they were, the transaction ended. */
export async function restoreFiles(deps: UndoDeps, plans: Plan[], tx: string, log: Logger): Promise<void> {
  let restored = true;
  for (const p of [...plans].reverse()) {
    if (!p.placed) continue;
    try {
      await deps.store.restore(p.entry.name, p.aside);
      p.placed = false;
    } catch (err) {
      restored = false;
      log.error({ event: 'extension_rollback_error', name: p.entry.name, err }, 'could not restore the previous files');
    }
  }
  // Left pending when a restore failed: the next daemon start finishes it from previous/<tx>/.
  if (restored) await deps.store.abort(tx).catch((err: unknown) => log.error({ event: 'extension_rollback_error', err }, 'could not end the install'));
  deps.reset();
}

/**
 * Chromium refused an item: the request's files go, the items loaded before it are taken out
 * over CDP (a replaced one back to its previous version), no restart. Should that fail, Chromium
 * is relaunched with the previous set. The answer is the item's rejection.
 */
export async function undoRefusal(deps: UndoDeps, plans: Plan[], refusal: LoadRefused, tx: string, log: Logger): Promise<BrowserdError> {
  const bad = plans[refusal.index] as Plan;
  log.warn({ event: 'extension_rejected', name: bad.entry.name, cause: 'chromium_refused', reason: refusal.chromiumText }, 'Chromium refused to load the extension');
  await restoreFiles(deps, plans, tx, log);
  const loaded = plans.slice(0, refusal.index);
  const replaced = plans.flatMap((p) => (p.replaced === null ? [] : [p.replaced]));
  try {
    await undoLive(deps.live, loaded, replaced);
    log.info({ event: 'extension_rollback', names: loaded.map((p) => p.entry.name), how: 'cdp' }, 'the items loaded before the refusal were taken out again');
  } catch (err) {
    log.warn({ event: 'extension_rollback_error', reason: (err as Error).message }, 'could not take the loaded items out over CDP: relaunching Chromium with the previous set');
    await relaunch(deps.browser, log);
  }
  return rejectedError([{ label: bad.item.label, name: bad.entry.name, rejection: new Rejection('chromium_refused', `Chromium refused to load it: ${refusal.chromiumText}`) }]);
}

/** Everything of the install put back; Chromium relaunched with the previous set when it was touched. */
export async function rollback(deps: UndoDeps, plans: Plan[], tx: string, policyTouched: boolean, touchedChromium: boolean, log: Logger): Promise<void> {
  await restoreFiles(deps, plans, tx, log);
  if (policyTouched) {
    await deps.publisher.sync(deps.effective()).catch((err: unknown) => log.error({ event: 'extension_rollback_error', err }, 'could not restore the policy file'));
    await deps.publisher.prune(deps.effective()).catch(() => undefined);
  }
  if (touchedChromium) await relaunch(deps.browser, log);
}

async function relaunch(browser: Browser, log: Logger): Promise<void> {
  try {
    const r = await browser.restartLocked('extensions');
    log.info({ event: 'extension_rollback', chromium_pid: r.pid, ready_ms: r.readyMs, how: 'restart' }, 'Chromium relaunched with the previous extensions');
  } catch (err) {
    log.error({ event: 'extension_rollback_error', err }, 'Chromium did not come back with the previous extensions');
  }
}

/** The answer for an activation that failed (the previous state is back). */
export function activationFailed(err: unknown, relaunched: boolean, log: Logger): BrowserdError {
  if (err instanceof BrowserUnavailableError) {
    log.warn({ event: 'extension_activation_failed', cause: err.code, reason: err.message }, 'Chromium did not become ready; previous state restored');
    return err;
  }
  let inner: { code: string; message: string };
  if (err instanceof VerifyError) inner = { code: 'not_verified', message: err.message };
  else if (err instanceof CdpCallError) inner = { code: 'devtools_error', message: err.message };
  else if (err instanceof BrowserdError) inner = { code: err.code, message: err.message };
  else {
    log.error({ event: 'extension_activation_error', err }, 'extension activation failed');
    inner = { code: 'internal_error', message: 'the daemon log has the details under this request id' };
  }
  log.warn({ event: 'extension_activation_failed', cause: inner.code, reason: inner.message }, 'extension activation failed; previous state restored');
  const restored = relaunched ? 'the previous extensions are back and Chromium was relaunched with them' : 'the previous extensions are back';
  return new OperationFailedError('activation_failed', `the extensions could not be activated; ${restored}: ${inner.message}`, inner);
}
