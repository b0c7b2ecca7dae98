// The CDP send budget through the real daemon and Chromium: a client that stops reading while
// Chromium answers it is closed with 1013 and a reason naming the limit it passed (here the total
// over every client, BROWSERD_CDP_QUEUE_TOTAL_BYTES), instead of the daemon holding its answers
// without bound; the bytes held for it are given back (browserd_memory_pool_bytes{pool="cdp_client_queue"}).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import WebSocket from 'ws';
import { cdpUrl, waitBrowser } from '../kit/browser.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';
import { until } from '../kit/wait.js';

const MiB = 1024 * 1024;
const TOTAL = 2 * MiB;
/** One answer: a string of this many characters from the page. */
const ANSWER_CHARS = 1 * MiB;
/** More than the socket buffers of loopback TCP on both sides can take (a few MiB each) plus the total. */
const REQUESTS = 48;

let d: Daemon;

before(async () => {
  d = await startDaemon({ autostart: true, env: { BROWSERD_CDP_QUEUE_TOTAL_BYTES: String(TOTAL), BROWSERD_CDP_CLIENT_QUEUE_BYTES: String(512 * MiB) } });
  await waitBrowser(d, (x) => x.state === 'ready', 'ready');
});
after(() => d.cleanup());

async function pool(name: string): Promise<number> {
  const text = await (await d.fetch('/metrics')).text();
  const m = new RegExp(`^browserd_memory_pool_bytes\\{pool="${name}"\\} (\\d+)$`, 'm').exec(text);
  assert.ok(m !== null, `browserd_memory_pool_bytes{pool="${name}"} in /metrics`);
  return Number(m[1]);
}

/** A raw CDP socket: commands answered by id, while it reads. */
function open(url: string, token: string): Promise<{ ws: WebSocket; call(method: string, params?: Record<string, unknown>, sessionId?: string): Promise<Record<string, unknown>> }> {
  const ws = new WebSocket(url, { headers: { authorization: `Bearer ${token}` }, maxPayload: 512 * MiB });
  const waiting = new Map<number, (m: Record<string, unknown>) => void>();
  let next = 1;
  ws.on('message', (data: Buffer) => {
    const m = JSON.parse(data.toString()) as { id?: number; result?: Record<string, unknown> };
    if (m.id !== undefined) waiting.get(m.id)?.(m);
  });
  const call = (method: string, params: Record<string, unknown> = {}, sessionId?: string): Promise<Record<string, unknown>> =>
    new Promise((resolve) => {
      const id = next++;
      waiting.set(id, (m) => resolve((m.result ?? m) as Record<string, unknown>));
      ws.send(JSON.stringify({ id, method, params, ...(sessionId === undefined ? {} : { sessionId }) }));
    });
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve({ ws, call }));
    ws.once('error', reject);
  });
}

test('a client that stops reading is closed with 1013 cdp_queue_full once every client holds more than the total', async () => {
  const token = d.token as string;
  const c = await open(cdpUrl(d), token);
  const { targetId } = (await c.call('Target.createTarget', { url: 'about:blank' })) as { targetId: string };
  const { sessionId } = (await c.call('Target.attachToTarget', { targetId, flatten: true })) as { sessionId: string };
  const closed = new Promise<{ code: number; reason: string }>((resolve) => c.ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  c.ws.pause(); // reads nothing more: Chromium's answers pile up in the daemon
  for (let i = 0; i < REQUESTS; i++) {
    c.ws.send(JSON.stringify({ id: 1000 + i, sessionId, method: 'Runtime.evaluate', params: { expression: `'x'.repeat(${ANSWER_CHARS})`, returnByValue: true } }));
  }
  const line = await d.waitLog((l) => l.event === 'cdp_client_slow');
  assert.equal(line.code, 'cdp_queue_full');
  c.ws.resume(); // reads what was queued, then the close frame
  const { code, reason } = await closed;
  assert.equal(code, 1013);
  assert.match(reason, new RegExp(`^cdp_queue_full: \\d+ bytes unsent over all CDP clients \\(limit ${TOTAL}, BROWSERD_CDP_QUEUE_TOTAL_BYTES\\)$`));
  await until('the bytes held for the client to be given back', async () => ((await pool('cdp_client_queue')) === 0 ? true : undefined));
  // The browser serves the next client.
  const next = await open(cdpUrl(d), token);
  assert.equal(typeof (await next.call('Browser.getVersion')).product, 'string');
  next.ws.close();
});
