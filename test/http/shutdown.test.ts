// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The server's graceful close, through real HTTP with a small route table: connections wait up to
// 120 s for their next request (KEEP_ALIVE_MS), so close() itself must end every connection that is
// not carrying an answer: one idle between requests, one that has sent nothing yet, and one whose
// streamed answer ends because of the shutdown (its headers said keep-alive). Nothing is left for the
// deadline to cut (`http_close_forced`), and every client sees its connection closed.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import net from 'node:net';
import { Writable } from 'node:stream';
import { after, test } from 'node:test';
import { loadConfig } from '../../daemon/core/config.js';
import { createLogger } from '../../daemon/core/log.js';
import { createMetrics } from '../../daemon/core/metrics.js';
import { KeyRing } from '../../daemon/http/auth.js';
import { routesIn } from '../../daemon/http/route.js';
import { HttpServer } from '../../daemon/http/server.js';
import { tempDir } from '../kit/cleanup.js';
import { TEST_TOKEN } from '../kit/daemon.js';
import { until } from '../kit/wait.js';

const logLines: Record<string, unknown>[] = [];
const sink = new Writable({
  write(chunk: Buffer, _enc, cb) {
    for (const l of chunk.toString().split('\n').filter(Boolean)) logLines.push(JSON.parse(l) as Record<string, unknown>);
    cb();
  },
});
const stateDir = tempDir();
let server: HttpServer | undefined;
after(() => {
  server?.destroy(); // a failed close() must not keep the file waiting for its deadline
  rmSync(stateDir, { recursive: true, force: true });
});

const route = routesIn('test/http/shutdown.test.ts');
const routes = [
  route({
    method: 'GET',
    path: '/ping',
    scope: null,
    doc: () => ({ summary: 'test', responses: { 200: { description: 'pong' } } }),
    handler: async () => ({ status: 200, body: { pong: true } }),
  }),
  route({
    method: 'GET',
    path: '/stream',
    scope: null,
    doc: () => ({ summary: 'test', responses: { 200: { description: 'a stream until the request is aborted' } } }),
    handler: async (ctx) => {
      ctx.res.writeHead(200, { 'content-type': 'text/plain' });
      ctx.res.write('open\n');
      await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
      ctx.res.end('bye\n');
      return null;
    },
  }),
];

/** A raw client connection: what it received, and whether the server closed it. */
function connect(port: number): Promise<{ socket: net.Socket; text: () => string; closed: Promise<void> }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let text = '';
    socket.on('data', (b: Buffer) => (text += b.toString('latin1')));
    socket.on('error', () => undefined);
    const closed = new Promise<void>((r) => socket.once('close', () => r()));
    socket.once('connect', () => resolve({ socket, text: () => text, closed }));
    socket.once('error', reject);
  });
}

test('close() ends idle, silent and stream-ended keep-alive connections itself; the deadline cuts nothing', { timeout: 60_000 }, async () => {
  const config = loadConfig({ BROWSERD_LISTEN: '127.0.0.1:0', BROWSERD_STATE_DIR: stateDir, BROWSERD_TOKEN: TEST_TOKEN, PATH: process.env.PATH });
  const log = createLogger('info', sink);
  server = new HttpServer({ config, log, metrics: createMetrics(), keyring: KeyRing.create(config, log), routes });
  const { port } = await server.listen();
  const get = (path: string): string => `GET ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: keep-alive\r\n\r\n`;

  const silent = await connect(port);
  const idle = await connect(port);
  idle.socket.write(get('/ping'));
  // Accepted in order: once the later connection is answered, the silent one is the server's too.
  await until('the idle connection answered', () => idle.text().includes('"pong":true'), 10_000, 5);
  assert.match(idle.text(), /\r\nkeep-alive: timeout=120\r\n/i);
  const streaming = await connect(port);
  streaming.socket.write(get('/stream'));
  await until('the stream open', () => streaming.text().includes('open'), 10_000, 5);
  assert.match(streaming.text(), /\r\nconnection: keep-alive\r\n/i, 'its headers said keep-alive');

  // A deadline far past the test's own timeout: close() must not need it.
  await server.close(10 * 60_000);
  await Promise.all([silent.closed, idle.closed, streaming.closed]);
  assert.match(streaming.text(), /bye\n/, 'the stream ended with its last words before the connection closed');
  assert.deepEqual(logLines.filter((l) => l.event === 'http_close_forced'), []);
});
