// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// @long: one of the slowest files (10 s or more alone), started first by test/run.mjs.
// Streaming and atomicity: a 1 GiB file written and read through the API with the daemon's
// memory flat (peak VmRSS under +128 MiB, an eighth of the file), concurrent writers to one path (every read is one whole
// version, never a torn file), a write cut off by its client leaves nothing, and the limits (413, 429).
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { expectError } from '../helpers/http.js';
import { bigFile, curl, MiB, peakRss } from '../helpers/fs.js';
import { agentScratchDirs, giveToAgent } from '../kit/agent.js';
import { TEST_TOKEN, startDaemon, type Daemon } from '../kit/daemon.js';
import { rssOf } from '../kit/procs.js';
import { until } from '../kit/wait.js';

const scratch = agentScratchDirs('browserd-fs-stream-');
const F = '/browsers/local/fs';
const q = (p: string): string => `?path=${encodeURIComponent(p)}`;
const GiB = 1024 * MiB;
// Streaming keeps the growth far below the file's size; what remains is Node's own: a bare node:http
// server piping the same 1 GiB into a file peaks at +40 MiB on Node 20 and +88 MiB on Node 24 (the
// socket's read buffers wait longer for the garbage collector), the daemon at +49 and +77 MiB.
const RSS_BUDGET = 128 * MiB;

describe('1 GiB through the API with flat memory', () => {
  let d: Daemon;
  let dir: string;
  let src: string;
  let srcHash: string;
  before(async () => {
    d = await startDaemon();
    dir = scratch();
    src = path.join(dir, 'big.bin');
    srcHash = bigFile(src, GiB);
  });
  after(async () => {
    await d.cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  test('write_file of 1 GiB (curl -T streams it from disk)', async (t) => {
    const dest = path.join(dir, 'written.bin');
    const base = rssOf(d.pid);
    const { peak, value } = await peakRss(d.pid, curl(d, `${F}/write_file${q(dest)}`, ['-T', src]));
    assert.equal(value.status, 204, value.body.toString());
    t.diagnostic(`daemon RSS ${(base / MiB).toFixed(1)} MiB before, peak +${((peak - base) / MiB).toFixed(1)} MiB while writing 1 GiB`);
    assert.ok(peak - base < RSS_BUDGET, `the daemon's RSS grew by ${((peak - base) / MiB).toFixed(1)} MiB while writing 1 GiB`);
    assert.equal(statSync(dest).size, GiB);
    const hash = createHash('sha256');
    for await (const chunk of (await import('node:fs')).createReadStream(dest, { highWaterMark: 4 * MiB })) hash.update(chunk as Buffer);
    assert.equal(hash.digest('hex'), srcHash);
    rmSync(dest);
  });

  test('read_file of 1 GiB, streamed to the client', async (t) => {
    const base = rssOf(d.pid);
    // node:http rather than fetch: the client is not what is measured, and it keeps up with the daemon.
    const read = new Promise<{ bytes: number; hex: string; status: number }>((resolve, reject) => {
      http.get(`${d.url}${F}/read_file${q(src)}`, { headers: { authorization: `Bearer ${TEST_TOKEN}` } }, (res) => {
        const hash = createHash('sha256');
        let bytes = 0;
        res.on('data', (chunk: Buffer) => {
          hash.update(chunk);
          bytes += chunk.length;
        });
        res.on('end', () => resolve({ bytes, hex: hash.digest('hex'), status: res.statusCode ?? 0 }));
        res.on('error', reject);
      }).on('error', reject);
    });
    const { peak, value } = await peakRss(d.pid, read);
    assert.equal(value.status, 200);
    assert.equal(value.bytes, GiB);
    assert.equal(value.hex, srcHash);
    t.diagnostic(`daemon RSS ${(base / MiB).toFixed(1)} MiB before, peak +${((peak - base) / MiB).toFixed(1)} MiB while reading 1 GiB`);
    assert.ok(peak - base < RSS_BUDGET, `the daemon's RSS grew by ${((peak - base) / MiB).toFixed(1)} MiB while reading 1 GiB`);
  });

  test('read_file to a slow client, whole and ranged across many chunks: every byte exact; a client that leaves mid-way is let go', async () => {
    // Random bytes throughout (no repeated block): a read buffer reused before the socket took its bytes would show.
    const file = path.join(dir, 'random.bin');
    const content = randomBytes(5 * MiB + 123);
    writeFileSync(file, content);
    /** GET with the client pausing after every chunk it gets, so that the daemon's writes wait on it. */
    const slowGet = (headers: Record<string, string>, leaveAfter = Infinity): Promise<{ status: number; body: Buffer }> =>
      new Promise((resolve, reject) => {
        const req = http.get(`${d.url}${F}/read_file${q(file)}`, { headers: { authorization: `Bearer ${TEST_TOKEN}`, ...headers } }, (res) => {
          const parts: Buffer[] = [];
          let got = 0;
          res.on('data', (chunk: Buffer) => {
            parts.push(chunk);
            got += chunk.length;
            if (got >= leaveAfter) {
              req.destroy();
              return resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts) });
            }
            res.pause();
            setImmediate(() => res.resume());
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts) }));
          res.on('error', reject);
        });
        req.on('error', (err) => (leaveAfter === Infinity ? reject(err) : undefined));
      });
    const whole = await slowGet({});
    assert.equal(whole.status, 200);
    assert.ok(whole.body.equals(content), 'the whole file, byte for byte');
    const [a, b] = [MiB - 7, 4 * MiB + 11];
    const ranged = await slowGet({ range: `bytes=${a}-${b}` });
    assert.equal(ranged.status, 206);
    assert.ok(ranged.body.equals(content.subarray(a, b + 1)), 'the range, byte for byte');
    const left = await slowGet({}, 2 * MiB);
    assert.ok(left.body.equals(content.subarray(0, left.body.length)), 'what a leaving client got was right');
    const again = await slowGet({ range: `bytes=-${MiB + 5}` });
    assert.equal(again.status, 206);
    assert.ok(again.body.equals(content.subarray(content.length - MiB - 5)), 'the daemon serves on after a client left');
  });
});

