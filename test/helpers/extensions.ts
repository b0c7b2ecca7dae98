// Helpers of the extension tests: multipart uploads in each client encoding, the browser's
// state, and a CDP client that goes through the daemon's authenticated /browsers/{id}/cdp.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
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

/** A multipart body built by hand (the same shape FormData sends). */
export function multipartBody(parts: Part[]): { body: Buffer; contentType: string } {
  const boundary = `----browserd-test-${randomBytes(8).toString('hex')}`;
  const chunks: Buffer[] = [];
  for (const [field, value] of parts) {
    const file = typeof value === 'string' ? '' : '; filename="extension.zip"\r\nContent-Type: application/zip';
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${field}"${file}\r\n\r\n`), Buffer.from(value), Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

/**
 * An upload over node:http. `chunked`: no content-length, so the server has to count the bytes as
 * they come. `headersOnly`: sends the headers (with the body's content-length) and waits for the
 * answer, for the answers the server gives before it reads the body (413 by content-length, 429):
 * a client still writing then may see the connection reset before it reads the answer.
 */
export function rawUpload(d: Daemon, parts: Part[], opts: { query?: string; chunked?: boolean; headersOnly?: boolean } = {}): Promise<Response> {
  const { body, contentType } = multipartBody(parts);
  const url = new URL(`${d.url}/browsers/local/extensions${opts.query ?? ''}`);
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { 'content-type': contentType, authorization: `Bearer ${d.token}` };
    if (!opts.chunked) headers['content-length'] = String(body.length);
    const req = http.request(url, { method: 'POST', headers }, (res) => {
      const got: Buffer[] = [];
      res.on('data', (c: Buffer) => got.push(c));
      res.on('end', () => {
        const h = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') h.set(k, v);
        resolve(new Response(Buffer.concat(got), { status: res.statusCode ?? 0, headers: h }));
      });
    });
    req.on('error', reject);
    if (opts.headersOnly) {
      req.flushHeaders();
      req.on('response', (res) => res.on('end', () => req.destroy()));
      return;
    }
    let off = 0;
    const step = 16 * 1024;
    const pump = (): void => {
      while (off < body.length) {
        const ok = req.write(body.subarray(off, off + step));
        off += step;
        if (!ok) {
          req.once('drain', pump);
          return;
        }
      }
      req.end();
    };
    pump();
  });
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
export async function watchTargets(
  d: Daemon,
): Promise<{ worker(id: string, timeoutMs?: number): Promise<{ type: string; url: string }>; page(url: string, timeoutMs?: number): Promise<void>; close(): void }> {
  const cdp = await daemonCdp(d);
  await cdp.send('Target.setDiscoverTargets', { discover: true });
  return {
    page: async (url, timeoutMs = 30_000) => {
      await cdp.event('Target.targetCreated', (params) => (params.targetInfo as { url: string }).url === url, timeoutMs);
    },
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

/** Opens a page through the daemon's CDP and navigates it; returns Page.navigate's errorText (undefined: loaded). */
export async function navigate(d: Daemon, url: string): Promise<string | undefined> {
  const ws = new WebSocket(`${d.url.replace(/^http/, 'ws')}/browsers/local/cdp`, { headers: { authorization: `Bearer ${d.token}` } });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  let next = 1;
  const send = (method: string, params: Record<string, unknown>, sessionId?: string): Promise<Record<string, unknown>> =>
    new Promise((resolve, reject) => {
      const id = next++;
      const onMessage = (data: WebSocket.RawData): void => {
        const msg = JSON.parse(String(data)) as { id?: number; result?: Record<string, unknown>; error?: { message: string } };
        if (msg.id !== id) return;
        ws.off('message', onMessage);
        if (msg.error) reject(new Error(`${method}: ${msg.error.message}`));
        else resolve(msg.result ?? {});
      };
      ws.on('message', onMessage);
      ws.send(JSON.stringify(sessionId === undefined ? { id, method, params } : { id, method, params, sessionId }));
    });
  try {
    const { targetId } = (await send('Target.createTarget', { url: 'about:blank' })) as { targetId: string };
    try {
      const { sessionId } = (await send('Target.attachToTarget', { targetId, flatten: true })) as { sessionId: string };
      const nav = (await send('Page.navigate', { url }, sessionId)) as { errorText?: string };
      return nav.errorText;
    } finally {
      await send('Target.closeTarget', { targetId }).catch(() => undefined);
    }
  } finally {
    ws.close();
  }
}
