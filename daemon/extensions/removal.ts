// Removing an installed extension, while the caller holds the lifecycle lock: out of the set
// first (durably), then out of Chromium — an unpacked one with Extensions.uninstall (verified gone;
// a restart when that is not clean), a policy one by rewriting the forcelist and restarting. The
// signing key of the name is kept, so a later upload under the same name gets the same policy id.
import { NotFoundError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { withActivationCdp } from './activation/live.js';
import { unloadUnpacked } from './activation/live.js';
import { verifyGone } from './activation/verify.js';
import type { Installer, InstallerDeps } from './installer.js';

export async function removeExtension(deps: InstallerDeps, installer: Installer, name: string, log: Logger): Promise<void> {
  const { store, publisher, browser } = deps;
  const entry = store.committed.get(name);
  if (!entry) throw new NotFoundError(`no extension named ${name}`);
  store.committed.delete(name);
  await store.save();
  installer.reset();
  const up = browser.snapshot().state === 'ready'; // else the next launch simply leaves it out
  let how = 'not running';
  if (entry.activation === 'policy') {
    await publisher.sync(installer.effectiveSet());
    if (up) {
      // Out of the forcelist, Chromium uninstalls it at the next launch.
      await browser.restartLocked('policy');
      how = 'restart';
      await withActivationCdp(deps, (cdp, deadline) => verifyGone(cdp, [entry.id], deadline, { policy: true })).catch((err: unknown) => {
        log.warn({ event: 'extension_uninstall_failed', name, reason: (err as Error).message }, 'the policy install is still present after the restart');
      });
    }
  } else if (up) {
    try {
      await withActivationCdp(deps, async (cdp, deadline) => {
        await unloadUnpacked(cdp, entry, store.installedPath(name), deadline);
        await verifyGone(cdp, [entry.id], deadline);
      });
      how = 'uninstall';
    } catch (err) {
      log.warn({ event: 'extension_uninstall_failed', name, reason: (err as Error).message }, 'Extensions.uninstall did not remove it cleanly: restarting Chromium');
      await browser.restartLocked('extensions');
      how = 'restart';
    }
  }
  await store.removeInstalled(name);
  await publisher.prune(installer.effectiveSet());
  log.info({ event: 'extension_removed', name, id: entry.id, mode: entry.activation, unloaded_by: how }, 'extension removed');
}
