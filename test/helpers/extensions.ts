// Helpers of the extension tests: multipart uploads in each client encoding, the browser's
// state, and a CDP client that goes through the daemon's authenticated /browsers/{id}/cdp.
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import type { Daemon } from './daemon.js';

export type Part = [field: string, value: string | Buffer];

/** A multipart upload; Buffer values are file parts (filename `<field>.zip`), strings plain fields. */
export function upload(d: Daemon, parts: Part[], query = ''): Promise<Response> {
  const form = new FormData();
  for (const [field, value] of parts) {
    if (typeof value === 'string') form.append(field, value);
    else form.append(field, new Blob([value], { type: 'application/zip' }), 'extension.zip');
  }
  return d.fetch(`/browsers/local/extensions${query}`, { method: 'POST', body: form });
}

/** The indexed encoding `extensions[N][name]` / `extensions[N][zip_file]`. */
export function indexed(items: [name: string, zip: Buffer][]): Part[] {
  return items.flatMap(([name, zip], i): Part[] => [
    [`extensions[${i}][name]`, name],
    [`extensions[${i}][zip_file]`, zip],
  ]);
}

export interface UploadBody {
  extensions: { name: string; id: string; version: string; activation: string }[];
  chromium: { restarted: boolean; pid: number; ready_ms: number };
}

export async function expectUploaded(res: Response): Promise<UploadBody> {
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return JSON.parse(text) as UploadBody;
}

export interface BrowserBody {
  state: string;
  chromium: { pid: number | null; restarts: number };
  extensions: { name: string; id: string; version: string; activation: string }[];
}

export async function browser(d: Daemon): Promise<BrowserBody> {
  const res = await d.fetch('/browsers/local');
  assert.equal(res.status, 200);
  return (await res.json()) as BrowserBody;
}

/** Polls GET /browsers/local until `pred` holds (a state, not a timing). */
export async function waitBrowser(d: Daemon, pred: (b: BrowserBody) => boolean, timeoutMs = 60_000): Promise<BrowserBody> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const b = await browser(d);
    if (pred(b)) return b;
    if (Date.now() > until) assert.fail(`browser never reached the expected state; last: ${JSON.stringify(b)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function installedList(d: Daemon): Promise<{ name: string; id: string; version: string; activation: string }[]> {
  const res = await d.fetch('/browsers/local/extensions');
  assert.equal(res.status, 200);
  return ((await res.json()) as { extensions: { name: string; id: string; version: string; activation: string }[] }).extensions;
}

export interface Cdp {
  send<T = Record<string, unknown>>(method: string, params?: Record<string, unknown>): Promise<T>;
  /** Resolves with the first event of `method` whose params satisfy `pred` (past events included). */
  event(method: string, pred: (params: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
  close(): void;
}

/** CDP on the browser target, through the daemon's /browsers/local/cdp with the bearer token. */
export async function daemonCdp(d: Daemon): Promise<Cdp> {
  const ws = new WebSocket(`${d.url.replace(/^http/, 'ws')}/browsers/local/cdp`, { headers: { authorization: `Bearer ${d.token}` } });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  let next = 1;
  const pending = new Map<number, { resolve: (v: Record<string, unknown>) => void; reject: (e: Error) => void }>();
  const events: { method: string; params: Record<string, unknown> }[] = [];
  const waiters: { method: string; pred: (p: Record<string, unknown>) => boolean; resolve: (p: Record<string, unknown>) => void }[] = [];
  ws.on('message', (data) => {
    const msg = JSON.parse(String(data)) as { id?: number; method?: string; params?: Record<string, unknown>; result?: Record<string, unknown>; error?: { message: string } };
    if (msg.id !== undefined) {
      const p = pending.get(msg.id);
      pending.delete(msg.id);
      if (msg.error) p?.reject(new Error(msg.error.message));
      else p?.resolve(msg.result ?? {});
    } else if (msg.method) {
      const ev = { method: msg.method, params: msg.params ?? {} };
      events.push(ev);
      for (const w of [...waiters]) {
        if (w.method === ev.method && w.pred(ev.params)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(ev.params);
        }
      }
    }
  });
  return {
    send: <T>(method: string, params: Record<string, unknown> = {}) =>
      new Promise<T>((resolve, reject) => {
        const id = next++;
        pending.set(id, { resolve: resolve as (v: Record<string, unknown>) => void, reject });
        ws.send(JSON.stringify({ id, method, params }));
      }),
    event: (method, pred, timeoutMs = 30_000) => {
      const past = events.find((e) => e.method === method && pred(e.params));
      if (past) return Promise.resolve(past.params);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no ${method} event in ${timeoutMs} ms`)), timeoutMs);
        waiters.push({
          method,
          pred,
          resolve: (p) => {
            clearTimeout(timer);
            resolve(p);
          },
        });
      });
    },
    close: () => ws.close(),
  };
}

/** Extensions.getExtensions through the daemon: id → version. */
export async function chromiumExtensions(d: Daemon): Promise<Map<string, string>> {
  const cdp = await daemonCdp(d);
  try {
    const r = await cdp.send<{ extensions: { id: string; version: string }[] }>('Extensions.getExtensions');
    return new Map(r.extensions.map((e) => [e.id, e.version]));
  } finally {
    cdp.close();
  }
}

/**
 * Watches targets through the daemon's CDP endpoint (Target.setDiscoverTargets: running targets
 * now, new ones as they appear); `worker(id)` resolves once the extension's service worker target
 * was seen. Start it before the upload: an MV3 worker may stop again soon after it ran.
 */
export async function watchTargets(d: Daemon): Promise<{ worker(id: string, timeoutMs?: number): Promise<{ type: string; url: string }>; close(): void }> {
  const cdp = await daemonCdp(d);
  await cdp.send('Target.setDiscoverTargets', { discover: true });
  return {
    worker: async (id, timeoutMs = 30_000) => {
      const p = await cdp.event(
        'Target.targetCreated',
        (params) => {
          const t = params.targetInfo as { type: string; url: string };
          return t.type === 'service_worker' && t.url.startsWith(`chrome-extension://${id}/`);
        },
        timeoutMs,
      );
      return p.targetInfo as { type: string; url: string };
    },
    close: () => cdp.close(),
  };
}
