// One HTTP request made by Chromium's own network stack: a navigation of a hidden tab of the
// default browser context, rewritten and read through the Fetch domain. Why a navigation (and not
// a fetch() from a page, or Network.loadNetworkResource): see docs/curl.md. In short, a navigation
// the browser starts itself is the one request Chromium sends with every cookie of the profile
// (SameSite=Strict included), no CORS and no preflight, any method (the Fetch domain rewrites the
// method, headers and body of the paused request), through the proxy settings of the profile, and
// its answer is taken at the headers stage as a stream (Fetch.takeResponseBodyAsStream): status and
// headers as the server sent them, the body read in chunks, never rendered nor downloaded.
//
// Steps: Target.createTarget (hidden, about:blank) → attach (flat) → Fetch.enable (every request
// paused at the request stage) → Page.navigate → the document request paused: continueRequest
// with the method, headers (Chromium's own merged with the caller's) and body, and
// interceptResponse → paused again with the answer's headers (a redirect: continued, and its next
// hop is paused like the first) → takeResponseBodyAsStream → IO.read until eof → the request is
// cancelled (Fetch.failRequest: the page never sees it) and the tab closed. A navigation that fails
// (DNS, refused, TLS, the proxy) ends in Page.navigate's errorText: fetch_failed with that net error.
import type { Protocol } from 'devtools-protocol';
import { openPage, type PageSession } from '../cdp/attach.js';
import { CdpCallError, type CdpClient } from '../cdp/client.js';
import type { Deadline } from '../core/deadline.js';
import { BadRequestError, OperationFailedError, PayloadTooLargeError } from '../core/errors.js';
import { SetCookieLines } from './set-cookie.js';

export interface BrowserRequest {
  url: string;
  method: string;
  /** The caller's headers: they replace Chromium's of the same name (case-insensitive). */
  headers: Record<string, string>;
  body: Buffer | null;
}

export interface BrowserAnswer {
  status: number;
  statusText: string;
  /** As sent, one entry per header line (Set-Cookie repeated). */
  headers: { name: string; value: string }[];
  /** The URL that answered (after redirects). */
  url: string;
  /** The body (decoded of its Content-Encoding by Chromium), chunk by chunk; ends the request when done or abandoned. */
  body: AsyncGenerator<Buffer, void, void>;
}

/** Marks an answer of the daemon's forwarding proxy itself (proxies/forwarder/forwarder.ts). */
const FORWARDER_HEADER = 'x-browserd-forwarder';
/** The forwarding proxy's mark of a target the egress policy refused (with the value network_policy_denied). */
const POLICY_HEADER = 'x-kernel-proxy-error';
/** Bytes asked of IO.read at a time. */
const READ_CHUNK = 1024 * 1024;
/** Redirect hops followed at most (as Chromium's own limit). */
const MAX_REDIRECTS = 20;

type Paused = Protocol.Fetch.RequestPausedEvent;

/**
 * Starts the request on `cdp` (a browser-level session) and resolves with the answer's status and
 * headers; the body is read from `answer.body`, which must be consumed or returned (`return()`)
 * for the tab to close. `maxBytes` bounds the body (PayloadTooLargeError naming `limitName`).
 */
