// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The forwarder's own relay of absolute-form requests (exchange.ts, head.ts, chunked.ts): the
// parsers alone (every split of the bytes), then through the real daemon's forwarder to a raw
// loopback origin that writes exactly the bytes of each case: every way an answer's body can end
// (Content-Length, chunked with extensions and trailers, the close, none for HEAD and 204), an
// interim 100 before the answer, request bodies upstream (Content-Length and chunked), keep-alive
// to two origins on one connection, and broken answers (502 before the head, a closed connection
// after it), and a CONNECT tunnel's bytes.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { ChunkedDecoder, ChunkedError, MAX_CHUNK_LINE } from '../../daemon/proxies/forwarder/chunked.js';
import { answerFraming, HeadError, HeadReader, MAX_HEAD_BYTES } from '../../daemon/proxies/upstream/head.js';
import { forwarderPort, rawConnection } from '../helpers/proxies/forwarder.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';

/** Decodes `wire` fed in pieces split at `cuts`; the data and how many bytes were the body's. */
function decode(wire: Buffer, cuts: number[]): { data: string; used: number; done: boolean } {
  const dec = new ChunkedDecoder();
  let data = '';
  let used = 0;
  let from = 0;
  for (const to of [...cuts, wire.length]) {
    if (dec.done) break;
    used += dec.push(wire.subarray(from, to), (p) => (data += p.toString('latin1')));
    from = to;
  }
  return { data, used, done: dec.done };
}

test('chunked: every split of the bytes decodes the same; extensions skipped, trailers dropped, the rest left over', () => {
  const body = '5;name=value\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nx-trailer: 1\r\n\r\n';
  const wire = Buffer.from(`${body}NEXT`, 'latin1');
  for (let a = 0; a <= wire.length; a++) {
    for (const b of [a, Math.min(wire.length, a + 1), Math.min(wire.length, a + 7)]) {
      const r = decode(wire, [a, b]);
      assert.deepEqual(r, { data: 'helloabcdefghijklmnopqrstuvwxyz', used: body.length, done: true }, `cut at ${a}, ${b}`);
    }
  }
});

test('chunked: malformed or oversized framing is an error, never data', () => {
  for (const bad of ['x\r\n', '5\r\nhelloX\r\n', '5\nhello', '1234567890123\r\n', `1;${'e'.repeat(MAX_CHUNK_LINE)}\r\n`, '0\r\nx\ry']) {
    assert.throws(() => new ChunkedDecoder().push(Buffer.from(bad, 'latin1'), () => undefined), ChunkedError, JSON.stringify(bad.slice(0, 20)));
  }
});

test('answer heads: parsed across splits, bytes after the head kept; malformed, too long or ambiguous framing refused', () => {
  const wire = Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX-A:  b \r\n\r\nabc', 'latin1');
  for (let cut = 0; cut <= wire.length; cut++) {
    const r = new HeadReader();
    const first = r.push(wire.subarray(0, cut));
    const got = first ?? r.push(wire.subarray(cut));
    assert.ok(got !== null, `cut ${cut}`);
    // Done with the first piece: the second is all body.
    const rest = first !== null ? Buffer.concat([first.rest, wire.subarray(cut)]) : got.rest;
    assert.deepEqual([got.head.status, got.head.reason, got.head.raw, rest.toString()], [200, 'OK', ['Content-Length', '3', 'X-A', 'b'], 'abc'], `cut ${cut}`);
    assert.deepEqual(answerFraming('GET', got.head), { kind: 'length', length: 3 });
    assert.deepEqual(answerFraming('HEAD', got.head), { kind: 'none' });
  }
  const head = (text: string) => new HeadReader().push(Buffer.from(`${text}\r\n\r\n`, 'latin1'));
  for (const bad of ['HTTP/2 200 OK', 'HTTP/1.1 20 OK', 'HTTP/1.1 200 OK\r\nno colon', 'HTTP/1.1 200 OK\r\n folded: x', 'HTTP/1.1 200 OK\r\nbad name: x', 'HTTP/1.1 200 OK\r\nx: a\x01b']) {
    assert.throws(() => head(bad), HeadError, JSON.stringify(bad));
  }
  assert.throws(() => new HeadReader().push(Buffer.alloc(MAX_HEAD_BYTES + 1, 0x61)), /longer than/);
  const framing = (fields: string) => answerFraming('GET', head(`HTTP/1.1 200 OK\r\n${fields}`)?.head ?? assert.fail());
  assert.throws(() => framing('Content-Length: 3\r\nTransfer-Encoding: chunked'), /both/);
  assert.throws(() => framing('Content-Length: 3\r\nContent-Length: 4'), /invalid Content-Length/);
  assert.throws(() => framing('Content-Length: -1'), /invalid Content-Length/);
  assert.deepEqual(framing('Content-Length: 3, 3'), { kind: 'length', length: 3 });
  assert.deepEqual(framing('Transfer-Encoding: gzip, chunked'), { kind: 'chunked' });
  assert.deepEqual(framing('Transfer-Encoding: gzip'), { kind: 'close' });
  assert.deepEqual(framing('X: y'), { kind: 'close' });
});

