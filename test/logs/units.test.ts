// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// Units of the log streams: the ring (numbering, lost lines, cut lines), a ring reader with and
// without follow, the SSE writer over a real socket (the `lost` event for a reader that falls
// behind, heartbeat comments), the file tail (backlog, truncation, rotation, follow=false) and the
// minimal path guard.
import assert from 'node:assert/strict';
import { appendFileSync, mkdirSync, renameSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { createServer, get, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { setImmediate as yieldNow } from 'node:timers/promises';
import { test } from 'node:test';
import { TurnBuffer } from '../../daemon/core/log.js';
import { FileTail } from '../../daemon/logs/file-tail.js';
import { Guard } from '../../daemon/fs/paths/guard.js';
import { readablePath } from '../../daemon/fs/read/send.js';
import { LogRing, MAX_LINE_CHARS } from '../../daemon/logs/ring.js';
import { RingSource, type Batch, type LogSource } from '../../daemon/logs/source.js';
import { streamLogs } from '../../daemon/logs/sse.js';
import type { BrowserdError } from '../../daemon/core/errors.js';
import { scratchDirs } from '../kit/cleanup.js';

const scratch = scratchDirs('browserd-logs-units-');
const never = new AbortController().signal;
const messages = (b: Batch | null): string[] => (b === null ? [] : b.events.map((e) => e.message));

test('the ring keeps the last lines, numbered; a reader behind it learns how many it lost; long lines are cut', () => {
  const ring = new LogRing(3);
  for (const m of ['a', 'b', 'c', 'd', 'e']) ring.add(m);
  assert.equal(ring.first, 2);
  assert.equal(ring.end, 5);
  const r = ring.read(0, 10);
  assert.equal(r.lost, 2);
  assert.deepEqual(r.items.map((l) => [l.seq, l.message]), [[2, 'c'], [3, 'd'], [4, 'e']]);
  assert.equal(r.next, 5);
  assert.deepEqual(ring.read(3, 1).items.map((l) => l.message), ['d']);
  ring.add('x'.repeat(MAX_LINE_CHARS + 10));
  const long = ring.read(5, 1).items[0]?.message ?? '';
  assert.equal(long.length, MAX_LINE_CHARS + 1);
  assert.ok(long.endsWith('…'));
});

test('a ring reader: without follow it ends after what was there; with follow it waits for the next line', async () => {
  const ring = new LogRing(10);
  ring.add('one');
  const once = new RingSource(ring, false);
  assert.deepEqual(messages(await once.next(never)), ['one']);
  ring.add('later');
  assert.equal(await once.next(never), null);
  const live = new RingSource(ring, true);
  assert.deepEqual(messages(await live.next(never)), ['one', 'later']);
  const waiting = live.next(never);
  ring.add('new');
  assert.deepEqual(messages(await waiting), ['new']);
  const stop = new AbortController();
  const idle = live.next(stop.signal);
  stop.abort();
  assert.deepEqual(await idle, { events: [], lost: 0 });
});

/** An HTTP server whose one route streams `source`; the client's response (not read until `resume`). */
async function serve(source: LogSource, heartbeatMs?: number): Promise<{ res: IncomingMessage; close(): void }> {
  const server = createServer((req, res) => {
    const ac = new AbortController();
    res.on('close', () => ac.abort());
    void streamLogs(res, source, { signal: ac.signal, heartbeatMs });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const res = await new Promise<IncomingMessage>((resolve) => get(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, resolve));
  return {
    res,
    close: () => {
      res.destroy();
      server.closeAllConnections();
      server.close();
    },
  };
}

test('SSE: a reader that falls behind the ring gets `event: lost` with the count, then goes on at the oldest line kept', async () => {
  const ring = new LogRing(100);
  const { res, close } = await serve(new RingSource(ring, true));
  try {
    assert.equal(res.headers['content-type'], 'text/event-stream; charset=utf-8');
    res.pause(); // the client reads nothing: the socket fills up
    const pad = 'p'.repeat(1024);
    const total = 50_000; // 50 MB: more than the socket buffers can hold (tcp_rmem max 32 MiB + tcp_wmem max 4 MiB)
    for (let i = 0; i < total; i++) {
      ring.add(`${i} ${pad}`);
      if (i % 500 === 0) await yieldNow();
    }
    ring.add('END');
    res.setEncoding('utf8');
    let text = '';
    await new Promise<void>((resolve) => {
      res.on('data', (c: string) => {
        text += c;
        if (text.includes('"message":"END"')) resolve();
      });
      res.resume();
    });
    const events = text.split('\n\n').filter((e) => e.trim() !== '');
    const lost = events.findIndex((e) => e.startsWith('event: lost\n'));
    assert.ok(lost > 0, 'a lost event came');
    const info = JSON.parse((events[lost] as string).split('\ndata: ')[1] as string) as { event: string; count: number };
    assert.equal(info.event, 'lost');
    assert.ok(info.count > 0);
    const seqOf = (e: string): number => Number((JSON.parse(e.slice('data: '.length)) as { message: string }).message.split(' ')[0]);
    const before = seqOf(events[lost - 1] as string);
    const after = seqOf(events[lost + 1] as string);
    assert.equal(after - before - 1, info.count, 'the count is exactly the lines skipped');
  } finally {
    close();
  }
});

test('SSE: an idle stream gets comment lines (heartbeats); each event is a LogEvent', async () => {
  const ring = new LogRing(10);
  ring.add('hello');
  const { res, close } = await serve(new RingSource(ring, true), 30);
  try {
    res.setEncoding('utf8');
    let text = '';
    await new Promise<void>((resolve) => {
      res.on('data', (c: string) => {
        text += c;
        if (text.includes(': keepalive\n\n')) resolve();
      });
    });
    const first = text.split('\n\n')[0] as string;
    const ev = JSON.parse(first.slice('data: '.length)) as Record<string, unknown>;
    assert.deepEqual(Object.keys(ev), ['event', 'message', 'timestamp']);
    assert.equal(ev.event, 'log');
    assert.equal(ev.message, 'hello');
  } finally {
    close();
  }
});

const resolveAs = (file: string) => async (): Promise<string> => file;

test('file tail: starts at the backlog from a line start, follows appends, reads a truncated file again from its start', async () => {
  const file = path.join(scratch(), 'a.log');
  writeFileSync(file, 'aaaa\nbbbb\ncccc\n');
  const tail = await FileTail.open(file, { follow: true, backlogBytes: 7, resolve: resolveAs(file), pollMs: 20 });
  try {
    assert.deepEqual(messages(await tail.next(never)), ['cccc'], 'the line cut by the backlog is dropped');
    const next = tail.next(never);
    appendFileSync(file, 'dddd\n');
    assert.deepEqual(messages(await next), ['dddd']);
    truncateSync(file, 0);
    appendFileSync(file, 'new\n');
    assert.deepEqual(messages(await tail.next(never)), ['new']);
  } finally {
    tail.close();
  }
});

test('file tail: a rotated file is read to its end, then the new file from its start; without follow it ends at the size it had', async () => {
  const dir = scratch();
  const file = path.join(dir, 'app.log');
  writeFileSync(file, 'one\n');
  const tail = await FileTail.open(file, { follow: true, backlogBytes: 1024, resolve: resolveAs(file), pollMs: 20 });
  try {
    assert.deepEqual(messages(await tail.next(never)), ['one']);
    renameSync(file, `${file}.1`);
    appendFileSync(`${file}.1`, 'two, in the old file\npartial');
    writeFileSync(file, 'three, in the new file\n');
    const got: string[] = [];
    while (got.length < 3) got.push(...messages(await tail.next(never)));
    assert.deepEqual(got, ['two, in the old file', 'partial', 'three, in the new file']);
  } finally {
    tail.close();
  }
  writeFileSync(file, 'x\ny\nz');
  const once = await FileTail.open(file, { follow: false, backlogBytes: 1024, resolve: resolveAs(file) });
  appendFileSync(file, '\nafter the open\n');
  const got: string[] = [];
  for (let b = await once.next(never); b !== null; b = await once.next(never)) got.push(...messages(b));
  assert.deepEqual(got, ['x', 'y', 'z']);
  once.close();
});

test('a path stream reads under the files API rules: the state dir (as given, by real path, missing files too), /proc, /sys, /dev are refused', async () => {
  const root = scratch();
  const state = path.join(root, 'state');
  mkdirSync(state);
  writeFileSync(path.join(state, 'token'), 'secret');
  writeFileSync(path.join(root, 'ok.log'), 'fine\n');
  symlinkSync(path.join(state, 'token'), path.join(root, 'link.log'));
  symlinkSync(state, path.join(root, 'statelink'));
  const guard = readablePath(new Guard({ stateDir: state, keysFile: null, providersFile: null }));
  assert.equal(await guard(path.join(root, 'ok.log')), path.join(root, 'ok.log'));
  const code = async (p: string): Promise<string> => {
    try {
      await guard(p);
      return 'allowed';
    } catch (err) {
      return (err as BrowserdError).code;
    }
  };
  assert.equal(await code(path.join(state, 'token')), 'path_forbidden');
  assert.equal(await code(path.join(state, 'not-there')), 'path_forbidden');
  assert.equal(await code(path.join(root, 'state', '..', 'state', 'token')), 'path_forbidden');
  assert.equal(await code(path.join(root, 'link.log')), 'path_forbidden');
  assert.equal(await code(path.join(root, 'statelink', 'token')), 'path_forbidden');
  assert.equal(await code('/proc/self/status'), 'path_forbidden');
  assert.equal(await code('/sys/kernel/hostname'), 'path_forbidden');
  assert.equal(await code('/dev/null'), 'path_forbidden');
  assert.equal(await code(path.join(root, 'missing.log')), 'not_found');
  assert.equal(await code(root), 'is_a_directory');
  assert.equal(await code('ok.log'), 'bad_request');
  assert.equal(await code(path.join(root, 'statefoo')), 'not_found', 'a sibling whose name starts like the state dir is not inside it');
});

test('stdout lines: access-log lines are written once per turn, every other line at once and after them (order kept)', async () => {
  const writes: string[] = [];
  const buf = new TurnBuffer({ write: (s: string) => void writes.push(s) });
  const access = (n: number): string => `{"level":30,"event":"request","n":${n}}\n`;
  buf.write(access(1));
  buf.write(access(2));
  assert.deepEqual(writes, [], 'access lines wait for the end of the turn');
  buf.write('{"level":30,"event":"extension_activated"}\n');
  assert.deepEqual(writes, [access(1) + access(2), '{"level":30,"event":"extension_activated"}\n'], 'written at once, after the pending ones');
  buf.write(access(3));
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(writes.slice(2), [access(3)]);
  buf.write('{"level":30,"msg":"the text \\"event\\":\\"request\\" in a string"}\n');
  assert.equal(writes.length, 4, 'a quoted look-alike inside a string is not an access line');
});
