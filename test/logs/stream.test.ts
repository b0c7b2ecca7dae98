// @long: one of the slowest files (10 s or more alone), started first by test/run.mjs.
// Log streams through the SDK, against the real daemon and the real Chromium: a request appears on
// the `browserd` stream, Chromium's stderr lines on the `chromium` stream (at log level info), a
// file appended by exec on a `path` stream; follow=false, the backlog of a file, the path rules
// (the state directory is refused, by real path too), query validation, the stream limit, the scope.
import assert from 'node:assert/strict';
import { chownSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { after, before, test } from 'node:test';
import Kernel from '@onkernel/sdk';
import type { LogEvent } from '@onkernel/sdk/resources/shared';
import { expectError } from '../helpers/http.js';
import { waitBrowser } from '../kit/browser.js';
import { agentIds } from '../kit/agent.js';
import { tempDir } from '../kit/cleanup.js';
import { keysFile, TEST_TOKEN, startDaemon, type Daemon } from '../kit/daemon.js';
import { until } from '../kit/wait.js';

const BACKLOG = 1024;
const MAX_STREAMS = 3;
const READER = 'logs-reader-token-0123456789abcdef';
const dir = tempDir('browserd-logs-');
let d: Daemon;
let client: Kernel;

type Stream = Awaited<ReturnType<Kernel['browsers']['logs']['stream']>>;

/** The first event for which `pred` holds (the stream is closed after), or an error after `timeoutMs`. */
async function firstMatching(stream: Stream, pred: (e: LogEvent) => boolean, timeoutMs = 30_000): Promise<{ event: LogEvent; at: number }> {
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    stream.controller.abort();
  }, timeoutMs);
  try {
    for await (const e of stream) if (pred(e)) return { event: e, at: performance.now() };
    throw new Error(timedOut ? `no matching event within ${timeoutMs} ms` : 'the stream ended without a matching event');
  } finally {
    clearTimeout(timer);
    stream.controller.abort();
  }
}

/** Every event of a stream that ends by itself (follow=false). */
async function all(stream: Stream): Promise<LogEvent[]> {
  const out: LogEvent[] = [];
  for await (const e of stream) out.push(e);
  return out;
}

before(async () => {
  d = await startDaemon({
    autostart: true,
    env: {
      BROWSERD_LOG_LEVEL: 'info',
      BROWSERD_KEYS_FILE: keysFile([{ id: 'reader', token: READER, scopes: ['browser:read'] }]),
      BROWSERD_CHROMIUM_FLAGS: '--enable-logging=stderr',
      BROWSERD_LOG_FILE_BACKLOG_BYTES: String(BACKLOG),
      BROWSERD_LOG_MAX_STREAMS: String(MAX_STREAMS),
    },
  });
  await waitBrowser(d, (s) => s.state === 'ready', 'ready');
  client = new Kernel({ apiKey: TEST_TOKEN, baseURL: d.url, maxRetries: 0, timeout: 120_000 });
});
after(() => d.cleanup());

test('a request to the daemon appears on the browserd stream (its own JSON log line)', async (t) => {
  const stream = await client.browsers.logs.stream('local', { source: 'supervisor', supervisor_process: 'browserd' });
  const marker = `marker-${process.pid}-${Date.now()}`;
  const sent = performance.now();
  const res = await d.fetch('/browsers/local', { headers: { 'x-request-id': marker } });
  const answered = performance.now();
  assert.equal(res.status, 200);
  await res.text();
  const { event, at } = await firstMatching(stream, (e) => e.message.includes(marker));
  assert.equal(event.event, 'log');
  assert.ok(!Number.isNaN(Date.parse(event.timestamp)));
  const line = JSON.parse(event.message) as Record<string, unknown>;
  assert.equal(line.event, 'request');
  assert.equal(line.req_id, marker);
  assert.equal(line.route, '/browsers/{id}');
  t.diagnostic(`request sent → its line on the stream: ${(at - sent).toFixed(1)} ms; answer → line: ${(at - answered).toFixed(1)} ms`);
});

test('follow=false: the recent lines the ring holds, then the end', async () => {
  const events = await all(await client.browsers.logs.stream('local', { source: 'supervisor', supervisor_process: 'browserd', follow: false }));
  assert.ok(events.some((e) => (JSON.parse(e.message) as { event?: string }).event === 'listening'), 'history since the start');
  for (const e of events) assert.deepEqual(Object.keys(e).sort(), ['event', 'message', 'timestamp']);
});

test("Chromium's stderr lines appear on the chromium stream, at log level info", async () => {
  const stream = await client.browsers.logs.stream('local', { source: 'supervisor', supervisor_process: 'chromium' });
  const marker = `chromium-marker-${Date.now()}`;
  // --enable-logging=stderr makes Chromium write a page's console messages to its stderr.
  const r = await client.browsers.playwright.execute('local', { code: `await page.evaluate(() => console.log('${marker}'))` });
  assert.equal(r.success, true, r.error);
  const { event } = await firstMatching(stream, (e) => e.message.includes(marker));
  assert.match(event.message, /CONSOLE/);
  assert.ok(!d.logs.some((l) => l.event === 'chromium_stderr'), 'at info the daemon does not forward them to its own log');
});

