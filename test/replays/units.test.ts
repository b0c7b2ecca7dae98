// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The replays' store and manager without ffmpeg (a stand-in for the final remux): records read back
// through their schema (an unreadable one left out), the recovery of what a killed daemon left, and
// pruning past BROWSERD_REPLAY_MAX_KEPT.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import type { Screencast } from '../../daemon/computer/index.js';
import { createLogger } from '../../daemon/core/log.js';
import { RecordManager } from '../../daemon/replays/manager.js';
import type { Marker } from '../../daemon/replays/recording.js';
import { ReplayStore, type ReplayRecord } from '../../daemon/replays/store.js';
import { scratchDirs } from '../kit/cleanup.js';

const scratch = scratchDirs('browserd-replays-units-');
const log = createLogger('silent');
const limits = { ffmpeg: 'ffmpeg-not-used', defaultFramerate: 10, maxFramerate: 20, maxActive: 4, maxDurationSec: 3600, maxBytes: 1 << 30, minFreeBytes: 0, maxKept: 100 };

function record(over: Partial<ReplayRecord> = {}): ReplayRecord {
  return {
    replay_id: randomUUID(),
    started_at: new Date(Date.now() - 60_000).toISOString(),
    finished_at: null,
    replay_view_url: 'http://127.0.0.1:1/browsers/local/replays/x',
    state: 'recording',
    stop_reason: null,
    framerate: 10,
    max_duration_in_seconds: 3600,
    width: 800,
    height: 600,
    size_bytes: 0,
    duration_ms: 0,
    markers: [],
    error: null,
    ...over,
  };
}

function put(dir: string, r: ReplayRecord): void {
  writeFileSync(path.join(dir, `${r.replay_id}.json`), JSON.stringify(r));
}

function manager(store: ReplayStore, finalize: RecordManager['finalize'] = () => Promise.reject(new Error('no remux expected')), over: Partial<typeof limits> = {}): RecordManager {
  return new RecordManager({
    limits: { ...limits, ...over },
    store,
    screencast: {} as Screencast,
    ensureReady: () => undefined,
    log,
    finalize,
    recoverWaitMs: 1000,
  });
}

test('the store reads records back through their schema: a broken or mismatched one is left out, its files kept', () => {
  const dir = scratch();
  const good = record({ state: 'stopped', stop_reason: 'requested', finished_at: new Date().toISOString() });
  put(dir, good);
  writeFileSync(path.join(dir, `${randomUUID()}.json`), '{"replay_id": ');
  const wrongState = record({ state: 'paused' as ReplayRecord['state'] });
  put(dir, wrongState);
  const other = record();
  writeFileSync(path.join(dir, `${randomUUID()}.json`), JSON.stringify(other)); // names another file
  const store = new ReplayStore(dir, log);
  assert.deepEqual(store.list().map((r) => r.replay_id), [good.replay_id]);
  assert.ok(existsSync(path.join(dir, `${wrongState.replay_id}.json`)), 'an unreadable record is not deleted');
});

test('recovery: a recording with its .part.mp4 is finalized (its markers, its duration up to the file\'s last write) and listed as stopped', async () => {
  const dir = scratch();
  const markers: Marker[] = [{ label: 'login', at_ms: 1200 }];
  const r = record({ markers });
  put(dir, r);
  const store = new ReplayStore(dir, log);
  const part = store.partFile(r.replay_id);
  writeFileSync(part, 'fragments');
  const lastWrite = new Date(Date.parse(r.started_at) + 42_000);
  utimesSync(part, lastWrite, lastWrite);
  const calls: { part: string; out: string; markers: readonly Marker[]; endMs: number }[] = [];
  await manager(store, async (_ffmpeg, p, out, m, endMs) => {
    calls.push({ part: p, out, markers: m, endMs });
    await writeFile(out, 'a video');
  }).recover();
  assert.deepEqual(calls, [{ part, out: store.videoFile(r.replay_id), markers, endMs: 42_000 }]);
  const after = JSON.parse(readFileSync(store.metaFile(r.replay_id), 'utf8')) as ReplayRecord;
  assert.equal(after.state, 'stopped');
  assert.equal(after.stop_reason, 'recovered');
  assert.equal(after.duration_ms, 42_000);
  assert.equal(after.size_bytes, 'a video'.length);
  assert.equal(after.finished_at, lastWrite.toISOString());
  assert.equal(after.error, null);
  assert.deepEqual(new ReplayStore(dir, log).get(r.replay_id), after, 'read back the same');
});

test('recovery: a recording without a frame written is listed as failed, saying so; a finished one is left alone', async () => {
  const dir = scratch();
  const empty = record();
  const done = record({ state: 'stopped', stop_reason: 'requested', finished_at: new Date().toISOString(), size_bytes: 7 });
  put(dir, empty);
  put(dir, done);
  const store = new ReplayStore(dir, log);
  await manager(store).recover(); // the stand-in rejects: no remux may be asked for
  assert.equal(store.get(empty.replay_id)?.state, 'failed');
  assert.equal(store.get(empty.replay_id)?.stop_reason, 'recovered');
  assert.match(store.get(empty.replay_id)?.error ?? '', /before a frame was written/);
  assert.deepEqual(store.get(done.replay_id), done);
});

test('pruning: past max_kept the oldest finished recordings go with their files; one still recording stays', async () => {
  const dir = scratch();
  const at = (s: number): string => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
  const oldestRecording = record({ started_at: at(0) });
  const finished = [1, 2, 3, 4].map((s) => record({ started_at: at(s), state: 'stopped', stop_reason: 'requested', finished_at: at(s + 1) }));
  for (const r of [oldestRecording, ...finished]) {
    put(dir, r);
    writeFileSync(path.join(dir, `${r.replay_id}.mp4`), 'v');
  }
  const store = new ReplayStore(dir, log);
  await manager(store, undefined, { maxKept: 3 }).prune();
  const kept = store.list().map((r) => r.replay_id);
  assert.deepEqual(kept, [oldestRecording.replay_id, finished[2]?.replay_id, finished[3]?.replay_id]);
  for (const gone of finished.slice(0, 2)) {
    assert.equal(existsSync(store.metaFile(gone.replay_id)), false);
    assert.equal(existsSync(store.videoFile(gone.replay_id)), false);
  }
  assert.equal(new ReplayStore(dir, log).size, 3, 'what is kept is what a restart reads');
});
