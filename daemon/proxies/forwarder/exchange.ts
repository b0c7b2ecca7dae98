// One plain-HTTP request of the browser in absolute-form (`GET http://host/path HTTP/1.1`),
// parsed by node:http: forwarded in absolute-form on a new connection to the upstream proxy (so
// the upstream sees and handles it as any proxy request, and adds its Via header), or sent in
// origin-form straight to the target. Hop-by-hop headers are dropped both ways (RFC 9110 §7.6.1:
// Connection and the headers it names, Keep-Alive, Proxy-Connection, Proxy-Authorization,
// Proxy-Authenticate, TE, Trailer, Transfer-Encoding, Upgrade); node:http frames the bodies again.
//
// Failures before the answer's head give the browser 502 with a short text naming the cause (a
// 407 of the upstream included: a 407 to Chromium would ask for credentials of the forwarder
// itself); after it, the connection is closed.
import { request, type ClientRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Dial, ProxySocket } from '../upstream/dial.js';
import { authorityOf, CheckFailure } from '../upstream/dial.js';
import { connectDirect, RefusedTarget, type DirectOptions } from './route.js';

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'proxy-authenticate', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

/** rawHeaders without hop-by-hop headers (and those named by Connection). */
export function endToEnd(raw: readonly string[]): string[] {
  const named = new Set<string>();
  for (let i = 0; i < raw.length; i += 2) {
    if ((raw[i] as string).toLowerCase() === 'connection') {
      for (const t of (raw[i + 1] as string).split(',')) named.add(t.trim().toLowerCase());
    }
  }
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const k = (raw[i] as string).toLowerCase();
    if (HOP_BY_HOP.has(k) || named.has(k)) continue;
    out.push(raw[i] as string, raw[i + 1] as string);
  }
  return out;
}

/** How one exchange reports back to the forwarder. */
export interface ExchangeHooks {
  /** The upstream (or direct) connection is open. */
  connected(): void;
  /** It failed before the answer: counted, logged, and told to the browser. */
  failed(err: CheckFailure): void;
  /** Tells the browser `status` with `text` (once; later calls do nothing). */
  answer(status: number, text: string): void;
  /** Counts the bytes of the request body (sent) or of the answer (received). */
  count(stream: NodeJS.ReadableStream, direction: 'sent' | 'received'): void;
  /** Whether the result may still be used (false once the proxy was switched or the browser went away). */
  current(): boolean;
}

interface ForwardTarget {
  url: URL;
  /** null: straight to the target. */
  dial: Dial | null;
  /** The connection to the proxy, when it was opened already (while the peer was checked). */
  opened?: Promise<ProxySocket>;
  direct: DirectOptions;
}

/** Forwards `req` to `target` and relays the answer to `res`. Never rejects. */
export async function forwardRequest(req: IncomingMessage, res: ServerResponse, target: ForwardTarget, hooks: ExchangeHooks): Promise<void> {
  const { url } = target;
  const port = url.port === '' ? 80 : Number(url.port);
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  const headers = endToEnd(req.rawHeaders);
  let upReq: ClientRequest;
  try {
    if (target.dial !== null) {
      // The request target as the browser sent it (already canonical), not re-serialized.
      upReq = await target.dial.request(req.method ?? 'GET', req.url ?? url.href, headers, target.opened);
    } else {
      const sock = await connectDirect(host, port, target.direct);
      if (!hooks.current()) {
        sock.destroy();
        return;
      }
      upReq = request({ method: req.method, path: `${url.pathname}${url.search}`, setHost: false, headers, createConnection: () => sock });
    }
  } catch (err) {
    if (err instanceof RefusedTarget) return hooks.answer(403, `browserd: ${err.message}\n`);
    if (err instanceof CheckFailure) return hooks.failed(err);
    return hooks.failed(new CheckFailure('proxy_unreachable', (err as Error).message, true));
  }
  if (!hooks.current()) {
    upReq.destroy();
    return;
  }
  hooks.connected();
  const authority = authorityOf(host, port);
  upReq.on('error', (e: Error) => {
    if (res.headersSent) res.destroy();
    else hooks.failed(new CheckFailure(target.dial !== null ? 'proxy_unreachable' : 'target_unreachable', `no answer for ${authority}: ${e.message}`, target.dial !== null));
  });
  upReq.once('response', (upRes) => {
    upRes.on('error', () => res.destroy());
    if (target.dial !== null && upRes.statusCode === 407) {
      upRes.resume();
      const auth = target.dial.authorization;
      return hooks.failed(new CheckFailure('proxy_auth_failed', auth === undefined ? 'the proxy needs credentials: 407' : 'the proxy refused the credentials: 407', true));
    }
    if (!hooks.current() || res.headersSent || res.destroyed) {
      upRes.destroy();
      return;
    }
    res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, endToEnd(upRes.rawHeaders));
    upRes.pipe(res);
    hooks.count(upRes, 'received');
  });
  res.once('close', () => {
    if (!res.writableFinished) upReq.destroy();
  });
  req.on('error', () => upReq.destroy());
  req.pipe(upReq);
  hooks.count(req, 'sent');
}
