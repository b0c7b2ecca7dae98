// Small assertions shared by the HTTP tests: the contract's error shape, and raw requests
// for the cases fetch() will not send (slow bodies, lying content-length).
import assert from 'node:assert/strict';
import net from 'node:net';

/** Asserts the contract's error shape and code; returns the body. */
export async function expectError(res: Response, status: number, code: string): Promise<Record<string, unknown>> {
  const text = await res.text();
  assert.equal(res.status, status, `expected ${status} ${code}, got ${res.status}: ${text}`);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
  assert.ok(res.headers.get('x-request-id'), 'every response has x-request-id');
  const body = JSON.parse(text) as Record<string, unknown>;
  assert.equal(body.code, code, text);
  assert.equal(typeof body.message, 'string');
  for (const key of Object.keys(body)) assert.ok(['code', 'message', 'details', 'inner_error'].includes(key), `unexpected key ${key}`);
  if (body.details !== undefined) {
    assert.ok(Array.isArray(body.details));
    for (const d of body.details as Record<string, unknown>[]) {
      assert.equal(typeof d.code, 'string');
      assert.equal(typeof d.message, 'string');
    }
  }
  return body;
}

/** Sends raw bytes, returns everything the server sent until it closed (or `timeoutMs`). */
export function rawRequest(url: string, payload: string | Buffer, timeoutMs = 10_000): Promise<{ text: string; closedByServer: boolean }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    let text = '';
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ text, closedByServer: false });
    }, timeoutMs);
    socket.on('data', (d) => (text += d.toString('latin1')));
    socket.on('error', (err) => {
      clearTimeout(timer);
      if (text) resolve({ text, closedByServer: true });
      else reject(err);
    });
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ text, closedByServer: true });
    });
    socket.write(payload);
  });
}
