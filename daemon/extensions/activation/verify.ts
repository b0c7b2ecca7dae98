// Verification that Chromium runs what the installed set says, until a deadline: an unpacked
// extension is listed by Extensions.getExtensions (enabled, with its version); a policy install,
// which getExtensions does not list, is read from chrome://extensions (enabled, with its version);
// an extension of the current request that has a service worker must also have shown its worker
// target and run its script. Presence is polled (from 5 ms, backing off); the worker is waited for as an event.
import { attachPage } from '../../cdp/attach.js';
import type { CdpClient } from '../../cdp/client.js';
import type { Deadline } from '../../core/deadline.js';
import { listExtensions, openExtensionsPage, targets, type ExtensionsPage, type WorkerWatch } from './devtools.js';

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

const POLL_MIN_MS = 5;
const POLL_MAX_MS = 100;
const nextPoll = (ms: number): number => Math.min(ms * 2, POLL_MAX_MS);

/** Runs `fn` with the chrome://extensions page open when some expectation needs it. */
async function withPage<T>(cdp: CdpClient, needed: boolean, deadline: Deadline, fn: (page: ExtensionsPage | null) => Promise<T>): Promise<T> {
  if (!needed) return fn(null);
  const page = await openExtensionsPage(cdp, deadline);
  try {
    return await fn(page);
  } finally {
    await page.close();
  }
}

function describe(pending: Iterable<Expectation>): string {
  return [...pending].map((e) => `${e.name} (${e.id} ${e.version}${e.worker ? ', service worker' : ''})`).join(', ');
}

export async function verifyInstalled(cdp: CdpClient, watch: WorkerWatch, expectations: Expectation[], deadline: Deadline): Promise<void> {
  const forced = expectations.find((e) => e.forcedFailure);
  if (forced) throw new VerifyError(`${forced.name} (${forced.id}) was not verified (forced by the test hook fail-activation)`);
  const absent = new Map(expectations.map((e) => [e.name, e]));
  await withPage(cdp, expectations.some((e) => e.kind === 'policy'), deadline, async (page) => {
    let poll = POLL_MIN_MS;
    while (absent.size > 0) {
      const listed = new Set((await listExtensions(cdp, deadline)).filter((x) => x.enabled).map((x) => `${x.id}@${x.version}`));
      const policy = page === null ? new Map<string, { version: string; state: string }>() : await page.info(deadline);
      for (const e of [...absent.values()]) {
        const p = policy.get(e.id);
        const present = e.kind === 'unpacked' ? listed.has(`${e.id}@${e.version}`) : p !== undefined && p.version === e.version && p.state === 'ENABLED';
        if (present) absent.delete(e.name);
      }
      if (absent.size === 0) break;
      if (deadline.left() <= poll) throw new VerifyError(`not running in Chromium in time: ${describe(absent.values())}`);
      await deadline.sleep(poll);
      poll = nextPoll(poll);
    }
  });
  const workers = expectations.filter((e) => e.worker);
  if (workers.length === 0) return;
  // A worker that started before the watch began is among the targets now.
  const running = new Set((await targets(cdp, deadline)).filter((t) => t.type === 'service_worker').map((t) => workerId(t.url)));
  const missing = workers.filter((e) => !watch.has(e.id) && !running.has(e.id));
  try {
    await watch.waitFor(missing.map((e) => e.id), deadline);
  } catch {
    throw new VerifyError(`not running in Chromium in time: ${describe(missing.filter((e) => !watch.has(e.id)))}`);
  }
  // Chromium allows no DevTools on a force-installed extension (Target.attachToTarget: "Not allowed"):
  // for policy installs, a started worker is as far as the daemon can see.
  for (const e of workers.filter((w) => w.kind === 'unpacked')) {
    const seen = await workerActivated(cdp, watch, e.id, e.version, deadline);
    if (seen !== true) throw new VerifyError(`the service worker of ${e.name} (${e.id} ${e.version}) did not run its script in time (last seen: ${seen})`);
  }
}

function workerId(url: string): string | undefined {
  return /^chrome-extension:\/\/([a-p]{32})\//.exec(url)?.[1];
}

/**
 * The worker's version is past `parsed` (installing, installed, activating, activated): its top-level
 * script has run, so the listeners it registers there (webRequest, runtime messages) are in place.
 * A target that appears is not yet that: a request made at once could slip past a listener not yet
 * added. A replacement has the old worker beside the new one for a while: the one of the expected
 * version must be past `parsed`. A worker that stopped meanwhile (idle) had run. Asked in the worker's
 * auto-attached session (awaiting its next state change), else over an attach of its own (unpacked
 * extensions only: Chromium refuses DevTools on force-installed ones).
 */
async function workerActivated(cdp: CdpClient, watch: WorkerWatch, id: string, version: string, deadline: Deadline): Promise<true | string> {
  let poll = POLL_MIN_MS;
  for (;;) {
    // A replacement has two workers for a while: the old one (on its way out) and the new one.
    const workers = (await targets(cdp, deadline)).filter((t) => t.type === 'service_worker' && workerId(t.url) === id);
    if (workers.length === 0) return true; // stopped again (idle): it had run
    const sessions = watch.sessions(id);
    const probes = sessions.map((s) => sessionState(cdp, s.sessionId, deadline));
    for (const t of workers) if (!sessions.some((s) => s.targetId === t.targetId)) probes.push(workerState(cdp, t.targetId, deadline));
    const seen = await firstRan(probes, version);
    if (seen === true) return true;
    if (deadline.left() <= poll) return seen.join(', ');
    await deadline.sleep(poll);
    poll = nextPoll(poll);
  }
}

