// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// @long: one of the slowest files (10 s or more alone), started first by test/run.mjs.
// No request can kill the daemon: every route that takes a body (read from the daemon's own OpenAPI
// document, so a new route is covered the day it is added) is fed truncated, stalled, cut-short
// chunked, garbage and malformed-multipart bodies from a fixed seed; after each, the daemon still
// answers /healthz with the same pid, and every answer it gave is in the contract's shape.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { TEST_TOKEN, startDaemon, type Daemon } from '../kit/daemon.js';

const SEED = 0x5eed1234;
let d: Daemon;
let routes: { method: string; path: string; mediaType: string }[] = [];

before(async () => {
  d = await startDaemon();
  const doc = (await (await fetch(`${d.url}/openapi.json`)).json()) as {
    paths: Record<string, Record<string, { requestBody?: { content: Record<string, unknown> } }>>;
  };
  for (const [p, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      if (op.requestBody === undefined) continue;
      routes.push({ method: method.toUpperCase(), path: p, mediaType: Object.keys(op.requestBody.content)[0] ?? 'application/json' });
    }
  }
  routes = routes.sort((a, b) => `${a.method} ${a.path}`.localeCompare(`${b.method} ${b.path}`));
});
after(() => d.cleanup());

/** mulberry32: a small seeded PRNG, so a failure can be replayed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function bytes(rand: () => number, n: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = Math.floor(rand() * 256);
  return b;
}

/** Path parameters: the session, and made-up ids (an unknown process or proxy is fine: the body is what is fuzzed). */
function concrete(p: string): string {
  return p.replace('{id}', p.startsWith('/proxies') ? '00000000-0000-4000-8000-000000000000' : 'local').replace(/\{[a-z_]+\}/g, 'fuzz-1');
}

interface Sent {
  text: string;
}

/** Writes `head` and `body` to a raw socket; `cut`: close after that many body bytes; `stallMs`: wait before closing. */
function send(head: string, body: Buffer, opts: { cut?: number; stallMs?: number }): Promise<Sent> {
  const { hostname, port } = new URL(d.url);
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname);
    let text = '';
    const done = (): void => resolve({ text });
    socket.on('data', (c) => (text += c.toString('latin1')));
    socket.on('error', done);
    socket.on('close', done);
    socket.write(head);
    const part = opts.cut === undefined ? body : body.subarray(0, opts.cut);
    socket.write(part);
    if (opts.cut === undefined && opts.stallMs === undefined) return; // a whole request: wait for the answer and the close
    setTimeout(() => socket.destroy(), opts.stallMs ?? 20);
    setTimeout(() => socket.destroy(), 5000);
  });
}

function headers(method: string, path: string, contentType: string, extra: string[]): string {
  return [`${method} ${path} HTTP/1.1`, `host: ${new URL(d.url).host}`, `authorization: Bearer ${TEST_TOKEN}`, `content-type: ${contentType}`, 'connection: close', ...extra, '', ''].join('\r\n');
}

/** Every answer that came back is in the contract's shape (or the socket was cut before one). */
function checkAnswer(sent: Sent, what: string): void {
  if (sent.text === '') return;
  const m = /^HTTP\/1\.1 (\d{3})/.exec(sent.text);
  assert.ok(m, `${what}: not HTTP: ${sent.text.slice(0, 200)}`);
  const status = Number(m[1]);
  if (status < 400) return;
  assert.match(sent.text, /x-should-retry: (true|false)/i, `${what}: ${sent.text.slice(0, 300)}`);
  const body = sent.text.slice(sent.text.indexOf('\r\n\r\n') + 4);
  if (body === '' || /transfer-encoding: chunked/i.test(sent.text)) return;
  const json = JSON.parse(body) as { code?: unknown; message?: unknown };
  assert.equal(typeof json.code, 'string', `${what}: ${body}`);
  assert.equal(typeof json.message, 'string', `${what}: ${body}`);
}