test('a file appended by exec appears on a path stream', async () => {
  const file = path.join(dir, 'app.log');
  writeFileSync(file, 'first\n');
  chownSync(file, agentIds().uid, agentIds().gid); // the exec below runs as the agent user
  chownSync(dir, agentIds().uid, agentIds().gid);
  const stream = await client.browsers.logs.stream('local', { source: 'path', path: file });
  const exec = await client.browsers.process.exec('local', { command: 'sh', args: ['-c', `echo appended-by-exec >> '${file}'`] });
  assert.equal(exec.exit_code, 0);
  const seen: string[] = [];
  const { event } = await firstMatching(stream, (e) => {
    seen.push(e.message);
    return e.message === 'appended-by-exec';
  });
  assert.equal(event.event, 'log');
  assert.deepEqual(seen, ['first', 'appended-by-exec']);
});

test('follow=false on a file ends at its end; a last line without a newline is sent; only the last BROWSERD_LOG_FILE_BACKLOG_BYTES, from a line start', async () => {
  const small = path.join(dir, 'small.log');
  writeFileSync(small, 'one\ntwo\r\nthree');
  const events = await all(await client.browsers.logs.stream('local', { source: 'path', path: small, follow: false }));
  assert.deepEqual(events.map((e) => e.message), ['one', 'two', 'three']);
  const big = path.join(dir, 'big.log');
  const lines = Array.from({ length: 100 }, (_, i) => `line-${String(i).padStart(3, '0')}-${'x'.repeat(90)}`);
  writeFileSync(big, `${lines.join('\n')}\n`);
  const tail = (await all(await client.browsers.logs.stream('local', { source: 'path', path: big, follow: false }))).map((e) => e.message);
  assert.ok(tail.length > 0 && tail.length <= Math.ceil(BACKLOG / 100), `${tail.length} lines`);
  assert.deepEqual(tail, lines.slice(lines.length - tail.length), 'whole lines, the last ones');
});

test("the path rules: the state directory is refused (also by real path and when missing), /proc too; 404, 409, 400", async () => {
  const secret = path.join(d.stateDir, 'secret.txt');
  writeFileSync(secret, 'do not read\n');
  const link = path.join(dir, 'innocent.log');
  symlinkSync(secret, link);
  const stream = (p: string): Promise<Response> => d.fetch(`/browsers/local/logs/stream?source=path&path=${encodeURIComponent(p)}&follow=false`);
  for (const p of [secret, link, path.join(d.stateDir, 'missing.txt'), '/proc/self/environ']) {
    await expectError(await stream(p), 403, 'path_forbidden');
  }
  // The SDK surfaces the same answer as an error.
  await assert.rejects(client.browsers.logs.stream('local', { source: 'path', path: secret, follow: false }), (err: { status?: number }) => err.status === 403);
  await expectError(await stream(path.join(dir, 'nope.log')), 404, 'not_found');
  mkdirSync(path.join(dir, 'sub'), { recursive: true });
  await expectError(await stream(path.join(dir, 'sub')), 409, 'is_a_directory');
  await expectError(await stream('relative.log'), 400, 'bad_request');
});

test('query parameters: source is required, each source takes its own parameters, unknown ones are refused', async () => {
  const q = (query: string): Promise<Response> => d.fetch(`/browsers/local/logs/stream?${query}`);
  await expectError(await q(''), 400, 'bad_request');
  await expectError(await q('source=other'), 400, 'bad_request');
  await expectError(await q('source=supervisor'), 400, 'bad_request');
  await expectError(await q('source=supervisor&supervisor_process=nginx'), 400, 'bad_request');
  await expectError(await q('source=supervisor&supervisor_process=browserd&path=/tmp/x'), 400, 'bad_request');
  await expectError(await q('source=path'), 400, 'bad_request');
  await expectError(await q('source=path&path=/tmp/x&supervisor_process=chromium'), 400, 'bad_request');
  const unknown = await expectError(await q('source=supervisor&supervisor_process=browserd&lines=10'), 400, 'bad_request');
  assert.match(String(unknown.message), /lines: is not a query parameter/);
  await expectError(await q('source=supervisor&supervisor_process=browserd&follow=maybe'), 400, 'bad_request');
});

test('at most BROWSERD_LOG_MAX_STREAMS streams at once: 429 past it; the scope is logs:read', async () => {
  const openStreams = async (): Promise<number> => {
    const text = await (await d.fetch('/metrics')).text();
    return [...text.matchAll(/^browserd_log_streams\{[^}]*\} (\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
  };
  await until('earlier streams closed', async () => ((await openStreams()) === 0 ? true : undefined));
  const streams = [];
  for (let i = 0; i < MAX_STREAMS; i++) streams.push(await client.browsers.logs.stream('local', { source: 'supervisor', supervisor_process: 'chromium' }));
  const res = await d.fetch('/browsers/local/logs/stream?source=supervisor&supervisor_process=browserd');
  await expectError(res, 429, 'limit_exceeded');
  assert.equal(res.headers.get('x-should-retry'), 'true');
  for (const s of streams) s.controller.abort();
  await until('streams closed', async () => ((await openStreams()) === 0 ? true : undefined));
  const again = await client.browsers.logs.stream('local', { source: 'supervisor', supervisor_process: 'chromium' });
  again.controller.abort();
  const forbidden = await d.fetch('/browsers/local/logs/stream?source=supervisor&supervisor_process=browserd', { headers: { authorization: `Bearer ${READER}` } });
  const body = await expectError(forbidden, 403, 'forbidden');
  assert.deepEqual(body.details, [{ code: 'missing_scope', message: 'logs:read' }]);
});
