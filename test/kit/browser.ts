// The daemon's browser from outside: its snapshot (GET /browsers/local) and waiting for a state of
// it, and CDP through the daemon's authenticated proxy on the daemon's own client
// (daemon/cdp/client.ts) with the bearer token; a watch of the targets Chromium reports.
import assert from 'node:assert/strict';
import type WebSocket from 'ws';
import type { Protocol } from 'devtools-protocol';
import { CdpClient } from '../../daemon/cdp/client.js';
import type { BrowserSnapshot } from '../../daemon/chromium/types.js';
import type { InstallResult } from '../../daemon/extensions/installer.js';
import type { Daemon } from './daemon.js';
import { until } from './wait.js';

export type { CdpClient };
export type InstalledExtension = InstallResult['extensions'][number];
/** The named fields of T (its index signature left out). */
type Named<T> = { [K in keyof T as string extends K ? never : K]: T[K] };
/** GET /browsers/local: the daemon's snapshot, with the extensions as the extensions module lists them. */
export type Snapshot = Omit<Named<BrowserSnapshot>, 'extensions'> & { extensions: InstalledExtension[] };
export type TargetInfo = Protocol.Target.TargetInfo;

export async function browser(d: Daemon): Promise<Snapshot> {
  const res = await d.fetch('/browsers/local');
  assert.equal(res.status, 200);
  return (await res.json()) as Snapshot;
}

/** Polls GET /browsers/local until `pred` holds (a state, not a sleep, is what is asserted). */
export async function waitBrowser(d: Daemon, pred: (s: Snapshot) => boolean, what = 'in the expected state', timeoutMs = 60_000): Promise<Snapshot> {
  let last: Snapshot | null = null;
  return until(
    () => `the browser ${what}; last: ${JSON.stringify(last)}`,
    async () => {
      last = await browser(d);
      return pred(last) ? last : undefined;
    },
    timeoutMs,
  );
}

/** The largest CDP message the helpers accept (screenshots, big evaluations). */
const MAX_PAYLOAD = 512 * 1024 * 1024;

/** The ws:// URL of the daemon's CDP endpoint. */
export function cdpUrl(d: Daemon): string {
  return `${d.url.replace(/^http/, 'ws')}/browsers/local/cdp`;
}

const bearer = (token: string | null): Record<string, string> => (token === null ? {} : { authorization: `Bearer ${token}` });

/** CDP at a ws:// URL of the daemon (the browser's, or a target's from /json/list) with `token`. */
export function cdpConnect(url: string, token: string | null): Promise<CdpClient> {
  return CdpClient.overWebSocket(url, { headers: bearer(token), maxPayload: MAX_PAYLOAD });
}

/** CDP on the browser target through the daemon's /browsers/local/cdp, with the daemon's token. */
export function daemonCdp(d: Daemon): Promise<CdpClient> {
  return cdpConnect(cdpUrl(d), d.token);
}

export interface CdpSocket {
  cdp: CdpClient;
  /** The socket under the client: for frames the client would not send. */
  ws: WebSocket;
  /** The close code and reason, whoever closed. */
  closed: Promise<{ code: number; reason: string }>;
}

/** CDP at `url` with `token`, and the socket under it (the tests of the proxy's close codes and bounds). */
export async function cdpSocket(url: string, token: string | null): Promise<CdpSocket> {
  let ws: WebSocket | undefined;
  let closed: Promise<{ code: number; reason: string }> | undefined;
  const cdp = await CdpClient.overWebSocket(url, {
    headers: bearer(token),
    maxPayload: MAX_PAYLOAD,
    onOpen: (socket) => {
      ws = socket;
      closed = new Promise((resolve) => socket.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));
    },
  });
  return { cdp, ws: ws as WebSocket, closed: closed as Promise<{ code: number; reason: string }> };
}

/**
 * The targets Chromium reports on one connection (Target.setDiscoverTargets: the running ones at
 * once, new ones as they appear); waits resolve on the event itself. Start it before what makes the
 * target: an MV3 worker may stop again soon after it ran.
 */
export class TargetWatch {
  private readonly seen: TargetInfo[] = [];
  private waiters: { pred: (t: TargetInfo) => boolean; resolve: (t: TargetInfo) => void }[] = [];

  private constructor(private readonly cdp: CdpClient) {
    cdp.on('Target.targetCreated', ({ targetInfo }) => {
      this.seen.push(targetInfo);
      this.waiters = this.waiters.filter((w) => {
        if (!w.pred(targetInfo)) return true;
        w.resolve(targetInfo);
        return false;
      });
    });
  }

  static async start(cdp: CdpClient): Promise<TargetWatch> {
    const watch = new TargetWatch(cdp);
    await cdp.send('Target.setDiscoverTargets', { discover: true });
    return watch;
  }

  /** The first target (seen already or to come) for which `pred` holds. */
  target(pred: (t: TargetInfo) => boolean, what: string, timeoutMs = 30_000): Promise<TargetInfo> {
    const past = this.seen.find(pred);
    if (past !== undefined) return Promise.resolve(past);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w.resolve !== done);
        reject(new Error(`no target ${what} within ${timeoutMs} ms`));
      }, timeoutMs);
      const done = (t: TargetInfo): void => {
        clearTimeout(timer);
        resolve(t);
      };
      this.waiters.push({ pred, resolve: done });
    });
  }

  /** The service worker of extension `id`. */
  worker(id: string, timeoutMs?: number): Promise<TargetInfo> {
    return this.target((t) => t.type === 'service_worker' && t.url.startsWith(`chrome-extension://${id}/`), `service worker of ${id}`, timeoutMs);
  }

  /** A target with this exact URL. */
  page(url: string, timeoutMs?: number): Promise<TargetInfo> {
    return this.target((t) => t.url === url, url, timeoutMs);
  }

  /** Forgets what was seen of extension `id` (it was removed: a new worker is waited for anew). */
  forget(id: string): void {
    for (let i = this.seen.length - 1; i >= 0; i--) if (this.seen[i]?.url.startsWith(`chrome-extension://${id}/`)) this.seen.splice(i, 1);
  }

  close(): void {
    this.cdp.close();
  }
}