async function stillServing(what: string): Promise<void> {
  assert.equal(d.proc.exitCode, null, `the daemon died after ${what}; stderr: ${d.stderr.slice(-500)}`);
  const res = await fetch(`${d.url}/healthz`);
  assert.equal(res.status, 200, `after ${what}`);
  await res.arrayBuffer();
}

/** One round: the seven bodies for one route, sent at once; then the daemon must still serve. */
interface Round {
  label: string;
  cases: [string, () => Promise<Sent>][];
}

/** Every round, drawn from the seeded PRNG in a fixed order (so a failure replays), before any is sent. */
function plan(): Round[] {
  const rand = prng(SEED);
  const rounds: Round[] = [];
  for (const r of routes) {
    const path = concrete(r.path);
    const boundary = `----fuzz${Math.floor(rand() * 1e9)}`;
    const multipart = r.mediaType.startsWith('multipart/');
    const contentType = multipart ? `multipart/form-data; boundary=${boundary}` : r.mediaType;
    for (let i = 0; i < 8; i++) {
      const size = 1 + Math.floor(rand() * 4096);
      const garbage = bytes(rand, size);
      const json = Buffer.from(JSON.stringify({ data_b64: 'QUJD', command: 'true', url: 'http://x', name: 'n', signal: 'TERM' }).slice(0, 1 + Math.floor(rand() * 60)));
      const filePart = Buffer.concat([
        Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="extensions[0][zip_file]"; filename="a.zip"\r\nContent-Type: application/zip\r\n\r\n`),
        garbage,
      ]);
      const stallMs = 50 + Math.floor(rand() * 100);
      rounds.push({
        label: `${r.method} ${r.path} round ${i}`,
        cases: [
          ['garbage', () => send(headers(r.method, path, contentType, [`content-length: ${size}`]), garbage, {})],
          ['truncated', () => send(headers(r.method, path, contentType, [`content-length: ${size * 2}`]), garbage, { cut: size })],
          ['stalled', () => send(headers(r.method, path, contentType, [`content-length: ${size * 2}`]), garbage, { cut: Math.floor(size / 2), stallMs })],
          ['chunked cut short', () => send(headers(r.method, path, contentType, ['transfer-encoding: chunked']), Buffer.concat([Buffer.from(`${(size * 2).toString(16)}\r\n`), garbage]), { cut: size })],
          ['half a JSON', () => send(headers(r.method, path, 'application/json', [`content-length: ${json.length}`]), json, {})],
          ['multipart ending inside a file part', () => send(headers(r.method, path, `multipart/form-data; boundary=${boundary}`, [`content-length: ${filePart.length}`]), filePart, {})],
          [
            'multipart chunked cut short',
            () => send(headers(r.method, path, `multipart/form-data; boundary=${boundary}`, ['transfer-encoding: chunked']), Buffer.concat([Buffer.from(`${(filePart.length * 2).toString(16)}\r\n`), filePart]), { cut: filePart.length }),
          ],
        ],
      });
    }
  }
  return rounds;
}

/** Rounds of different routes run side by side (the daemon serves many clients at once anyway). */
const ROUNDS_AT_ONCE = 8;

test('every body-taking route survives truncated, stalled, cut-short chunked and garbage bodies', async () => {
  assert.ok(routes.length >= 7, `found ${routes.length} routes with a body`);
  const queue = plan();
  const worker = async (): Promise<void> => {
    for (let round = queue.shift(); round !== undefined; round = queue.shift()) {
      const sent = round.cases.map(([what, go]) => [what, go()] as const);
      for (const [what, answer] of sent) checkAnswer(await answer, `${round.label}: ${what}`);
      await stillServing(round.label);
    }
  };
  await Promise.all(Array.from({ length: ROUNDS_AT_ONCE }, worker));
});

test('the daemon kept its pid and serves a normal request afterwards', async () => {
  const res = await d.fetch('/browsers/local/process/exec', { method: 'POST', json: { command: 'echo', args: ['alive'] } });
  assert.equal(res.status, 200);
  assert.equal(Buffer.from(((await res.json()) as { stdout_b64: string }).stdout_b64, 'base64').toString(), 'alive\n');
  assert.equal(d.proc.exitCode, null);
});
