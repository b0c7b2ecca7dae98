// What activation asks Chromium, on a browser-level session of its own (Browser.withCdp): the
// Extensions domain, service worker targets seen as events (an MV3 worker starts ~10 ms after
// Extensions.loadUnpacked and may stop again after ~30 s idle, so a sighting is remembered; each is
// auto-attached for the verification to ask), and chrome://extensions (a tab of its own,
// cdp/attach.ts) for policy installs, which Extensions.getExtensions does not list.
import type { Protocol } from 'devtools-protocol';
import { openPage } from '../../cdp/attach.js';
import type { CdpClient } from '../../cdp/client.js';
import { CdpCallError } from '../../cdp/client.js';
import type { Deadline } from '../../core/deadline.js';

export { CdpCallError };

const WORKER_URL_RE = /^chrome-extension:\/\/([a-p]{32})\//;

/**
 * Extension ids whose service worker target has been seen, from the moment the watch began; waits
 * are event-driven. The watch also auto-attaches (flat, not waiting for the debugger) to every
 * service worker: a session made this way from the start does not hold a starting worker back,
 * unlike a Target.attachToTarget to a worker that is still starting (Chromium 156), so the
 * verification asks the worker there. Chromium attaches to no force-installed extension's worker.
 */
export class WorkerWatch {
  private readonly seen = new Set<string>();
  private readonly waiters = new Set<() => void>();
  private readonly offs: (() => void)[];
  /** Auto-attached worker sessions: sessionId → extension id and target id. */
  private readonly attached = new Map<string, { id: string; targetId: string }>();

  constructor(private readonly cdp: CdpClient) {
    const note = (t: Protocol.Target.TargetInfo): void => {
      const m = WORKER_URL_RE.exec(t.url);
      if (t.type !== 'service_worker' || m === null) return;
      this.seen.add(m[1] as string);
      for (const w of [...this.waiters]) w();
    };
    this.offs = [
      cdp.on('Target.targetCreated', (p) => note(p.targetInfo)),
      cdp.on('Target.targetInfoChanged', (p) => note(p.targetInfo)),
      cdp.on('Target.attachedToTarget', (p) => {
        const m = WORKER_URL_RE.exec(p.targetInfo.url);
        if (p.targetInfo.type !== 'service_worker' || m === null) return;
        this.attached.set(p.sessionId, { id: m[1] as string, targetId: p.targetInfo.targetId });
        note(p.targetInfo);
      }),
      cdp.on('Target.detachedFromTarget', (p) => void this.attached.delete(p.sessionId)),
    ];
  }

  /** Starts discovery and worker auto-attach on the session (its events then include every existing target). */
  static async start(cdp: CdpClient, deadline: Deadline): Promise<WorkerWatch> {
    const watch = new WorkerWatch(cdp);
    await cdp.send('Target.setDiscoverTargets', { discover: true }, { deadline });
    await cdp.send('Target.setAutoAttach', { autoAttach: true, waitForDebuggerOnStart: false, flatten: true, filter: [{ type: 'service_worker', exclude: false }] }, { deadline });
    return watch;
  }

  /** The auto-attached sessions of `id`'s workers (a replacement has the old one beside the new one). */
  sessions(id: string): { sessionId: string; targetId: string }[] {
    return [...this.attached].filter(([, a]) => a.id === id).map(([sessionId, a]) => ({ sessionId, targetId: a.targetId }));
  }

  has(id: string): boolean {
    return this.seen.has(id);
  }

  /** Resolves once every id's worker has been seen; rejects with the missing ids at the deadline. */
  waitFor(ids: string[], deadline: Deadline): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = (): boolean => {
        if (!ids.every((id) => this.seen.has(id))) return false;
        done();
        resolve();
        return true;
      };
      const onAbort = (): void => {
        done();
        reject(new Error(`no service worker started for ${ids.filter((id) => !this.seen.has(id)).join(', ')}`));
      };
      const done = (): void => {
        this.waiters.delete(waiter);
        deadline.signal.removeEventListener('abort', onAbort);
      };
      const waiter = (): void => void check();
      if (check()) return;
      if (deadline.expired) return onAbort();
      this.waiters.add(waiter);
      deadline.signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Ends auto-attach and detaches its sessions (not awaited: an old worker may not answer). */
  stop(): void {
    for (const off of this.offs) off();
    const quiet = { timeoutMs: 5000 };
    this.cdp.send('Target.setAutoAttach', { autoAttach: false, waitForDebuggerOnStart: false, flatten: true }, quiet).catch(() => undefined);
    for (const sessionId of this.attached.keys()) this.cdp.send('Target.detachFromTarget', { sessionId }, quiet).catch(() => undefined);
    this.attached.clear();
  }
}

/** Chromium's refusal (a bad manifest, reserved file names, ...) is a CdpCallError with `answered`. */
export async function loadUnpacked(cdp: CdpClient, absPath: string, deadline: Deadline): Promise<string> {
  return (await cdp.send('Extensions.loadUnpacked', { path: absPath }, { deadline })).id;
}

export async function listExtensions(cdp: CdpClient, deadline: Deadline): Promise<Protocol.Extensions.ExtensionInfo[]> {
  return (await cdp.send('Extensions.getExtensions', {}, { deadline })).extensions ?? [];
}

export async function uninstall(cdp: CdpClient, id: string, deadline: Deadline): Promise<void> {
  await cdp.send('Extensions.uninstall', { id }, { deadline });
}

export async function targets(cdp: CdpClient, deadline: Deadline): Promise<Protocol.Target.TargetInfo[]> {
  return (await cdp.send('Target.getTargets', {}, { deadline })).targetInfos;
}

export interface ExtensionsPage {
  /** id → version and state (ENABLED, DISABLED, TERMINATED, BLOCKLISTED) of every installed extension. */
  info(deadline: Deadline): Promise<Map<string, { version: string; state: string }>>;
  close(): Promise<void>;
}

/**
 * What Chromium's extensions page knows about every extension, policy installs included: opens
 * chrome://extensions in a background tab and reads chrome.developerPrivate.getExtensionsInfo()
 * there; close() ends it.
 */
export async function openExtensionsPage(cdp: CdpClient, deadline: Deadline): Promise<ExtensionsPage> {
  const page = await openPage(cdp, { url: 'chrome://extensions', background: true }, { deadline });
  const close = (): Promise<void> => page.close();
  try {
    const evaluate = async <T>(expression: string, d: Deadline): Promise<T> => {
      const r = await page.send('Runtime.evaluate', { expression, awaitPromise: true, returnByValue: true }, { deadline: d });
      if (r.exceptionDetails) throw new CdpCallError('Runtime.evaluate', r.exceptionDetails.text, true);
      return r.result.value as T;
    };
    while (!(await evaluate<boolean>("typeof chrome === 'object' && typeof chrome.developerPrivate === 'object'", deadline))) await deadline.sleep(20);
    return {
      info: async (d) => {
        const list = await evaluate<{ id: string; version: string; state: string }[]>(
          'chrome.developerPrivate.getExtensionsInfo({ includeDisabled: true, includeTerminated: true }).then((l) => l.map((e) => ({ id: e.id, version: e.version, state: e.state })))',
          d,
        );
        return new Map(list.map((e) => [e.id, { version: e.version, state: e.state }]));
      },
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
