// Verification that Chromium runs what the installed set says, polled until a deadline:
// an unpacked extension is listed by Extensions.getExtensions (enabled, with its version); a policy
// install, which getExtensions does not list, is read from chrome://extensions
// (developerPrivate.getExtensionsInfo: enabled, with its version); an extension of the current
// request that has a service worker must also have shown its service worker target.
import type { CdpClient, ExtensionsPage } from './cdp.js';

export interface Expectation {
  name: string;
  id: string;
  /** The version Chromium must report (a replacement took). */
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

/** Polls start fast (a worker appears ~10 ms after loadUnpacked) and back off to POLL_MAX_MS. */
const POLL_MIN_MS = 5;
const POLL_MAX_MS = 100;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const nextPoll = (ms: number): number => Math.min(ms * 2, POLL_MAX_MS);

function hasWorker(targets: { type: string; url: string }[], id: string): boolean {
  return targets.some((t) => t.type === 'service_worker' && t.url.startsWith(`chrome-extension://${id}/`));
}

/** Seen running: now, or at any time since the client started watching (see CdpClient.watchWorkers). */
function workerSeen(cdp: CdpClient, targets: { type: string; url: string }[], id: string): boolean {
  return hasWorker(targets, id) || cdp.workersSeen.has(id);
}

/** Runs `fn` with the chrome://extensions page open when some expectation needs it. */
async function withPage<T>(cdp: CdpClient, needed: boolean, deadline: number, fn: (page: ExtensionsPage | null) => Promise<T>): Promise<T> {
  if (!needed) return fn(null);
  const page = await cdp.openExtensionsPage(Math.max(1, deadline - Date.now()));
  try {
    return await fn(page);
  } finally {
    await page.close();
  }
}

export async function verifyInstalled(cdp: CdpClient, expectations: Expectation[], deadline: number): Promise<void> {
  const forced = expectations.find((e) => e.forcedFailure);
  if (forced) throw new VerifyError(`${forced.name} (${forced.id}) was not verified (forced by the test hook fail-activation)`);
  const pending = new Map(expectations.map((e) => [e.name, e]));
  await withPage(cdp, expectations.some((e) => e.kind === 'policy'), deadline, async (page) => {
    let poll = POLL_MIN_MS;
    for (;;) {
      const left = (): number => Math.max(1, deadline - Date.now());
      const listed = new Set((await cdp.getExtensions(left())).filter((x) => x.enabled).map((x) => `${x.id}@${x.version}`));
      const targets = await cdp.getTargets(left());
      const policy = page === null ? new Map<string, { version: string; state: string }>() : await page.info(left());
      for (const e of [...pending.values()]) {
        const p = policy.get(e.id);
        const present = e.kind === 'unpacked' ? listed.has(`${e.id}@${e.version}`) : p !== undefined && p.version === e.version && p.state === 'ENABLED';
        if (present && (!e.worker || workerSeen(cdp, targets, e.id))) pending.delete(e.name);
      }
      if (pending.size === 0) return;
      if (Date.now() + poll >= deadline) {
        const names = [...pending.values()].map((e) => `${e.name} (${e.id} ${e.version}${e.worker ? ', service worker' : ''})`);
        throw new VerifyError(`not running in Chromium in time: ${names.join(', ')}`);
      }
      await sleep(poll);
      poll = nextPoll(poll);
    }
  });
}

/**
 * Waits until none of `ids` is installed (Extensions.getExtensions, or chrome://extensions with
 * `policy`) or shows a worker target; closes leftover worker targets once.
 */
export async function verifyGone(cdp: CdpClient, ids: string[], deadline: number, opts: { policy?: boolean } = {}): Promise<void> {
  await withPage(cdp, opts.policy === true, deadline, async (page) => {
    let closed = false;
    let poll = POLL_MIN_MS;
    for (;;) {
      const left = (): number => Math.max(1, deadline - Date.now());
      const listed = new Set((await cdp.getExtensions(left())).map((x) => x.id));
      if (page !== null) for (const id of (await page.info(left())).keys()) listed.add(id);
      const targets = await cdp.getTargets(left());
      const still = ids.filter((id) => listed.has(id) || hasWorker(targets, id));
      if (still.length === 0) return;
      if (!closed) {
        closed = true;
        for (const t of targets) {
          if (ids.some((id) => t.url.startsWith(`chrome-extension://${id}/`))) await cdp.closeTarget(t.targetId, left()).catch(() => undefined);
        }
      }
      if (Date.now() + poll >= deadline) throw new VerifyError(`still present in Chromium: ${still.join(', ')}`);
      await sleep(poll);
      poll = nextPoll(poll);
    }
  });
}