/** What the raw origin answers per path (the exact bytes), and what it received. */
const ANSWERS: Record<string, string> = {
  '/length': 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Case: length\r\n\r\nhello',
  '/chunked': 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: x-t\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nx-t: 1\r\n\r\n',
  '/close': 'HTTP/1.0 200 OK\r\nX-Case: close\r\n\r\nuntil the end',
  '/continue': 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok',
  '/nocontent': 'HTTP/1.1 204 No Content\r\nX-Case: 204\r\n\r\n',
  '/head': 'HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n',
  '/garbage': 'SSH-2.0-OpenSSH\r\n\r\n',
  '/bigcl': 'HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab',
  '/truncated': 'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this',
  '/longhead': `HTTP/1.1 200 OK\r\nX-Long: ${'a'.repeat(MAX_HEAD_BYTES)}\r\n\r\n`,
};

interface Received {
  head: string;
  body: Buffer;
}

let d: Daemon;
let fp: number;
let origin: net.Server;
let originPort: number;
const received: Received[] = [];

/** Reads one request (head and a Content-Length or chunked body, undecoded) and writes the case's bytes, then closes. */
function startRawOrigin(): Promise<net.Server> {
  const server = net.createServer((s) => {
    let buf = Buffer.alloc(0);
    s.on('data', (c: Buffer) => {
      buf = Buffer.concat([buf, c]);
      const end = buf.indexOf('\r\n\r\n');
      if (end === -1) return;
      const head = buf.toString('latin1', 0, end);
      const body = buf.subarray(end + 4);
      const cl = /\r\ncontent-length: (\d+)/i.exec(head);
      const complete = cl !== null ? body.length >= Number(cl[1]) : /\r\ntransfer-encoding: chunked/i.test(head) ? body.includes('0\r\n\r\n') : true;
      if (!complete) return;
      s.removeAllListeners('data');
      received.push({ head, body });
      const path = (/^\S+ (\S+)/.exec(head)?.[1] ?? '').replace(/\?.*/, '');
      if (path === '/pattern/length' || path === '/pattern/chunked') return sendPattern(s, path.endsWith('chunked'));
      s.end(ANSWERS[path] ?? `HTTP/1.1 200 OK\r\nContent-Length: ${path.length}\r\n\r\n${path}`);
    });
    s.on('error', () => undefined);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/** Random bytes (an odd size): a reused read buffer overwritten too early would show in their hash. */
const PATTERN = randomBytes(24 * 1024 * 1024 + 7);

/** PATTERN as the answer, in pieces of varying sizes (chunks of varying sizes when chunked), pausing for drain. */
function sendPattern(s: net.Socket, chunked: boolean): void {
  s.write(`HTTP/1.1 200 OK\r\n${chunked ? 'Transfer-Encoding: chunked' : `Content-Length: ${PATTERN.length}`}\r\n\r\n`);
  let at = 0;
  let size = 1000;
  const pump = (): void => {
    while (at < PATTERN.length) {
      const piece = PATTERN.subarray(at, Math.min(PATTERN.length, at + size));
      at += piece.length;
      size = (size * 7 + 4099) % 150_000 + 1;
      const ok = chunked ? s.write(Buffer.concat([Buffer.from(`${piece.length.toString(16)};x=1\r\n`), piece, Buffer.from('\r\n')])) : s.write(piece);
      if (!ok) return void s.once('drain', pump);
    }
    s.end(chunked ? '0\r\n\r\n' : '');
  };
  pump();
}

before(async () => {
  origin = await startRawOrigin();
  originPort = (origin.address() as net.AddressInfo).port;
  // forwarder-uid=0: the test's own clients (root) stand in for Chromium (the agent user). No proxy: loopback targets go direct.
  d = await startDaemon({ env: { BROWSERD_TEST_HOOKS: 'forwarder-uid=0' } });
  fp = await forwarderPort(d);
});
after(async () => {
  await d?.cleanup();
  origin?.close();
});

/** One request on a new connection to the forwarder; the whole answer as text once the forwarder closed the connection. */
async function exchange(request: string): Promise<string> {
  const conn = await rawConnection(fp);
  conn.socket.write(request);
  await conn.closed;
  return conn.received();
}

const url = (path: string): string => `http://127.0.0.1:${originPort}${path}`;
const get = (path: string, method = 'GET'): string => `${method} ${url(path)} HTTP/1.1\r\nHost: 127.0.0.1:${originPort}\r\nConnection: close\r\n\r\n`;

test('each way an answer body ends reaches the browser whole, framed again; hop-by-hop fields dropped', async () => {
  const length = await exchange(get('/length'));
  assert.match(length, /^HTTP\/1\.1 200 OK\r\n/);
  assert.match(length, /\r\nX-Case: length\r\n/);
  assert.match(length, /\r\nContent-Length: 5\r\n[^]*\r\n\r\nhello$/);

  const chunked = await exchange(get('/chunked'));
  assert.match(chunked, /\r\nTransfer-Encoding: chunked\r\n/i);
  assert.doesNotMatch(chunked, /ext=1|x-t: 1|\r\nTrailer:/i, 'extensions, trailers and the Trailer field are not passed on');
  assert.equal(dechunk(chunked.slice(chunked.indexOf('\r\n\r\n') + 4)), 'hello world');

  const close = await exchange(get('/close'));
  assert.match(close, /\r\nX-Case: close\r\n/);
  assert.equal(dechunk(close.slice(close.indexOf('\r\n\r\n') + 4)), 'until the end');

  assert.match(await exchange(get('/continue')), /^HTTP\/1\.1 201 Created\r\n[^]*\r\n\r\nok$/, 'the interim 100 is dropped, the final answer relayed');
  assert.match(await exchange(get('/nocontent')), /^HTTP\/1\.1 204 No Content\r\n[^]*X-Case: 204\r\n[^]*\r\n\r\n$/);
  assert.match(await exchange(get('/head', 'HEAD')), /^HTTP\/1\.1 200 OK\r\n[^]*Content-Length: 1000\r\n[^]*\r\n\r\n$/, 'a HEAD answer has no body');
});

test('request bodies go upstream framed as the browser sent them; the request head is sent once, with Connection: close', async () => {
  const n = received.length;
  await exchange(`POST ${url('/upload')} HTTP/1.1\r\nHost: x.test\r\nContent-Length: 11\r\nProxy-Connection: keep-alive\r\nConnection: close\r\n\r\nhello world`);
  await exchange(`POST ${url('/upload')} HTTP/1.1\r\nHost: x.test\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n`);
  const [plain, chunked] = received.slice(n) as [Received, Received];
  assert.match(plain.head, /^POST \/upload HTTP\/1\.1\r\nHost: x\.test\r\nContent-Length: 11\r\nConnection: close$/);
  assert.equal(plain.body.toString(), 'hello world');
  assert.match(chunked.head, /^POST \/upload HTTP\/1\.1\r\nHost: x\.test\r\nTransfer-Encoding: chunked\r\nConnection: close$/);
  assert.equal(dechunk(chunked.body.toString('latin1')), 'hello world');
});

test('keep-alive: a second request on the same connection is forwarded on its own, to where it names', async () => {
  const conn = await rawConnection(fp);
  conn.socket.write(`GET ${url('/length')} HTTP/1.1\r\nHost: a\r\n\r\n`);
  await conn.waitFor('hello');
  conn.socket.write(`GET http://localhost:${originPort}/second HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n`);
  await conn.closed;
  const text = conn.received();
  assert.equal(text.match(/HTTP\/1\.1 200 OK/g)?.length, 2, text);
  assert.match(text, /\r\n\r\n\/second$/);
  assert.match(received.at(-1)?.head ?? '', /^GET \/second HTTP\/1\.1\r\nHost: b\r\n/);
});

test('a broken answer before its head is 502 naming the cause; a body cut short closes the connection', async () => {
  for (const [path, cause] of [
    ['/garbage', /target_unreachable: a broken answer from 127\.0\.0\.1:\d+: not an HTTP\/1\.x status line/],
    ['/bigcl', /invalid Content-Length/],
    ['/longhead', /answer head longer than 16384 bytes/],
  ] as const) {
    const text = await exchange(get(path));
    assert.match(text, /^HTTP\/1\.1 502 Bad Gateway\r\n/, path);
    assert.match(text, /x-browserd-forwarder: error/);
    assert.match(text, cause, path);
  }
  const truncated = await exchange(get('/truncated'));
  assert.match(truncated, /^HTTP\/1\.1 200 OK\r\n[^]*Content-Length: 100\r\n[^]*\r\n\r\nonly this$/, 'what came is relayed, then the connection closes short of the length');
  const res = await fetch(`${d.url}/healthz`);
  assert.equal(res.status, 200, 'the daemon is alive');
});

test('large answers arrive byte for byte through the reused read buffers, with a slow reader (backpressure)', async () => {
  const want = createHash('sha256').update(PATTERN).digest('hex');
  for (const framing of ['length', 'chunked', 'tunnel']) {
    const socket = net.connect(fp, '127.0.0.1');
    // tunnel: the same answer inside a CONNECT tunnel (the forwarder relays it as bytes, through the same reused buffers).
    if (framing === 'tunnel') socket.write(`CONNECT 127.0.0.1:${originPort} HTTP/1.1\r\nHost: 127.0.0.1:${originPort}\r\n\r\nGET /pattern/length HTTP/1.1\r\nHost: o\r\n\r\n`);
    else socket.write(get(`/pattern/${framing}`));
    const parts: Buffer[] = [];
    let n = 0;
    socket.on('data', (c: Buffer) => {
      parts.push(c);
      // The reader stops after each read until the next turn of the event loop: the socket buffers fill up, and the forwarder's
      // writes to this socket are left partly queued (holding views of its read buffers) while it reads on.
      n++;
      socket.pause();
      setImmediate(() => socket.resume());
    });
    await new Promise((resolve, reject) => socket.once('close', resolve).once('error', reject));
    let all = Buffer.concat(parts);
    if (framing === 'tunnel') {
      assert.match(all.toString('latin1', 0, 40), /^HTTP\/1\.1 200 Connection established\r\n\r\n/);
      all = all.subarray(all.indexOf('\r\n\r\n') + 4);
    }
    const end = all.indexOf('\r\n\r\n');
    const head = all.toString('latin1', 0, end);
    assert.match(head, /^HTTP\/1\.1 200 OK\r\n/, framing);
    const body = /\r\nContent-Length: /i.test(head) ? all.subarray(end + 4) : dechunkBytes(all.subarray(end + 4));
    assert.equal(body.length, PATTERN.length, framing);
    assert.ok(n > 0);
    assert.equal(createHash('sha256').update(body).digest('hex'), want, `${framing}: the bytes are the origin's`);
  }
});

function dechunkBytes(b: Buffer): Buffer {
  const out: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = b.indexOf('\r\n', at);
    const size = parseInt(b.toString('latin1', at, eol), 16);
    if (!(size > 0)) return Buffer.concat(out);
    out.push(b.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
}

/** The data of a chunked body (test side: plain string parsing). */
function dechunk(text: string): string {
  let out = '';
  let rest = text;
  for (;;) {
    const eol = rest.indexOf('\r\n');
    const size = parseInt(rest.slice(0, eol), 16);
    if (!(size > 0)) return out;
    out += rest.slice(eol + 2, eol + 2 + size);
    rest = rest.slice(eol + 2 + size + 2);
  }
}
