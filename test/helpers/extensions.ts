// Helpers of the extension tests: multipart uploads in each client encoding, the installed list,
// and what Chromium runs, seen through the daemon's CDP endpoint (the kit's client).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { InstallResult } from '../../daemon/extensions/installer.js';
import { daemonCdp, TargetWatch, type InstalledExtension } from '../kit/browser.js';
import type { Daemon } from '../kit/daemon.js';

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

export type UploadBody = InstallResult;

export async function expectUploaded(res: Response): Promise<UploadBody> {
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return JSON.parse(text) as UploadBody;
}

export async function installedList(d: Daemon): Promise<InstalledExtension[]> {
  const res = await d.fetch('/browsers/local/extensions');
  assert.equal(res.status, 200);
  return ((await res.json()) as { extensions: InstalledExtension[] }).extensions;
}

/** Extensions.getExtensions through the daemon: id → version. */
export async function chromiumExtensions(d: Daemon): Promise<Map<string, string>> {
  const cdp = await daemonCdp(d);
  try {
    const r = await cdp.send('Extensions.getExtensions');
    return new Map(r.extensions.map((e) => [e.id, e.version]));
  } finally {
    cdp.close();
  }
}

/** The targets Chromium reports through the daemon's CDP endpoint, on a connection of their own (closed by close()). */
export async function watchTargets(d: Daemon): Promise<TargetWatch> {
  return TargetWatch.start(await daemonCdp(d));
}

/** Opens a page through the daemon's CDP and navigates it; returns Page.navigate's errorText (undefined: loaded). */
export async function navigate(d: Daemon, url: string): Promise<string | undefined> {
  const cdp = await daemonCdp(d);
  try {
    const { targetId } = await cdp.send('Target.createTarget', { url: 'about:blank' });
    try {
      const { sessionId } = await cdp.send('Target.attachToTarget', { targetId, flatten: true });
      return (await cdp.send('Page.navigate', { url }, { sessionId })).errorText;
    } finally {
      await cdp.send('Target.closeTarget', { targetId }).catch(() => undefined);
    }
  } finally {
    cdp.close();
  }
}