/** Service worker states reached only after the top-level script ran (install follows evaluation). */
const RAN = new Set(['installing', 'installed', 'activating', 'activated']);

/** true as soon as one probe shows `version` past `parsed`; else what each probe saw. */
function firstRan(probes: Promise<WorkerState | string>[], version: string): Promise<true | string[]> {
  return new Promise((resolve, reject) => {
    const seen: string[] = [];
    for (const probe of probes) {
      probe.then((w) => {
        if (typeof w !== 'string' && w.version === version && RAN.has(w.state)) return resolve(true);
        seen.push(typeof w === 'string' ? w : `version ${w.version} ${w.state}`);
        if (seen.length === probes.length) resolve(seen);
      }, reject);
    }
  });
}

interface WorkerState {
  state: string;
  version: string;
}

/**
 * Time one probe of a worker may take. A worker on its way out (the old one of a replacement)
 * can take the attach and never answer Runtime.evaluate (seen on Chromium 156 under load).
 */
const PROBE_MS = 1000;

/** The worker's state and its extension's version, at once. */
const STATE_NOW = '({ state: self.serviceWorker ? self.serviceWorker.state : "activated", version: chrome.runtime.getManifest().version })';

/** The same once past `parsed`, or at its next change (for a session that does not hold the worker back). */
const STATE_NEXT = `new Promise((resolve) => {
  const sw = self.serviceWorker;
  const answer = () => resolve({ state: sw ? sw.state : 'activated', version: chrome.runtime.getManifest().version });
  if (!sw || sw.state !== 'parsed') answer();
  else sw.addEventListener('statechange', answer, { once: true });
})`;

/** Asks in an auto-attached session, bounded to PROBE_MS; what was seen, or why nothing (gone meanwhile, no answer). */
async function sessionState(cdp: CdpClient, sessionId: string, deadline: Deadline): Promise<WorkerState | string> {
  const probe = deadline.child(PROBE_MS, 'service worker probe');
  try {
    return await evaluateState(cdp, sessionId, STATE_NEXT, probe);
  } catch (err) {
    if (deadline.expired) throw err;
    return `no answer: ${(err as Error).message}`;
  } finally {
    probe.dispose();
  }
}

/** The same over an attach of its own (a worker without an auto-attached session), detached after. */
async function workerState(cdp: CdpClient, targetId: string, deadline: Deadline): Promise<WorkerState | string> {
  const probe = deadline.child(PROBE_MS, 'service worker probe');
  try {
    const worker = await attachPage(cdp, targetId, { deadline: probe });
    try {
      // Not awaiting a change: this attach may hold a starting worker back until it detaches.
      return await evaluateState(cdp, worker.sessionId, STATE_NOW, probe);
    } finally {
      // Not awaited: a worker that did not answer the probe may not answer this either.
      worker.detach();
    }
  } catch (err) {
    if (deadline.expired) throw err;
    return `no answer: ${(err as Error).message}`;
  } finally {
    probe.dispose();
  }
}

async function evaluateState(cdp: CdpClient, sessionId: string, expression: string, probe: Deadline): Promise<WorkerState | string> {
  const r = await cdp.send('Runtime.evaluate', { expression, awaitPromise: true, returnByValue: true }, { sessionId, deadline: probe });
  if (r.exceptionDetails) return `threw: ${r.exceptionDetails.exception?.description ?? r.exceptionDetails.text}`;
  return r.result.value as WorkerState;
}

/**
 * Waits until none of `ids` is installed (Extensions.getExtensions, or chrome://extensions with
 * `policy`) or shows a worker target; closes leftover worker targets once.
 */
export async function verifyGone(cdp: CdpClient, ids: string[], deadline: Deadline, opts: { policy?: boolean } = {}): Promise<void> {
  await withPage(cdp, opts.policy === true, deadline, async (page) => {
    let closed = false;
    let poll = POLL_MIN_MS;
    for (;;) {
      const listed = new Set((await listExtensions(cdp, deadline)).map((x) => x.id));
      if (page !== null) for (const id of (await page.info(deadline)).keys()) listed.add(id);
      const all = await targets(cdp, deadline);
      const ofIds = all.filter((t) => ids.some((id) => t.url.startsWith(`chrome-extension://${id}/`)));
      const still = ids.filter((id) => listed.has(id) || ofIds.some((t) => t.type === 'service_worker' && t.url.startsWith(`chrome-extension://${id}/`)));
      if (still.length === 0) return;
      if (!closed) {
        closed = true;
        for (const t of ofIds) await cdp.send('Target.closeTarget', { targetId: t.targetId }, { deadline }).catch(() => undefined);
      }
      if (deadline.left() <= poll) throw new VerifyError(`still present in Chromium: ${still.join(', ')}`);
      await deadline.sleep(poll);
      poll = nextPoll(poll);
    }
  });
}