export async function requestThroughBrowser(cdp: CdpClient, req: BrowserRequest, deadline: Deadline, limits: { maxBytes: number; limitName: string }): Promise<BrowserAnswer> {
  const page = await openPage(cdp, { url: 'about:blank', background: true, hidden: true }, { deadline });
  const close = (): void => void page.close();
  const queue: Paused[] = [];
  let wake: (() => void) | null = null;
  let navigationError: string | null = null;
  const offPaused = page.on('Fetch.requestPaused', (p) => {
    queue.push(p);
    wake?.();
  });
  // Fetch never shows Set-Cookie: the raw lines come from the Network domain (set-cookie.ts).
  const cookies = new SetCookieLines(cdp, () => page.sessionId);
  const off = (): void => {
    offPaused();
    cookies.close();
  };
  const next = async (): Promise<Paused> => {
    for (;;) {
      const p = queue.shift();
      if (p !== undefined) return p;
      if (navigationError !== null) throw fetchFailed(req.url, navigationError);
      await deadline.race(new Promise<void>((resolve) => (wake = resolve)));
      wake = null;
    }
  };
  try {
    const opts = { deadline };
    await page.send('Network.enable', {}, opts);
    await page.send('Fetch.enable', { patterns: [{ urlPattern: '*', requestStage: 'Request' }] }, opts);
    page.send('Page.navigate', { url: req.url }, opts).then(
      (r) => {
        if (r.errorText !== undefined && r.errorText !== '' && r.errorText !== 'net::ERR_ABORTED') navigationError = r.errorText;
        wake?.();
      },
      (err: unknown) => {
        navigationError = err instanceof CdpCallError ? err.text : String(err);
        wake?.();
      },
    );
    let documentId: string | null = null;
    let hops = 0;
    for (;;) {
      const p = await next();
      if (documentId !== null && p.networkId !== documentId && p.responseStatusCode === undefined && p.resourceType !== 'Document') {
        // Anything else the tab asks for (none is expected of about:blank): not ours, refused.
        await page.send('Fetch.failRequest', { requestId: p.requestId, errorReason: 'BlockedByClient' }, opts).catch(() => undefined);
        continue;
      }
      if (p.responseStatusCode === undefined && p.responseErrorReason === undefined) {
        // The request stage: the first hop gets the caller's method, headers and body; a redirect's hop goes on as Chromium made it.
        if (documentId === null) {
          documentId = p.networkId ?? p.requestId;
          await continueAs(page, p, req, opts);
        } else {
          if (++hops > MAX_REDIRECTS) throw fetchFailed(req.url, 'net::ERR_TOO_MANY_REDIRECTS');
          await page.send('Fetch.continueRequest', { requestId: p.requestId, interceptResponse: true }, opts);
        }
        continue;
      }
      if (p.responseErrorReason !== undefined) throw fetchFailed(req.url, `net::ERR_${p.responseErrorReason.toUpperCase()}`);
      const status = p.responseStatusCode ?? 0;
      let headers = p.responseHeaders ?? [];
      if (status >= 300 && status < 400 && headers.some((h) => h.name.toLowerCase() === 'location')) {
        // A redirect: followed (its next hop is paused at the request stage again).
        await page.send('Fetch.continueRequest', { requestId: p.requestId }, opts);
        continue;
      }
      if (headers.some((h) => h.name.toLowerCase() === FORWARDER_HEADER)) {
        // The browser's forwarding proxy answered for a target it could not reach (or refused): no answer of the target.
        const text = Buffer.from((await page.send('Fetch.getResponseBody', { requestId: p.requestId }, opts)).body, 'base64').toString('utf8').trim().slice(0, 500);
        // The egress policy refused the target (docs/egress.md): named as such, as Kernel's egress proxy names it.
        const policy = headers.some((h) => h.name.toLowerCase() === POLICY_HEADER && h.value === 'network_policy_denied');
        throw new OperationFailedError('fetch_failed', `the browser got no answer from ${new URL(p.request.url).host}: its proxy answered ${status}: ${text}`, {
          code: policy ? 'network_policy_denied' : status === 403 ? 'refused_by_proxy' : 'proxy_error',
          message: text,
        });
      }
      if (!headers.some((h) => h.name.toLowerCase() === 'set-cookie')) {
        const lines = await cookies.of(p.networkId ?? p.requestId, status, deadline);
        headers = [...headers, ...lines.map((value) => ({ name: 'Set-Cookie', value }))];
      }
      const noBody = req.method === 'HEAD' || status === 204 || status === 304;
      const handle = noBody ? null : (await page.send('Fetch.takeResponseBodyAsStream', { requestId: p.requestId }, opts)).stream;
      const body = readBody(page, handle, deadline, limits, async () => {
        off();
        await page.send('Fetch.failRequest', { requestId: p.requestId, errorReason: 'Aborted' }, { timeoutMs: 5000 }).catch(() => undefined);
        close();
      });
      return { status, statusText: p.responseStatusText ?? '', headers, url: p.request.url, body };
    }
  } catch (err) {
    off();
    close();
    throw err;
  }
}

async function continueAs(page: PageSession, p: Paused, req: BrowserRequest, opts: { deadline: Deadline }): Promise<void> {
  const merged = new Map<string, { name: string; value: string }>();
  for (const [name, value] of Object.entries(p.request.headers)) merged.set(name.toLowerCase(), { name, value });
  for (const [name, value] of Object.entries(req.headers)) merged.set(name.toLowerCase(), { name, value });
  try {
    await page.send(
      'Fetch.continueRequest',
      {
        requestId: p.requestId,
        method: req.method,
        headers: [...merged.values()],
        ...(req.body === null ? {} : { postData: req.body.toString('base64') }),
        interceptResponse: true,
      },
      opts,
    );
  } catch (err) {
    if (err instanceof CdpCallError && err.answered) throw new BadRequestError([`headers: Chromium refused the request as given: ${err.text}`]);
    throw err;
  }
}

async function* readBody(
  page: PageSession,
  handle: string | null,
  deadline: Deadline,
  limits: { maxBytes: number; limitName: string },
  end: () => Promise<void>,
): AsyncGenerator<Buffer, void, void> {
  try {
    if (handle === null) return;
    let total = 0;
    for (;;) {
      const r = await page.send('IO.read', { handle, size: READ_CHUNK }, { deadline });
      const chunk = Buffer.from(r.data, r.base64Encoded === true ? 'base64' : 'utf8');
      total += chunk.length;
      if (total > limits.maxBytes) throw new PayloadTooLargeError('the answer', limits.maxBytes, limits.limitName);
      if (chunk.length > 0) yield chunk;
      if (r.eof) break;
    }
    await page.send('IO.close', { handle }, { deadline }).catch(() => undefined);
  } finally {
    await end();
  }
}

function fetchFailed(url: string, netError: string): OperationFailedError {
  const host = URL.canParse(url) ? new URL(url).host : url;
  return new OperationFailedError('fetch_failed', `the browser got no answer from ${host}: ${netError}`, { code: netError, message: `Chromium's network stack: ${netError}` });
}