describe('atomic writes', () => {
  let d: Daemon;
  before(async () => {
    d = await startDaemon();
  });
  after(() => d.cleanup());

  test('concurrent writers to one path: every read is one whole version; the last rename wins', async () => {
    const dir = scratch();
    const file = path.join(dir, 'shared.bin');
    const versions = Array.from({ length: 6 }, (_, i) => Buffer.alloc(3 * MiB + i * 4096, 65 + i));
    const hashes = new Set(versions.map((v) => createHash('sha256').update(v).digest('hex')));
    writeFileSync(file, versions[0] as Buffer);
    giveToAgent(file);
    let writing = true;
    const reads: string[] = [];
    const reader = (async () => {
      while (writing) {
        const res = await d.fetch(`${F}/read_file${q(file)}`);
        reads.push(createHash('sha256').update(Buffer.from(await res.arrayBuffer())).digest('hex'));
      }
    })();
    const writers = [];
    for (let round = 0; round < 3; round++) {
      for (const v of versions) writers.push(d.fetch(`${F}/write_file${q(file)}`, { method: 'PUT', body: v }).then(async (r) => [r.status, await r.text()]));
    }
    const results = await Promise.all(writers);
    writing = false;
    await reader;
    for (const [status, text] of results) assert.equal(status, 204, String(text));
    assert.ok(reads.length > 0);
    for (const h of reads) assert.ok(hashes.has(h), 'a read saw a torn or mixed file');
    assert.ok(hashes.has(createHash('sha256').update(readFileSync(file)).digest('hex')));
    assert.deepEqual(readdirSync(dir), ['shared.bin'], 'no temp file is left');
  });

  test('a write cut off by its client leaves nothing (no file, no temp file)', async () => {
    const dir = scratch();
    const file = path.join(dir, 'cut.bin');
    const { port } = new URL(d.url);
    const socket = net.connect(Number(port), '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write(`PUT ${F}/write_file${q(file)} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${TEST_TOKEN}\r\ncontent-length: 1000000\r\n\r\n`);
    socket.write(Buffer.alloc(300_000, 1));
    // The temp file appears beside the target while the body arrives...
    await until('the temp file beside the target', () => readdirSync(dir).some((n) => n.endsWith('.tmp')), 30_000, 5);
    socket.destroy();
    // ...and is removed once the daemon sees the client gone.
    await d.waitLog((l) => l.event === 'request' && l.route === '/browsers/{id}/fs/write_file' && l.status === 499);
    await until(() => `the temp file removed; left: ${readdirSync(dir).join(', ')}`, () => readdirSync(dir).length === 0, 30_000, 5);
    assert.equal(existsSync(file), false);
  });
});

describe('limits', () => {
  let d: Daemon;
  before(async () => {
    d = await startDaemon({
      env: {
        BROWSERD_FS_MAX_FILE_BYTES: '1000',
        BROWSERD_FS_MAX_UPLOAD_BYTES: '20000',
        BROWSERD_FS_MAX_UPLOAD_FILES: '2',
        BROWSERD_FS_MAX_LIST_ENTRIES: '3',
        BROWSERD_FS_MAX_ZIP_ENTRIES: '3',
        BROWSERD_FS_MAX_WATCHES: '2',
      },
    });
  });
  after(() => d.cleanup());

  test('write_file over BROWSERD_FS_MAX_FILE_BYTES: 413, by Content-Length or counted, nothing written', async () => {
    const dir = scratch();
    const file = path.join(dir, 'big.bin');
    const body = await expectError(await d.fetch(`${F}/write_file${q(file)}`, { method: 'PUT', body: Buffer.alloc(1001) }), 413, 'payload_too_large');
    assert.match(String(body.message), /1000 bytes \(BROWSERD_FS_MAX_FILE_BYTES\)/);
    const chunked = new ReadableStream({
      start(c) {
        c.enqueue(new Uint8Array(600));
        c.enqueue(new Uint8Array(600));
        c.close();
      },
    });
    await expectError(await d.fetch(`${F}/write_file${q(file)}`, { method: 'PUT', body: chunked, duplex: 'half' } as RequestInit), 413, 'payload_too_large');
    assert.deepEqual(readdirSync(dir), []);
    assert.equal((await d.fetch(`${F}/write_file${q(file)}`, { method: 'PUT', body: Buffer.alloc(1000) })).status, 204);
  });

  test('upload: a file over its limit, too many files: nothing written', async () => {
    const dir = scratch();
    const form = new FormData();
    form.append('files[0][dest_path]', path.join(dir, 'ok.txt'));
    form.append('files[0][file]', new Blob(['small']), 'ok.txt');
    form.append('files[1][dest_path]', path.join(dir, 'sub', 'big.txt'));
    form.append('files[1][file]', new Blob([Buffer.alloc(1001)]), 'big.txt');
    await expectError(await d.fetch(`${F}/upload`, { method: 'POST', body: form }), 413, 'payload_too_large');
    const three = new FormData();
    for (let i = 0; i < 3; i++) {
      three.append(`files[${i}][dest_path]`, path.join(dir, `${i}.txt`));
      three.append(`files[${i}][file]`, new Blob(['x']), 'x');
    }
    await expectError(await d.fetch(`${F}/upload`, { method: 'POST', body: three }), 400, 'bad_request');
    assert.deepEqual(readdirSync(dir), [], 'neither the files nor their folders');
  });

  test('list_files and download_dir_zip past their entry limits: 413', async () => {
    const dir = scratch();
    for (const n of ['a', 'b', 'c', 'd']) writeFileSync(path.join(dir, n), n);
    const list = await expectError(await d.fetch(`${F}/list_files${q(dir)}`), 413, 'payload_too_large');
    assert.match(String(list.message), /BROWSERD_FS_MAX_LIST_ENTRIES/);
    const zip = await expectError(await d.fetch(`${F}/download_dir_zip${q(dir)}`), 413, 'payload_too_large');
    assert.match(String(zip.message), /BROWSERD_FS_MAX_ZIP_ENTRIES/);
  });

  test('watches past BROWSERD_FS_MAX_WATCHES: 429 with Retry-After; a stopped one frees its slot', async () => {
    const dir = scratch();
    const start = (): Promise<Response> => d.fetch(`${F}/watch`, { method: 'POST', json: { path: dir } });
    const ids = [];
    for (let i = 0; i < 2; i++) ids.push(((await (await start()).json()) as { watch_id: string }).watch_id);
    const res = await start();
    assert.equal(res.headers.get('x-should-retry'), 'true');
    assert.ok(res.headers.get('retry-after'));
    await expectError(res, 429, 'limit_exceeded');
    assert.equal((await d.fetch(`${F}/watch/${ids[0]}`, { method: 'DELETE' })).status, 204);
    assert.equal((await start()).status, 200);
  });
});
