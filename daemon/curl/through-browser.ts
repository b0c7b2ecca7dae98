// One HTTP request made by Chromium's own network stack: a navigation of a hidden tab of the
// default browser context, rewritten and read through the Fetch domain. Why a navigation (and not
// a fetch() from a page, or Network.loadNetworkResource): see docs/curl.md. In short, a navigation
// the browser starts itself is the one request Chromium sends with every cookie of the profile
// (SameSite=Strict included), no CORS and no preflight, any method (the Fetch domain rewrites the
// method, headers and body of the paused request), through the proxy settings of the profile, and
// its answer is taken at the headers stage as a stream (Fetch.takeResponseBodyAsStream): status and
// headers as the server sent them, the body read in chunks, never rendered nor downloaded.
//
// Steps, in a warm hidden tab (tabs.ts: about:blank, Fetch enabled on its session, every request
// paused at the request stage) → Page.navigate → the document request paused: continueRequest
// with the method, headers (Chromium's own merged with the caller's) and body, and
// interceptResponse → paused again with the answer's headers (a redirect: continued, and its next
// hop is paused like the first) → takeResponseBodyAsStream → IO.read until eof → the request is
// cancelled (Fetch.failRequest: the page never sees it, nothing commits: the tab is still on its
// about:blank) and, once Page.navigate has answered, the tab is handed back for the next request
// (any other end: it is closed). A navigation that fails
// (DNS, refused, TLS, the proxy) ends in Page.navigate's errorText: fetch_failed with that net error.
import type { Protocol } from 'devtools-protocol';
import type { PageSession } from '../cdp/attach.js';
import { CdpCallError } from '../cdp/client.js';
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
  /** The body (decoded of its Content-Encoding by Chromium), chunk by chunk. */
  body: AsyncGenerator<Buffer, void, void>;
  /** Ends the request, whether the body was read to its end, in part, or not at all (idempotent). */
  release(): Promise<void>;
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

/** After the request is cancelled, how long the tab's navigation may take to answer before the tab is not used again. */
const SETTLE_MS = 5000;

/**
 * Starts the request in `page` (a tab of tabs.ts: Fetch enabled) and resolves with the answer's
 * status and headers; the body is read from `answer.body`, and `answer.release()` must be called
 * after (read or not). `done` is called once when the request is over: `reusable` when it ended cleanly
 * (the body read to its end, the request cancelled and the navigation answered), else the tab must
 * be closed. `maxBytes` bounds the body (PayloadTooLargeError naming `limitName`).
 */
export async function requestThroughBrowser(
  page: PageSession,
  req: BrowserRequest,
  deadline: Deadline,
  limits: { maxBytes: number; limitName: string },
  done: (reusable: boolean) => void,
): Promise<BrowserAnswer> {
  const queue: Paused[] = [];
  let wake: (() => void) | null = null;
  let navigationError: string | null = null;
  const offPaused = page.on('Fetch.requestPaused', (p) => {
    queue.push(p);
    wake?.();
  });
  // Fetch never shows Set-Cookie: the raw lines come from the Network domain (set-cookie.ts).
  const cookies = new SetCookieLines(page);
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
  let navigated: Promise<unknown> = Promise.resolve();
  /** Cancels the request (the page never sees it) and hands the tab back once its navigation answered. */
  const finish = async (requestId: string, clean: boolean): Promise<void> => {
    off();
    const cancelled = await page.send('Fetch.failRequest', { requestId, errorReason: 'Aborted' }, { timeoutMs: SETTLE_MS }).then(
      () => true,
      () => false,
    );
    done(clean && cancelled && (await settlesWithin(navigated, SETTLE_MS)));
  };
  try {
    const opts = { deadline };
    navigated = page.send('Page.navigate', { url: req.url }, opts).then(
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
      // Once, whoever ends first (the body's end, or a release of a body never read); not waited for
      // by the answer: the tab is handed back in the background.
      let ended = false;
      const end = (complete: boolean): void => {
        if (ended) return;
        ended = true;
        void finish(p.requestId, complete);
      };
      const body = readBody(page, handle, deadline, limits, end);
      const release = async (): Promise<void> => {
        await body.return(); // runs the body's end when it had started
        end(false);
      };
      return { status, statusText: p.responseStatusText ?? '', headers, url: p.request.url, body, release };
    }
  } catch (err) {
    // A request may still be paused in the tab: it is not used again.
    off();
    done(false);
    throw err;
  }
}

/** Whether `p` settles (either way) within `ms`. */
function settlesWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    const settled = (): void => {
      clearTimeout(timer);
      resolve(true);
    };
    p.then(settled, settled);
  });
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
  end: (complete: boolean) => void,
): AsyncGenerator<Buffer, void, void> {
  let complete = false;
  try {
    if (handle === null) {
      complete = true;
      return;
    }
    let total = 0;
    for (;;) {
      const r = await page.send('IO.read', { handle, size: READ_CHUNK }, { deadline });
      const chunk = Buffer.from(r.data, r.base64Encoded === true ? 'base64' : 'utf8');
      total += chunk.length;
      if (total > limits.maxBytes) throw new PayloadTooLargeError('the answer', limits.maxBytes, limits.limitName);
      if (chunk.length > 0) yield chunk;
      if (r.eof) break;
    }
    complete = await page.send('IO.close', { handle }, { deadline }).then(
      () => true,
      () => false,
    );
  } finally {
    end(complete);
  }
}

function fetchFailed(url: string, netError: string): OperationFailedError {
  const host = URL.canParse(url) ? new URL(url).host : url;
  return new OperationFailedError('fetch_failed', `the browser got no answer from ${host}: ${netError}`, { code: netError, message: `Chromium's network stack: ${netError}` });
}
