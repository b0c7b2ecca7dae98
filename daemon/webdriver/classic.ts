// WebDriver classic through the daemon: each request under /browsers/{id}/webdriver is sent to
// ChromeDriver (over its socket, driver.ts) with its method, path and body, and ChromeDriver's
// answer (status, JSON body in WebDriver's own error shape) comes back as it is, but for three
// commands the daemon reads: New Session (capabilities checked and attached, caps.ts; the answer's
// webSocketUrl points at the daemon), New Window (the tab is the session's) and Delete Session
// (the session's tabs are closed).
import http from 'node:http';
import type { IncomingMessage } from 'node:http';
import { Deadline } from '../core/deadline.js';
import { BrowserUnavailableError, InvalidRequestError, PayloadTooLargeError } from '../core/errors.js';
import { attachSessionBody } from './caps.js';
import { DRIVER_START_MS } from './driver.js';
import type { Sessions } from './sessions.js';

/** A WebDriver request body (Element Send Keys, Execute Script, a file upload through se/file). */
export const WEBDRIVER_BODY_LIMIT_BYTES = 16 * 1024 * 1024;

/** The request as the route hands it over (the HTTP face stays in routes.ts). */
export interface ClassicRequest {
  req: IncomingMessage;
  res: http.ServerResponse;
  url: URL;
  /** Aborted when the client goes away. */
  signal: AbortSignal;
}

/** A JSON answer to send, or null once the answer was written (streamed). */
export type ClassicReply = { status: number; body: unknown } | null;

export interface ClassicDeps {
  /** ChromeDriver's socket, started when it is not running. */
  driverSocket(deadline: Deadline): Promise<string>;
  sessions: Sessions;
  /** ws://<host>/browsers/{id}/webdriver/session/<sid>?jwt=… for the caller of this request. */
  bidiUrl(sessionId: string): Promise<string>;
  /** Closes these tabs (the session's own), never throws. */
  closeTabs(targetIds: string[]): Promise<void>;
}

/** The WebDriver path of a request: what follows the `webdriver` segment (`/session/…`). */
export function driverPath(url: URL): string {
  const parts = url.pathname.split('/');
  const at = parts[1] === 'browsers' && parts[3] === 'webdriver' ? 4 : 2;
  return `/${parts.slice(at).join('/')}`;
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > WEBDRIVER_BODY_LIMIT_BYTES) throw new PayloadTooLargeError('a WebDriver request body', WEBDRIVER_BODY_LIMIT_BYTES);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > WEBDRIVER_BODY_LIMIT_BYTES) throw new PayloadTooLargeError('a WebDriver request body', WEBDRIVER_BODY_LIMIT_BYTES);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

const GONE = 'ChromeDriver went away during the command (Chromium restarted, or ChromeDriver exited): the WebDriver session is over';

interface DriverAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  res: IncomingMessage;
}

function ask(socketPath: string, method: string, path: string, body: Buffer | null, signal: AbortSignal): Promise<DriverAnswer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { host: 'localhost' };
    if (body !== null) {
      headers['content-type'] = 'application/json; charset=utf-8';
      headers['content-length'] = body.length;
    }
    const req = http.request({ socketPath, method, path, headers, signal }, (res) => resolve({ status: res.statusCode ?? 502, headers: res.headers, res }));
    req.on('error', (err) =>
      reject(new BrowserUnavailableError(GONE, { inner: { code: 'chromedriver_gone', message: err.message } })),
    );
    req.end(body ?? undefined);
  });
}

async function jsonOf(res: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  try {
    for await (const c of res) chunks.push(c as Buffer);
  } catch (err) {
    throw new BrowserUnavailableError(GONE, { inner: { code: 'chromedriver_gone', message: (err as Error).message } });
  }
  const text = Buffer.concat(chunks).toString('utf8');
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return { value: { error: 'unknown error', message: `ChromeDriver answered with no JSON: ${text.slice(0, 200)}` } };
  }
}

export async function forwardClassic(ctx: ClassicRequest, deps: ClassicDeps): Promise<ClassicReply> {
  const method = ctx.req.method ?? 'GET';
  const path = driverPath(ctx.url);
  const segs = path.split('/').filter((s) => s !== '');
  let body: Buffer | null = method === 'POST' ? await readBody(ctx.req) : null;
  const newSession = method === 'POST' && path === '/session';
  if (newSession) {
    let parsed: unknown;
    try {
      parsed = JSON.parse((body as Buffer).toString('utf8'));
    } catch (err) {
      throw new InvalidRequestError(`the body is not JSON: ${(err as Error).message}`);
    }
    body = Buffer.from(JSON.stringify(attachSessionBody(parsed)));
  } else if (method === 'POST' && (body as Buffer).length === 0) {
    body = Buffer.from('{}');
  }
  const deadline = Deadline.in(DRIVER_START_MS, 'starting ChromeDriver', ctx.signal);
  let socketPath: string;
  try {
    socketPath = await deps.driverSocket(deadline);
  } finally {
    deadline.dispose();
  }
  const answer = await ask(socketPath, method, path, body, ctx.signal);
  const sid = segs[1];
  const readsAnswer = newSession || (method === 'DELETE' && segs.length === 2 && segs[0] === 'session') || (method === 'POST' && segs.length === 4 && segs[2] === 'window' && segs[3] === 'new');
  if (!readsAnswer) {
    const headers: Record<string, string> = { 'content-type': String(answer.headers['content-type'] ?? 'application/json; charset=utf-8') };
    // ChromeDriver's error answers (WebDriver's own shape, which its clients read) say what every error answer says: no retry.
    if (answer.status >= 400) headers['x-should-retry'] = 'false';
    ctx.res.writeHead(answer.status, headers);
    // An answer cut short (ChromeDriver ended mid-answer) cuts the client's too: never a complete-looking one.
    answer.res.once('aborted', () => ctx.res.destroy()).once('error', () => ctx.res.destroy());
    answer.res.pipe(ctx.res);
    await new Promise<void>((resolve) => ctx.res.once('close', resolve));
    return null;
  }
  const json = (await jsonOf(answer.res)) as { value?: Record<string, unknown> | null };
  const value = json.value ?? null;
  if (answer.status === 200 && value !== null) {
    if (newSession && typeof value.sessionId === 'string') {
      deps.sessions.opened(value.sessionId);
      const caps = value.capabilities as Record<string, unknown> | undefined;
      if (caps !== undefined && typeof caps.webSocketUrl === 'string') caps.webSocketUrl = await deps.bidiUrl(value.sessionId);
    } else if (sid !== undefined && typeof value.handle === 'string') {
      deps.sessions.tab(sid, value.handle);
    }
  }
  if (answer.status === 200 && method === 'DELETE' && sid !== undefined) await deps.closeTabs(deps.sessions.ended(sid));
  return { status: answer.status, body: json };
}

