// The DevTools endpoint ChromeDriver attaches to (its debuggerAddress), served on a Unix socket in
// the WebDriver user's folder (driver.ts), so only ChromeDriver's namespace reaches it (relay.ts).
// It is the CDP endpoint of the API without the token: the same bridge (a session of its own per
// connection over the pipe multiplexer) and the same discovery answers, with URLs on the address
// ChromeDriver knows (127.0.0.1:DEVTOOLS_PORT inside its namespace). ChromeDriver asks for
// /json/version (the browser's WebSocket), /json/list and opens WebSockets to /devtools/browser/…
// and /devtools/page/<target>.
import http from 'node:http';
import type net from 'node:net';
import { rmSync } from 'node:fs';
import { Deadline } from '../core/deadline.js';
import type { Logger } from '../core/log.js';
import type { CdpBridge, ReadyMux } from '../cdp/bridge.js';
import { CDP_READY_WAIT_MS } from '../cdp/bridge.js';
import { targetList, versionInfo } from '../cdp/discovery.js';
import { toBrowserdError } from '../core/errors.js';
import { DEBUGGER_ADDRESS } from './ports.js';

export interface CdpAccess {
  bridge: CdpBridge;
  waitMux(deadline: Deadline): Promise<ReadyMux>;
}

const WS_BASE = `ws://${DEBUGGER_ADDRESS}`;
const BROWSER_PATH = '/devtools/browser/browserd';

/** The few statuses this endpoint answers with (ChromeDriver only reads whether it worked). */
function statusOf(err: unknown): { status: number; body: unknown } {
  const e = toBrowserdError(err);
  return { status: e.code === 'browser_unavailable' ? 503 : e.code === 'not_found' ? 404 : e.code === 'invalid_request' ? 400 : 500, body: e.toBody() };
}

function send(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8', 'content-length': Buffer.byteLength(text) }).end(text);
}

/** Serves the endpoint on `socketPath` (a stale socket file there is replaced). */
export async function serveDevtools(socketPath: string, cdp: CdpAccess, log: Logger): Promise<net.Server> {
  const server = http.createServer((req, res) => {
    const pathname = new URL(req.url ?? '/', 'http://devtools').pathname.replace(/\/$/, '');
    const deadline = Deadline.in(CDP_READY_WAIT_MS, 'waiting for Chromium');
    const answer = async (): Promise<void> => {
      if (pathname === '/json/version') {
        const { version } = await cdp.waitMux(deadline);
        return send(res, 200, versionInfo(version, `${WS_BASE}${BROWSER_PATH}`));
      }
      if (pathname === '/json/list' || pathname === '/json') {
        const { mux } = await cdp.waitMux(deadline);
        return send(res, 200, await targetList(mux, WS_BASE, deadline.signal));
      }
      log.debug({ event: 'webdriver_devtools_unknown', method: req.method, path: pathname }, 'ChromeDriver asked for a DevTools path the daemon does not serve');
      send(res, 404, { code: 'not_found', message: `no DevTools endpoint ${pathname}` });
    };
    answer()
      .catch((err: unknown) => {
        const e = statusOf(err);
        send(res, e.status, e.body);
      })
      .finally(() => deadline.dispose());
  });
  server.on('upgrade', (req, socket, head) => {
    const pathname = new URL(req.url ?? '/', 'http://devtools').pathname;
    const refuse = (err: unknown): void => {
      const e = statusOf(err);
      const text = JSON.stringify(e.body);
      socket.end(`HTTP/1.1 ${e.status} ${http.STATUS_CODES[e.status] ?? 'Error'}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`);
    };
    const ctx = { req, socket, head, log, refuse };
    if (pathname.startsWith('/devtools/browser')) return cdp.bridge.handle(ctx, { kind: 'browser' });
    const page = /^\/devtools\/page\/([^/]+)$/.exec(pathname);
    if (page !== null) return cdp.bridge.handle(ctx, { kind: 'target', targetId: decodeURIComponent(page[1] as string) });
    socket.end('HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
  });
  rmSync(socketPath, { force: true });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}
