// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The installed set on disk (Store) and its crash recovery. An install is a transaction whose id
// is recorded in installed.json before any folder moves and cleared with the commit: a daemon
// killed before the commit comes back with the replaced versions; one killed after it (before
// previous/ was dropped) keeps the new versions. Both disk states are built by hand here.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { createLogger } from '../../daemon/core/log.js';
import { Store, type InstalledEntry } from '../../daemon/extensions/store.js';
import { scratchDirs } from '../kit/cleanup.js';

const fresh = scratchDirs('browserd-ext-store-');
const log = createLogger('silent');

const entry = (name: string, version: string): InstalledEntry => ({
  name,
  id: 'a'.repeat(32),
  version,
  activation: 'live',
  installed_at: '2024-01-01T00:00:00.000Z',
  service_worker: null,
});

/** Writes <dir>/manifest.json marking the version. */
function tree(dir: string, version: string): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify({ version }));
}

const versionIn = (dir: string): string => (JSON.parse(readFileSync(path.join(dir, 'manifest.json'), 'utf8')) as { version: string }).version;

interface DiskState {
  /** installed.json's extensions. */
  set: InstalledEntry[];
  pendingTx: string | null;
  /** installed/<name> → version. */
  installed: Record<string, string>;
  /** previous/<tx>/<name> → version. */
  previous: Record<string, Record<string, string>>;
}

/** The state dir as a daemon killed at some point would leave it. */
function disk(s: DiskState): string {
  const state = fresh();
  const ext = path.join(state, 'extensions');
  mkdirSync(ext, { recursive: true });
  const json = { version: 1, update_port: null, policy_file_written: false, pending_tx: s.pendingTx, extensions: s.set };
  writeFileSync(path.join(ext, 'installed.json'), JSON.stringify(json));
  for (const [name, v] of Object.entries(s.installed)) tree(path.join(ext, 'installed', name), v);
  for (const [tx, names] of Object.entries(s.previous)) for (const [name, v] of Object.entries(names)) tree(path.join(ext, 'previous', tx, name), v);
  return state;
}

const savedPending = (state: string): unknown => (JSON.parse(readFileSync(path.join(state, 'extensions', 'installed.json'), 'utf8')) as { pending_tx?: unknown }).pending_tx;

describe('crash recovery', () => {
  test('killed after the swap, before the commit: the replaced version comes back, the newcomer goes', async () => {
    const tx = randomUUID();
    const state = disk({
      set: [entry('kept', '1'), entry('replaced', '1')],
      pendingTx: tx,
      installed: { kept: '1', replaced: '2', newcomer: '1' },
      previous: { [tx]: { replaced: '1' } },
    });
    const s = new Store(state, log);
    await s.open();
    assert.deepEqual([...s.committed.keys()], ['kept', 'replaced']);
    assert.equal(versionIn(s.installedPath('replaced')), '1');
    assert.equal(versionIn(s.installedPath('kept')), '1');
    assert.equal(existsSync(s.installedPath('newcomer')), false);
    assert.deepEqual(readdirSync(s.previousDir), []);
    assert.equal(s.pendingTx, null);
    assert.equal(savedPending(state), null, 'the recovery is recorded');
  });

  test('killed after the commit, before previous/ was dropped: the new version stays', async () => {
    const tx = randomUUID();
    const state = disk({
      set: [entry('replaced', '2'), entry('newcomer', '1')],
      pendingTx: null,
      installed: { replaced: '2', newcomer: '1' },
      previous: { [tx]: { replaced: '1' } },
    });
    const s = new Store(state, log);
    await s.open();
    assert.deepEqual([...s.committed.values()].map((e) => [e.name, e.version]), [['replaced', '2'], ['newcomer', '1']]);
    assert.equal(versionIn(s.installedPath('replaced')), '2', 'the committed version, not the old files under the new entry');
    assert.equal(versionIn(s.installedPath('newcomer')), '1');
    assert.deepEqual(readdirSync(s.previousDir), []);
  });

  test('killed between putting the old version aside and placing the new one', async () => {
    const tx = randomUUID();
    const state = disk({ set: [entry('replaced', '1')], pendingTx: tx, installed: {}, previous: { [tx]: { replaced: '1' } } });
    const s = new Store(state, log);
    await s.open();
    assert.equal(versionIn(s.installedPath('replaced')), '1');
    assert.deepEqual([...s.committed.keys()], ['replaced']);
  });

  test('leftovers of another transaction than the pending one are dropped, not restored', async () => {
    const tx = randomUUID();
    const stale = randomUUID();
    const state = disk({
      set: [entry('a', '2')],
      pendingTx: tx,
      installed: { a: '2' },
      previous: { [stale]: { a: '1' } },
    });
    const s = new Store(state, log);
    await s.open();
    assert.equal(versionIn(s.installedPath('a')), '2');
    assert.deepEqual(readdirSync(s.previousDir), []);
  });
});

describe('transactions', () => {
  /** An opened store on a fresh state dir with `x` at version 1 installed and saved. */
  async function storeWithX(): Promise<{ state: string; s: Store }> {
    const state = fresh();
    const s = new Store(state, log);
    await s.open();
    tree(s.installedPath('x'), '1');
    s.committed.set('x', entry('x', '1'));
    await s.save();
    return { state, s };
  }

  /** Places `x` at version 2 (staged beside the store) where the old one was put aside. */
  async function placeX2(state: string, s: Store): Promise<void> {
    const staged = path.join(state, 'tree');
    tree(staged, '2');
    await s.place('x', staged);
  }

  test('begin → put aside → place → commit: the set and the end of the install in one write', async () => {
    const { state, s } = await storeWithX();
    const tx = await s.begin();
    assert.equal(savedPending(state), tx, 'recorded before any folder moves');
    const aside = await s.putAside(tx, 'x');
    assert.equal(aside, path.join(s.previousDir, tx, 'x'));
    await placeX2(state, s);
    await assert.rejects(s.begin(), /still in progress/);
    await s.commit(tx, [entry('x', '2')]);
    assert.equal(savedPending(state), null);
    assert.deepEqual(readdirSync(s.previousDir), []);

    const again = new Store(state, log);
    await again.open();
    assert.equal(again.committed.get('x')?.version, '2');
    assert.equal(versionIn(again.installedPath('x')), '2');
  });

  test('an undone install: restore() and abort() put the old version back', async () => {
    const { state, s } = await storeWithX();
    const tx = await s.begin();
    const aside = await s.putAside(tx, 'x');
    await placeX2(state, s);
    await s.restore('x', aside);
    await s.abort(tx);
    assert.equal(versionIn(s.installedPath('x')), '1');
    assert.equal(savedPending(state), null);
    assert.deepEqual(readdirSync(s.previousDir), []);
  });

  test('an unreadable installed.json is set aside, not fatal', async () => {
    const state = fresh();
    mkdirSync(path.join(state, 'extensions'), { recursive: true });
    writeFileSync(path.join(state, 'extensions', 'installed.json'), '{broken');
    const s = new Store(state, log);
    await s.open();
    assert.equal(s.committed.size, 0);
    assert.ok(readdirSync(path.join(state, 'extensions')).some((f) => f.startsWith('installed.json.unreadable-')));
  });
});
