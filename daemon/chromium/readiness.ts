// When is Chromium ready: its "DevTools listening on ws://…" line was seen on stderr (the
// DevToolsActivePort file is left behind by an earlier run, so it is not trusted) AND a
// Browser.getVersion round trip succeeded on that endpoint.
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';

/** Between connection attempts while DevTools announces a port but does not answer yet. */
const RETRY_MS = 50;
/** One attempt of the round trip (connect, send, answer). */
const ATTEMPT_TIMEOUT_MS = 5000;

export interface DevToolsLine {
  browserWsUrl: string;
  host: string;
  port: number;
}

const DEVTOOLS_RE = /^DevTools listening on (ws:\/\/(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})\/devtools\/browser\/[A-Za-z0-9-]+)\s*$/;

/** The endpoint from Chromium's DevTools line, or null for any other line. */
export function parseDevToolsLine(line: string): DevToolsLine | null {
  const m = DEVTOOLS_RE.exec(line.trim());
  if (!m) return null;
  const port = Number(m[3]);
  if (port < 1 || port > 65535) return null;
  return { browserWsUrl: m[1] as string, host: (m[2] as string).replace(/^\[|\]$/g, ''), port };
}

export interface BrowserVersion {
  product: string;
  protocolVersion: string;
  userAgent: string;
}

/** One CDP call on a fresh connection to `wsUrl`; rejects on error, close, timeout or abort. */
export function cdpCall<T>(wsUrl: string, method: string, params: Record<string, unknown>, timeoutMs: number, signal?: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const ws = new WebSocket(wsUrl, { perMessageDeflate: false, handshakeTimeout: timeoutMs });
    let settled = false;
    const done = (err: Error | null, value?: T): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      ws.terminate();
      if (err) reject(err);
      else resolve(value as T);
    };
    const onAbort = (): void => done(new Error('aborted'));
    const timer = setTimeout(() => done(new Error(`${method}: no answer within ${timeoutMs} ms`)), timeoutMs);
    signal?.addEventListener('abort', onAbort, { once: true });
    ws.on('open', () => ws.send(JSON.stringify({ id: 1, method, params })));
    ws.on('message', (data) => {
      let msg: { id?: number; result?: T; error?: { message?: string } };
      try {
        msg = JSON.parse(String(data)) as typeof msg;
      } catch {
        return done(new Error(`${method}: the answer is not JSON`));
      }
      if (msg.id !== 1) return;
      if (msg.error) done(new Error(`${method}: ${msg.error.message ?? 'error'}`));
      else done(null, msg.result);
    });
    ws.on('error', (err) => done(err));
    ws.on('close', (code) => done(new Error(`${method}: connection closed (${code})`)));
    if (signal?.aborted) onAbort();
  });
}

export interface LineSource {
  waitForLine<T>(parse: (line: string) => T | null, signal: AbortSignal): Promise<T>;
}

/**
 * Waits for the DevTools line, then retries Browser.getVersion until it answers. The caller
 * bounds the whole wait (deadline, exit) and aborts `signal` when it gives up.
 */
export async function probeReady(source: LineSource, signal: AbortSignal): Promise<DevToolsLine & { version: BrowserVersion }> {
  const line = await source.waitForLine(parseDevToolsLine, signal);
  for (;;) {
    try {
      const version = await cdpCall<BrowserVersion>(line.browserWsUrl, 'Browser.getVersion', {}, ATTEMPT_TIMEOUT_MS, signal);
      return { ...line, version };
    } catch (err) {
      if (signal.aborted) throw err;
      await sleep(RETRY_MS, undefined, { signal }).catch(() => {});
    }
  }
}
