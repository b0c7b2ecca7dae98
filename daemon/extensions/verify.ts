// Verification that Chromium runs what the installed set says, polled until a deadline:
// an unpacked extension is listed by Extensions.getExtensions (enabled); a policy install, which
// getExtensions does not list, has its service worker target or opens its manifest page; an
// extension of the current request that has a service worker must also show that worker target.
import type { CdpClient } from './cdp.js';

export interface Expectation {
  name: string;
  id: string;
  /** For unpacked ones, Extensions.getExtensions must list this version (a replacement took). */
  version: string;
  kind: 'unpacked' | 'policy';
  /** Require the service worker target (extensions of the current request that have one). */
  worker: boolean;
  /** Test hook: this one never verifies. */
  forcedFailure?: boolean;
}

export class VerifyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'VerifyError';
  }
}

const POLL_MS = 100;
/** A probe opens a page: not more often than this. */
const PROBE_EVERY_MS = 500;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function hasWorker(targets: { type: string; url: string }[], id: string): boolean {
  return targets.some((t) => t.type === 'service_worker' && t.url.startsWith(`chrome-extension://${id}/`));
}

/** Seen running: now, or at any time since the client started watching (see CdpClient.watchWorkers). */
function workerSeen(cdp: CdpClient, targets: { type: string; url: string }[], id: string): boolean {
  return hasWorker(targets, id) || cdp.workersSeen.has(id);
}

export async function verifyInstalled(cdp: CdpClient, expectations: Expectation[], deadline: number): Promise<void> {
  const pending = new Map(expectations.map((e) => [e.name, e]));
  const forced = expectations.find((e) => e.forcedFailure);
  if (forced) throw new VerifyError(`${forced.name} (${forced.id}) was not verified (forced by the test hook fail-activation)`);
  let nextProbe = 0;
  for (;;) {
    const left = (): number => Math.max(1, deadline - Date.now());
    const listed = new Set((await cdp.getExtensions(left())).filter((x) => x.enabled).map((x) => `${x.id}@${x.version}`));
    const targets = await cdp.getTargets(left());
    const probeNow = Date.now() >= nextProbe;
    if (probeNow) nextProbe = Date.now() + PROBE_EVERY_MS;
    for (const e of [...pending.values()]) {
      let ok: boolean;
      const isListed = listed.has(`${e.id}@${e.version}`);
      if (e.worker) ok = workerSeen(cdp, targets, e.id) && (e.kind === 'policy' || isListed);
      else if (e.kind === 'unpacked') ok = isListed;
      else ok = workerSeen(cdp, targets, e.id) || (probeNow && (await cdp.probeInstalled(e.id, left())));
      if (ok) pending.delete(e.name);
    }
    if (pending.size === 0) return;
    if (Date.now() + POLL_MS >= deadline) {
      const names = [...pending.values()].map((e) => `${e.name} (${e.id}${e.worker ? ', service worker' : ''})`);
      throw new VerifyError(`not running in Chromium in time: ${names.join(', ')}`);
    }
    await sleep(POLL_MS);
  }
}

/** Waits until none of `ids` is listed or has a worker target; closes leftover worker targets once. */
export async function verifyGone(cdp: CdpClient, ids: string[], deadline: number): Promise<void> {
  let closed = false;
  for (;;) {
    const left = (): number => Math.max(1, deadline - Date.now());
    const listed = new Set((await cdp.getExtensions(left())).map((x) => x.id));
    const targets = await cdp.getTargets(left());
    const still = ids.filter((id) => listed.has(id) || hasWorker(targets, id));
    if (still.length === 0) return;
    if (!closed) {
      closed = true;
      for (const t of targets) {
        if (ids.some((id) => t.url.startsWith(`chrome-extension://${id}/`))) await cdp.closeTarget(t.targetId, left()).catch(() => undefined);
      }
    }
    if (Date.now() + POLL_MS >= deadline) throw new VerifyError(`still present in Chromium: ${still.join(', ')}`);
    await sleep(POLL_MS);
  }
}
