// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// Folder watches against the real daemon and real inotify: recursive and not, CREATE / WRITE /
// DELETE with is_dir, new subfolders watched at once, the `lost` event when the queue overflows,
// the end of a watch (its folder deleted, a new reader, idle), and its limits.
import assert from 'node:assert/strict';
import { appendFileSync, mkdirSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { expectError } from '../helpers/http.js';
import { sseEvents, type SseEvent } from '../helpers/fs.js';
import { agentScratchDirs } from '../kit/agent.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';

const scratch = agentScratchDirs('browserd-fs-watch-');
const F = '/browsers/local/fs';

interface FsEvent {
  type: string;
  path: string;
  name: string;
  is_dir: boolean;
}

/** A watch with its event stream open; next() waits for the next event matching `pred` (others are kept in `seen`). */
async function watch(d: Daemon, dir: string, recursive: boolean): Promise<{ id: string; seen: SseEvent[]; next: (pred: (e: FsEvent) => boolean) => Promise<FsEvent> }> {
  const res = await d.fetch(`${F}/watch`, { method: 'POST', json: { path: dir, recursive } });
  assert.equal(res.status, 200);
  const { watch_id: id } = (await res.json()) as { watch_id: string };
  const events = await d.fetch(`${F}/watch/${id}/events`);
  assert.equal(events.headers.get('content-type'), 'text/event-stream; charset=utf-8');
  const it = sseEvents(events);
  const seen: SseEvent[] = [];
  let done = false;
  const next = async (pred: (e: FsEvent) => boolean): Promise<FsEvent> => {
    for (;;) {
      if (done) throw new Error(`the stream ended; seen: ${JSON.stringify(seen)}`);
      const r = await it.next();
      if (r.done) {
        done = true;
        continue;
      }
      seen.push(r.value);
      const e = JSON.parse(r.value.data) as FsEvent;
      if (r.value.event === 'message' && pred(e)) return e;
    }
  };
  return { id, seen, next };
}

const is = (type: string, p: string) => (e: FsEvent) => e.type === type && e.path === p;

describe('events', () => {
  let d: Daemon;
  before(async () => {
    d = await startDaemon();
  });
  after(() => d.cleanup());

  test('recursive: files and folders, in new subfolders too, with is_dir and name', async () => {
    const dir = scratch();
    const w = await watch(d, dir, true);
    mkdirSync(path.join(dir, 'a'));
    assert.deepEqual(await w.next(is('CREATE', path.join(dir, 'a'))), { type: 'CREATE', path: path.join(dir, 'a'), name: 'a', is_dir: true });
    mkdirSync(path.join(dir, 'a', 'b'));
    await w.next(is('CREATE', path.join(dir, 'a', 'b')));
    const f = path.join(dir, 'a', 'b', 'f.txt');
    writeFileSync(f, 'one');
    assert.deepEqual(await w.next(is('CREATE', f)), { type: 'CREATE', path: f, name: 'f.txt', is_dir: false });
    appendFileSync(f, 'two');
    assert.equal((await w.next(is('WRITE', f))).is_dir, false);
    unlinkSync(f);
    await w.next(is('DELETE', f));
    rmSync(path.join(dir, 'a'), { recursive: true });
    assert.equal((await w.next(is('DELETE', path.join(dir, 'a')))).is_dir, true);
    // A folder made with its content at once: its content is reported by the scan when it is watched.
    mkdirSync(path.join(dir, 'x', 'y', 'z'), { recursive: true });
    writeFileSync(path.join(dir, 'x', 'y', 'z', 'deep.txt'), 'd');
    await w.next(is('CREATE', path.join(dir, 'x', 'y', 'z', 'deep.txt')));
    assert.equal((await d.fetch(`${F}/watch/${w.id}`, { method: 'DELETE' })).status, 204);
    // Events still on their way (deep.txt's WRITE) may come first; then the stream ends.
    await assert.rejects(w.next(() => false), /the stream ended/, 'stopping the watch ends its stream');
  });

  test('not recursive: only the folder\'s own entries', async () => {
    const dir = scratch();
    mkdirSync(path.join(dir, 'sub'));
    const w = await watch(d, dir, false);
    writeFileSync(path.join(dir, 'sub', 'inside.txt'), 'x');
    writeFileSync(path.join(dir, 'top.txt'), 'x');
    await w.next(is('CREATE', path.join(dir, 'top.txt')));
    rmSync(path.join(dir, 'sub'), { recursive: true });
    assert.equal((await w.next(is('DELETE', path.join(dir, 'sub')))).is_dir, true);
    assert.ok(!w.seen.some((e) => e.data.includes('inside.txt')), JSON.stringify(w.seen));
    assert.equal((await d.fetch(`${F}/watch/${w.id}`, { method: 'DELETE' })).status, 204);
  });

  test('the watched folder deleted: DELETE of it, then the stream ends and the watch is gone', async () => {
    const dir = path.join(scratch(), 'watched');
    mkdirSync(dir);
    const w = await watch(d, dir, true);
    rmSync(dir, { recursive: true });
    assert.deepEqual(await w.next(is('DELETE', dir)), { type: 'DELETE', path: dir, name: 'watched', is_dir: true });
    await assert.rejects(w.next(() => true), /the stream ended/);
    await expectError(await d.fetch(`${F}/watch/${w.id}`, { method: 'DELETE' }), 404, 'not_found');
  });

  test('a second reader takes over; the first stream ends', async () => {
    const dir = scratch();
    const w = await watch(d, dir, false);
    const second = await d.fetch(`${F}/watch/${w.id}/events`);
    await assert.rejects(w.next(() => true), /the stream ended/);
    writeFileSync(path.join(dir, 'later.txt'), 'x');
    for await (const e of sseEvents(second)) {
      if (e.data.includes('later.txt')) break;
    }
    assert.equal((await d.fetch(`${F}/watch/${w.id}`, { method: 'DELETE' })).status, 204);
  });

  test('refused: a file, a missing folder, an unknown watch id', async () => {
    const dir = scratch();
    writeFileSync(path.join(dir, 'f'), 'x');
    await expectError(await d.fetch(`${F}/watch`, { method: 'POST', json: { path: path.join(dir, 'f') } }), 409, 'not_a_directory');
    await expectError(await d.fetch(`${F}/watch`, { method: 'POST', json: { path: path.join(dir, 'nope') } }), 404, 'not_found');
    await expectError(await d.fetch(`${F}/watch`, { method: 'POST', json: { path: dir, depth: 3 } }), 400, 'bad_request');
    await expectError(await d.fetch(`${F}/watch/nope/events`), 404, 'not_found');
  });
});

describe('limits of a watch', () => {
  let d: Daemon;
  before(async () => {
    d = await startDaemon({ env: { BROWSERD_FS_WATCH_QUEUE: '5', BROWSERD_FS_WATCH_MAX_DIRS: '3', BROWSERD_FS_WATCH_IDLE_SEC: '1' } });
  });
  after(() => d.cleanup());

  test('a full queue drops events; the reader gets `lost` with the count first', async () => {
    const dir = scratch();
    const res = await d.fetch(`${F}/watch`, { method: 'POST', json: { path: dir } });
    const { watch_id: id } = (await res.json()) as { watch_id: string };
    for (let i = 0; i < 40; i++) writeFileSync(path.join(dir, `f${i}.txt`), 'x');
    await d.waitLog((l) => l.event === 'fs_watch_lost' && l.watch_id === id);
    const events = sseEvents(await d.fetch(`${F}/watch/${id}/events`));
    const first = (await events.next()).value as SseEvent;
    assert.equal(first.event, 'lost');
    const lost = JSON.parse(first.data) as { type: string; path: string; count: number };
    assert.equal(lost.type, 'LOST');
    assert.equal(lost.path, dir);
    assert.ok(lost.count >= 1, first.data);
    const next = (await events.next()).value as SseEvent;
    assert.equal(next.event, 'message', 'the kept events follow');
    assert.equal((await d.fetch(`${F}/watch/${id}`, { method: 'DELETE' })).status, 204);
  });

  test('a tree over BROWSERD_FS_WATCH_MAX_DIRS: 429, not to be retried', async () => {
    const dir = scratch();
    mkdirSync(path.join(dir, 'a', 'b', 'c'), { recursive: true });
    const res = await d.fetch(`${F}/watch`, { method: 'POST', json: { path: dir, recursive: true } });
    assert.equal(res.headers.get('x-should-retry'), 'false');
    const body = await expectError(res, 429, 'limit_exceeded');
    assert.match(String(body.message), /BROWSERD_FS_WATCH_MAX_DIRS/);
    assert.equal((await d.fetch(`${F}/watch`, { method: 'POST', json: { path: dir, recursive: false } })).status, 200);
  });

  test('a watch nobody reads is stopped after BROWSERD_FS_WATCH_IDLE_SEC', async () => {
    const dir = scratch();
    const res = await d.fetch(`${F}/watch`, { method: 'POST', json: { path: dir } });
    const { watch_id: id } = (await res.json()) as { watch_id: string };
    await d.waitLog((l) => l.event === 'fs_watch_idle' && l.watch_id === id);
    await expectError(await d.fetch(`${F}/watch/${id}/events`), 404, 'not_found');
  });
});
