// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// Unit test of http/request-idle.ts on a real loopback server: time in which the server itself
// does not read (its handler is slow: the connection is paused by backpressure) is not the client's
// idle time; a client that stops sending is.
import assert from 'node:assert/strict';
import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { watchRequestIdle } from '../../daemon/http/request-idle.js';

const IDLE_MS = 200;

function serve(handler: (req: IncomingMessage, idle: Promise<void>) => Promise<number>): Promise<Server> {
  const server = createServer((req, res) => {
    const idle = new Promise<void>((resolve) => watchRequestIdle(req, IDLE_MS, resolve));
    void handler(req, idle).then((n) => res.end(String(n))); // the handler never rejects
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

function post(server: Server, body: Buffer | null): { done: Promise<string>; send: (b: Buffer) => void } {
  const { port } = server.address() as AddressInfo;
  const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/', headers: body === null ? { 'content-length': '10' } : {} });
  const done = new Promise<string>((resolve, reject) => {
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (c: string) => (text += c));
      res.on('end', () => resolve(text));
    });
    req.on('error', reject);
  });
  if (body !== null) req.end(body);
  return { done, send: (b) => req.write(b) };
}

test('a handler that stops reading for many idle periods while the client waits to send: not idle; the whole body is read', async () => {
  const body = Buffer.alloc(16 * 1024 * 1024, 'y'); // far more than the socket buffers: the client must wait for the server
  let idled = false;
  const server = await serve(async (req, idle) => {
    void idle.then(() => (idled = true));
    req.pause();
    // The server's slowness: it reads nothing for 5 idle periods (the connection backs up and pauses).
    await new Promise((resolve) => setTimeout(resolve, IDLE_MS * 5));
    let n = 0;
    for await (const chunk of req) n += (chunk as Buffer).length;
    return n;
  });
  try {
    const { done } = post(server, body);
    assert.equal(await done, String(body.length));
    assert.equal(idled, false, 'time the server did not read counted as the client being idle');
  } finally {
    server.close();
  }
});

test('a client that stops sending in the middle of its body: idle', async () => {
  let sawIdle: (v: boolean) => void = () => {};
  const seen = new Promise<boolean>((resolve) => (sawIdle = resolve));
  const server = await serve(async (req, idle) => {
    req.resume();
    await idle;
    sawIdle(true);
    req.destroy();
    return 0;
  });
  try {
    const { done, send } = post(server, null);
    done.catch(() => {}); // the connection is cut
    send(Buffer.from('12345')); // 5 of 10 bytes, then nothing
    assert.equal(await seen, true);
  } finally {
    server.closeAllConnections();
    server.close();
  }
});
