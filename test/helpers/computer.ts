// Helpers of the computer-control tests: a loopback server with a page that records every DOM
// event it receives (read back with Runtime.evaluate), a page of known colours, CDP through the
// daemon's proxy to open and drive tabs, and the SDK client.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Kernel from '@onkernel/sdk';
import type { CdpClient } from '../kit/browser.js';
import { tempDir } from '../kit/cleanup.js';
import { TEST_TOKEN, type Daemon } from '../kit/daemon.js';
import { until } from '../kit/wait.js';

/** The types the recorder keeps, in the order the page receives them (window, capture phase). */
const RECORDED = [
  'pointerover', 'pointerdown', 'pointermove', 'pointerup', 'pointerout', 'pointercancel',
  'mouseover', 'mousemove', 'mousedown', 'mouseup', 'mouseout',
  'click', 'auxclick', 'dblclick', 'contextmenu', 'wheel',
  'keydown', 'keypress', 'keyup', 'beforeinput', 'input', 'paste', 'copy', 'dragstart',
];

/**
 * A pad over the whole viewport (fixed, no text selection, no context menu) with a textarea at
 * (450, 20)–(650, 120); the document is 3000 × 3000 so that it scrolls both ways. Every event of
 * RECORDED is pushed to `window.__events` as a compact record.
 */
export const RECORDER_HTML = `<!doctype html><html><head><meta charset="utf-8"><title>recorder</title><style>
html, body { margin: 0 }
#pad { position: fixed; left: 0; top: 0; right: 0; bottom: 0; background: #eeeeee; user-select: none }
#ta { position: fixed; left: 450px; top: 20px; width: 200px; height: 100px; margin: 0; padding: 0; border: 0 }
#space { width: 3000px; height: 3000px }
</style></head><body><div id="space"></div><div id="pad"></div><textarea id="ta"></textarea><script>
window.__events = [];
document.addEventListener('contextmenu', (e) => e.preventDefault());
for (const type of ${JSON.stringify(RECORDED)}) {
  window.addEventListener(type, (e) => {
    const r = { type: e.type, target: (e.target && e.target.id) || (e.target && e.target.nodeName) || '' };
    if (typeof e.clientX === 'number') Object.assign(r, { x: e.clientX, y: e.clientY, button: e.button, buttons: e.buttons, detail: e.detail });
    if (typeof e.key === 'string') Object.assign(r, { key: e.key, code: e.code, keyCode: e.keyCode, repeat: e.repeat });
    if (typeof e.ctrlKey === 'boolean') r.mods = (e.altKey ? 'a' : '') + (e.ctrlKey ? 'c' : '') + (e.metaKey ? 'm' : '') + (e.shiftKey ? 's' : '');
    if (typeof e.inputType === 'string') Object.assign(r, { inputType: e.inputType, data: e.data });
    if (typeof e.deltaY === 'number') Object.assign(r, { dx: e.deltaX, dy: e.deltaY, mode: e.deltaMode });
    window.__events.push(r);
  }, true);
}
</script></body></html>`;

/** Four 200 × 150 blocks from (0, 0): red, green / blue, yellow; white elsewhere. */
export const QUADRANTS_HTML = `<!doctype html><html><head><style>
html, body { margin: 0; background: #ffffff }
div { position: fixed; width: 200px; height: 150px }
</style></head><body>
<div style="left: 0; top: 0; background: #ff0000"></div><div style="left: 200px; top: 0; background: #00ff00"></div>
<div style="left: 0; top: 150px; background: #0000ff"></div><div style="left: 200px; top: 150px; background: #ffff00"></div>
</body></html>`;

export interface PageServer {
  /** http://127.0.0.1:port */
  origin: string;
  close(): Promise<void>;
}

