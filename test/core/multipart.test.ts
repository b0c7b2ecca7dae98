// @no-chromium: the multipart receiver alone, on a real HTTP socket.
// A body whose Content-Type names another boundary than the one its first line uses (what the SDK's
// direct routing sends: KERNEL_BROWSER_ROUTING_SUBRESOURCES copies the header of one serialization of
// a FormData and sends another) is read with the body's own boundary; a body with the declared one
// is read as before; a body that starts with no delimiter line stays a 400.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { receiveMultipart } from '../../daemon/core/multipart/receive.js';
import { tempDir } from '../kit/cleanup.js';

const dir = tempDir('browserd-multipart-');
let server: http.Server;
let url: string;
let n = 0;

before(async () => {
  server = http.createServer((req, res) => {
    receiveMultipart(req, { maxParts: 4, maxFileBytes: 1024, maxRequestBytes: 4096 }, () => path.join(dir, `f${n++}`)).then(
      (parts) => {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify(parts.map((p) => ({ name: p.fieldName, kind: p.kind, value: p.value, text: p.file === undefined ? undefined : readFileSync(p.file, 'utf8') }))));
      },
      (err: Error) => {
        res.statusCode = 400;
        res.end(err.message);
      },
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});
after(() => server.close());

function body(boundary: string): string {
  return [`--${boundary}`, 'Content-Disposition: form-data; name="a"', '', 'one', `--${boundary}`, 'Content-Disposition: form-data; name="f"; filename="x.txt"', 'Content-Type: text/plain', '', 'file text', `--${boundary}--`, ''].join('\r\n');
}

async function post(declared: string, text: string): Promise<{ status: number; text: string }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': `multipart/form-data; boundary=${declared}` }, body: text });
  return { status: res.status, text: await res.text() };
}

const WANT = [{ name: 'a', kind: 'field', value: 'one' }, { name: 'f', kind: 'file', text: 'file text' }];

test('the declared boundary: read as before', async () => {
  const r = await post('----formdata-undici-1', body('----formdata-undici-1'));
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(JSON.parse(r.text), WANT);
});

test("a declared boundary the body does not use: the body's own first line is the boundary", async () => {
  const r = await post('----formdata-undici-045158696695', body('----formdata-undici-074743730486'));
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(JSON.parse(r.text), WANT);
});

test('a body of no part (its close delimiter alone) under the declared or another boundary: no part, no error', async () => {
  for (const declared of ['b1', 'other']) {
    const r = await post(declared, '--b1--\r\n');
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(JSON.parse(r.text), []);
  }
});

test('a body that does not start with a delimiter line is still refused', async () => {
  const r = await post('b1', `preamble\r\n${body('b2')}`);
  assert.equal(r.status, 400);
  assert.match(r.text, /multipart body cannot be parsed/);
});
