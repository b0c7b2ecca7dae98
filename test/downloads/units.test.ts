// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The downloads module's parts without Chromium: who owns the download behaviour (behavior.ts) and
// the list of downloads with its limits (tracker.ts).
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import pino from 'pino';
import { DownloadBehaviors } from '../../daemon/downloads/behavior.js';
import { writableDirFor } from '../../daemon/downloads/index.js';
import { DownloadTracker, redactUrl } from '../../daemon/downloads/tracker.js';
import { until } from '../kit/wait.js';

const log = pino({ level: 'silent' });
const DL = '/srv/downloads';

test("a client's behaviour: a folder of this VM honoured, any other the downloads folder; `default` is the daemon's; deny kept", () => {
  const b = new DownloadBehaviors({ downloadsDir: DL, writableDir: (dir) => dir === '/here' });
  const a = {};
  assert.deepEqual(b.rewrite(a, 'Browser.setDownloadBehavior', { behavior: 'allowAndName', downloadPath: '/here', eventsEnabled: true }), { behavior: 'allowAndName', downloadPath: '/here', eventsEnabled: true });
  assert.deepEqual(b.rewrite(a, 'Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: '/elsewhere' }), { behavior: 'allow', downloadPath: DL });
  assert.deepEqual(b.rewrite(a, 'Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: 'relative' }), { behavior: 'allow', downloadPath: DL });
  assert.deepEqual(b.rewrite(a, 'Page.setDownloadBehavior', { behavior: 'allow' }), { behavior: 'allow', downloadPath: DL });
  assert.deepEqual(b.rewrite(a, 'Browser.setDownloadBehavior', { behavior: 'deny' }), { behavior: 'deny' });
  assert.deepEqual(b.rewrite(a, 'Browser.setDownloadBehavior', { behavior: 'default', eventsEnabled: false }), { behavior: 'allow', downloadPath: DL, eventsEnabled: false });
  assert.equal(b.rewrite(a, 'Page.navigate', { url: 'x' }), undefined);
  assert.deepEqual(b.released(a), [], 'a client whose last word was `default` holds nothing');
});

test('when a client leaves, the newest setting of a client still connected comes back, else the daemon’s; per browser context', () => {
  const b = new DownloadBehaviors({ downloadsDir: DL, writableDir: () => true });
  const [x, y, z] = [{}, {}, {}];
  b.rewrite(x, 'Browser.setDownloadBehavior', { behavior: 'allowAndName', downloadPath: '/x', eventsEnabled: true });
  b.rewrite(y, 'Browser.setDownloadBehavior', { behavior: 'deny' });
  b.rewrite(z, 'Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: '/z', browserContextId: 'C1' });
  assert.deepEqual(b.released(y), [{ behavior: 'allowAndName', downloadPath: '/x', eventsEnabled: true }]);
  assert.deepEqual(b.released(x), [{ behavior: 'allow', downloadPath: DL, eventsEnabled: true }]);
  assert.deepEqual(b.released(z), [{ behavior: 'allow', downloadPath: DL, eventsEnabled: true, browserContextId: 'C1' }]);
  assert.deepEqual(b.released(z), []);
  b.rewrite(x, 'Browser.setDownloadBehavior', { behavior: 'deny' });
  b.reset();
  assert.deepEqual(b.released(x), [], 'a new Chromium: nothing held');
});

test('writableDirFor: an existing writable folder outside the state dir', () => {
  const root = mkdtempSync(path.join(tmpdir(), 'browserd-dl-units-'));
  try {
    const state = path.join(root, 'state');
    writeFileSync(path.join(root, 'file'), 'x');
    const ok = writableDirFor(state);
    assert.equal(ok(root), true);
    assert.equal(ok(path.join(root, 'missing')), false);
    assert.equal(ok(path.join(root, 'file')), false);
    mkdirSync(path.join(state, 'sub'), { recursive: true });
    assert.equal(ok(state), false, 'the state dir');
    assert.equal(ok(path.join(state, 'sub')), false, 'inside the state dir');
    assert.equal(ok(path.join(state, 'sub', '..', '..')), true, 'a path through it to a folder outside');
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("writableDirFor the agent user: the folder's owner, group and mode decide, not the daemon's rights", () => {
  const root = mkdtempSync(path.join(tmpdir(), 'browserd-dl-units-'));
  try {
    const st = statSync(root);
    const stranger = { uid: st.uid + 4242, gid: st.gid + 4242 };
    const owner = { uid: st.uid, gid: st.gid + 4242 };
    const ok = (user: { uid: number; gid: number; groups?: number[] }): boolean => writableDirFor(path.join(root, 'state'), user)(root);
    chmodSync(root, 0o700);
    assert.equal(ok(stranger), false, 'another user: 0700 of its owner');
    assert.equal(ok(owner), true, 'its owner: rwx');
    chmodSync(root, 0o733);
    assert.equal(ok(stranger), true, 'others may write and enter');
    chmodSync(root, 0o755);
    assert.equal(ok(stranger), false, 'others may only read');
    chmodSync(root, 0o770);
    assert.equal(ok({ ...stranger, groups: [st.gid] }), true, "a supplementary group of the agent's is the folder's: its group bits count");
    assert.equal(ok(stranger), false, 'without that group: the other bits');
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('the list: begin, progress, completion with the file; the oldest finished ones go past a limit, with their files in the folder only', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'browserd-dl-units-'));
  try {
    const t = new DownloadTracker({ log, downloadsDir: dir, maxCount: 2, maxBytes: 1000 });
    const fileOf = (n: string): string => path.join(dir, n);
    for (const n of ['a', 'b']) writeFileSync(fileOf(n), 'x'.repeat(100));
    t.begin({ frameId: 'f', guid: 'a', url: 'http://h/a?token=1', suggestedFilename: 'a.bin' });
    t.progress({ guid: 'a', totalBytes: 100, receivedBytes: 50, state: 'inProgress' });
    assert.equal(t.list()[0]?.state, 'in_progress');
    t.progress({ guid: 'a', totalBytes: 100, receivedBytes: 100, state: 'completed', filePath: fileOf('a') });
    t.begin({ frameId: 'f', guid: 'b', url: 'http://h/b', suggestedFilename: 'b.bin' });
    t.progress({ guid: 'b', totalBytes: 100, receivedBytes: 100, state: 'completed', filePath: fileOf('b') });
    t.begin({ frameId: 'f', guid: 'c', url: 'http://h/c', suggestedFilename: 'c.bin' });
    // Three listed past a count of 2: the oldest finished one (a) goes, with its file.
    assert.deepEqual(t.list().map((d) => d.id), ['b', 'c']);
    await until(() => 'a removed', () => !existsSync(fileOf('a')), 5000, 10);
    assert.equal(existsSync(fileOf('b')), true);
    // A download in progress is never removed; a cancelled one has no file.
    t.begin({ frameId: 'f', guid: 'd', url: 'http://h/d', suggestedFilename: 'd.bin' });
    assert.deepEqual(t.list().map((d) => d.id), ['c', 'd']);
    t.progress({ guid: 'c', totalBytes: 0, receivedBytes: 10, state: 'canceled' });
    assert.deepEqual(t.list().find((d) => d.id === 'c')?.path, null);
    // A file over the byte limit pushes the older ones out; one outside the folder is left alone.
    t.progress({ guid: 'd', totalBytes: 2000, receivedBytes: 2000, state: 'completed', filePath: '/elsewhere/d.bin' });
    assert.deepEqual(t.list().map((d) => d.id), ['c', 'd']);
    t.interrupted();
    assert.ok(t.list().every((d) => d.state !== 'in_progress'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('redactUrl: no query, fragment or credentials', () => {
  assert.equal(redactUrl('https://u:p@host:8443/a/b.zip?sig=secret#frag'), 'https://host:8443/a/b.zip');
  assert.equal(redactUrl('not a url?x=1'), 'not a url');
});