/** Serves /recorder and /quadrants on loopback. */
export async function startPageServer(): Promise<PageServer> {
  const server = http.createServer((req, res) => {
    const html = req.url === '/recorder' ? RECORDER_HTML : req.url === '/quadrants' ? QUADRANTS_HTML : null;
    if (html === null) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' }).end(html);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

export interface Tab {
  targetId: string;
  sessionId: string;
  /** The value of a page expression. */
  eval<T>(expression: string): Promise<T>;
  /** The recorded events since the last call (and forgets them). */
  events(): Promise<Rec[]>;
  navigate(url: string): Promise<void>;
  close(): Promise<void>;
}

export interface Rec {
  type: string;
  target: string;
  x?: number;
  y?: number;
  button?: number;
  buttons?: number;
  detail?: number;
  key?: string;
  code?: string;
  keyCode?: number;
  repeat?: boolean;
  mods?: string;
  inputType?: string;
  data?: string | null;
  dx?: number;
  dy?: number;
  mode?: number;
}

/** Opens a tab (in the foreground unless `background`) and waits until `ready` holds in it. */
export async function openTab(cdp: CdpClient, url: string, opts: { background?: boolean; newWindow?: boolean; ready?: string } = {}): Promise<Tab> {
  const { targetId } = await cdp.send('Target.createTarget', { url, background: opts.background, newWindow: opts.newWindow });
  const { sessionId } = await cdp.send('Target.attachToTarget', { targetId, flatten: true });
  const evaluate = async <T>(expression: string): Promise<T> => {
    const r = await cdp.send('Runtime.evaluate', { expression, returnByValue: true, awaitPromise: true }, { sessionId });
    if (r.exceptionDetails !== undefined) throw new Error(`${expression}: ${r.exceptionDetails.exception?.description ?? r.exceptionDetails.text}`);
    return r.result.value as T;
  };
  const waitReady = async (expression: string): Promise<void> => {
    const ready = `(() => { try { return document.readyState === 'complete' && !!(${expression}); } catch { return false; } })()`;
    await until(`${url} ready (${expression})`, () => evaluate<boolean>(ready).catch(() => false), 30_000, 20);
  };
  await waitReady(opts.ready ?? 'true');
  return {
    targetId,
    sessionId,
    eval: evaluate,
    events: async () => JSON.parse(await evaluate<string>('JSON.stringify(window.__events.splice(0))')) as Rec[],
    navigate: async (to: string) => {
      await cdp.send('Page.navigate', { url: to }, { sessionId });
      await waitReady(to.endsWith('/recorder') ? 'window.__events' : 'true');
    },
    close: async () => {
      await cdp.send('Target.closeTarget', { targetId });
    },
  };
}

/** The SDK on the daemon; no retries (the tests look at each answer). */
export function sdk(d: Daemon): Kernel {
  return new Kernel({ apiKey: TEST_TOKEN, baseURL: d.url, maxRetries: 0 });
}

/** POST /browsers/local/computer/<path> with a JSON body (curl-like: plain fetch). */
export function post(d: Daemon, path: string, json?: unknown): Promise<Response> {
  return d.fetch(`/browsers/local/computer/${path}`, { method: 'POST', ...(json === undefined ? {} : { json }) });
}

/** Asserts a 204 without a body. */
export async function expect204(res: Response): Promise<void> {
  const text = await res.text();
  assert.equal(res.status, 204, text);
  assert.equal(text, '');
}

/** Compact form of mouse records for comparisons: `type@x,y b<button> bs<buttons> d<detail> <mods>`. */
export function mouseLine(r: Rec): string {
  return `${r.type}@${r.x},${r.y} b${r.button} bs${r.buttons} d${r.detail}${r.mods ? ` ${r.mods}` : ''}`;
}

/** Compact form of key and input records: `type key code keyCode mods` / `type inputType "data"`. */
export function keyLine(r: Rec): string {
  if (r.key !== undefined) return `${r.type} ${JSON.stringify(r.key)} ${r.code} ${r.keyCode}${r.mods ? ` ${r.mods}` : ''}`;
  if (r.inputType !== undefined) return `${r.type} ${r.inputType} ${JSON.stringify(r.data)}`;
  return r.type;
}

/** The same request with curl itself: status, content type and the body's bytes. */
export async function curl(d: Daemon, path: string, json?: unknown): Promise<{ status: number; type: string; body: Buffer }> {
  const dir = tempDir('browserd-curl-');
  const out = `${dir}/body`;
  const args = ['-sS', '-X', 'POST', '-H', `Authorization: Bearer ${TEST_TOKEN}`, '-o', out, '-w', '%{http_code} %{content_type}'];
  if (json !== undefined) args.push('-H', 'Content-Type: application/json', '--data-binary', JSON.stringify(json));
  args.push(`${d.url}/browsers/local/computer/${path}`);
  try {
    const stdout = await new Promise<string>((resolve, reject) => execFile('curl', args, (err, so) => (err ? reject(err) : resolve(so))));
    const [status, type = ''] = stdout.trim().split(' ');
    let body = Buffer.alloc(0);
    try {
      body = readFileSync(out);
    } catch {
      // no body (204)
    }
    return { status: Number(status), type, body };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
