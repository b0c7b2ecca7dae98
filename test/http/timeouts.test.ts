// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The API server's request timeouts, through the real daemon with a short idle timeout
// (BROWSERD_REQUEST_IDLE_TIMEOUT_MS): an upload that takes several times the timeout but keeps
// sending is never cut (no whole-request limit: Node's default cut uploads at 300 s); one whose
// body stops arriving gets 408 `timeout` and its connection closed; so does a request whose
// headers stop arriving. The client paces its own bytes (the pace is what is tested; nothing
// asserts how long the daemon takes).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startDaemon, type Daemon } from '../kit/daemon.js';
import { until } from '../kit/wait.js';

const IDLE_MS = 2000;
/** The steady upload: a chunk every GAP_MS (well inside the timeout), CHUNKS of them: 3× the timeout in all. */
const GAP_MS = 100;
const CHUNKS = 60;
const CHUNK = Buffer.alloc(1024, 'x');
/** A stalled request never answered is a failure, not a hang (Node's own defaults answer after 60-300 s); far above IDLE_MS. */
const HANG_MS = 45_000;

let d: Daemon;

before(async () => {
  d = await startDaemon({ env: { BROWSERD_REQUEST_IDLE_TIMEOUT_MS: String(IDLE_MS) } });
});
after(async () => {
  await d.cleanup();
});

/** A raw connection: what the server sent until it closed it. */
function connect(): { socket: net.Socket; reply: Promise<string> } {
  const { hostname, port } = new URL(d.url);
  const socket = net.connect(Number(port), hostname);
  const reply = new Promise<string>((resolve) => {
    let text = '';
    socket.on('data', (b: Buffer) => (text += b.toString('latin1')));
    socket.on('error', () => {}); // a reset after the answer: the answer is what counts
    socket.on('close', () => resolve(text));
  });
  return { socket, reply };
}

function head(file: string, length: number): string {
  return [
    `PUT /browsers/local/fs/write_file?path=${encodeURIComponent(file)} HTTP/1.1`,
    'host: 127.0.0.1',
    `authorization: Bearer ${d.token}`,
    'content-type: application/octet-stream',
    `content-length: ${length}`,
    'connection: close',
    '',
    '',
  ].join('\r\n');
}

function write(socket: net.Socket, data: string | Buffer): Promise<void> {
  return new Promise((resolve, reject) => socket.write(data, (err) => (err ? reject(err) : resolve())));
}

test('an upload slower than the idle timeout but steadily sending is written whole', async () => {
  const file = path.join(`${d.stateDir}-downloads`, 'steady.bin');
  const { socket, reply } = connect();
  await write(socket, head(file, CHUNK.length * CHUNKS));
  for (let i = 0; i < CHUNKS; i++) {
    await sleep(GAP_MS); // the client's pace, below the timeout
    await write(socket, CHUNK);
  }
  const text = await reply;
  assert.match(text, /^HTTP\/1\.1 204 /, text);
  assert.equal(readFileSync(file).length, CHUNK.length * CHUNKS);
});

test('an upload whose body stops arriving: 408 timeout naming the setting, retry safe, connection closed; nothing written', { timeout: HANG_MS }, async () => {
  const file = path.join(`${d.stateDir}-downloads`, 'stalled.bin');
  const { socket, reply } = connect();
  await write(socket, head(file, CHUNK.length * 4));
  await write(socket, CHUNK); // then nothing
  const text = await reply;
  assert.match(text, /^HTTP\/1\.1 408 /, text);
  assert.match(text, /\r\nx-should-retry: true\r\n/i);
  assert.match(text, /\r\nconnection: close\r\n/i);
  const body = JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as { code: string; message: string };
  assert.equal(body.code, 'timeout');
  assert.match(body.message, /BROWSERD_REQUEST_IDLE_TIMEOUT_MS/);
  assert.throws(() => readFileSync(file), { code: 'ENOENT' });
  const line = await d.waitLog((l) => l.event === 'request' && l.route === '/browsers/{id}/fs/write_file' && l.status === 408);
  assert.equal(line.method, 'PUT');
});

test('a request whose headers stop arriving: 408 timeout, connection closed', { timeout: HANG_MS }, async () => {
  const { socket, reply } = connect();
  await write(socket, 'GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n'); // the headers never end
  const text = await reply;
  assert.match(text, /^HTTP\/1\.1 408 /, text);
  assert.match(text, /"code":"timeout"/);
});

test('a keep-alive connection waits longer than clients keep theirs: Keep-Alive says 120 s, and a request after 6 s idle is answered on it', async () => {
  const { socket, reply } = connect();
  let text = '';
  socket.on('data', (b: Buffer) => (text += b.toString('latin1')));
  const get = 'GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: keep-alive\r\n\r\n';
  const answers = (): number => text.split('HTTP/1.1 200').length - 1;
  await write(socket, get);
  await until('the first answer', () => answers() === 1, 30_000, 10);
  assert.match(text, /\r\nkeep-alive: timeout=120\r\n/i);
  // Past Node's default (5 s), which clients that ignore the hint (Go's transport: 90 s) would race.
  await sleep(6000);
  assert.ok(!socket.destroyed && socket.readyState === 'open', 'the daemon kept the connection');
  await write(socket, get);
  await until('the second answer on the same connection', () => answers() === 2, 30_000, 10);
  socket.end();
  await reply;
});

test('the daemon serves on afterwards', async () => {
  const res = await d.fetch('/healthz');
  assert.equal(res.status, 200);
  await res.text();
  assert.deepEqual(
    d.logs.filter((l) => l.event === 'internal_error'),
    [],
    'an ended request is no internal error',
  );
});
