// @serial: writes to /etc/chromium/policies/managed, which every Chromium on the machine reads.
// Policy mode with the real Chromium and its real managed-policy directory (Chromium reads only
// /etc/chromium/policies/managed): an extension asking for webRequestBlocking is force-installed
// (CRX3 + loopback update server + forcelist) and its blocking listener works (once the extension
// says it is in place: the daemon cannot see into a force-installed worker, so the first request
// after the answer may come before the listener — the race that made this file flaky); with
// ExtensionInstallBlocklist ["*"] (written by the test for as short as it can, always removed)
// an ordinary extension goes the policy way too; DELETE removes them and, last, the policy file.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { expectUploaded, indexed, installedList, navigate, upload, watchTargets } from '../helpers/extensions.js';
import { fixtureZip } from '../helpers/zip.js';
import { waitBrowser } from '../kit/browser.js';
import { tempDir } from '../kit/cleanup.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';

const POLICY_DIR = '/etc/chromium/policies/managed';
const OWN_FILE = path.join(POLICY_DIR, 'browserd-extensions.json');
const BLOCKLIST = path.join(POLICY_DIR, `browserd-test-blocklist-${process.pid}.json`);
const stateDir = tempDir('browserd-ext-policy-');
const env = {
  // Background networking is on while a policy install exists: Chromium may reach loopback only.
  BROWSERD_CHROMIUM_FLAGS: '--host-resolver-rules="MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"',
};
let d: Daemon;
const ids: Record<string, string> = {};

before(async () => {
  d = await startDaemon({ autostart: true, stateDir, env });
  await waitBrowser(d, (b) => b.state === 'ready');
});
after(async () => {
  rmSync(BLOCKLIST, { force: true });
  await d.cleanup();
  rmSync(stateDir, { recursive: true, force: true });
  // Only this test's daemon writes it; a failed test must not leave it for other Chromiums.
  rmSync(OWN_FILE, { force: true });
});

/** The fixture opens this tab from onInstalled, after its blocking listener is in place. */
const READY_TAB = 'about:blank#browserd-fixture-ready';
/** Waits for the webrequest-blocking fixture to say it blocks (a tab of its own). */
async function blockerReady(): Promise<void> {
  const targets = await watchTargets(d);
  try {
    await targets.page(READY_TAB);
  } finally {
    targets.close();
  }
}

const forcelist = (): string[] => (JSON.parse(readFileSync(OWN_FILE, 'utf8')) as { ExtensionInstallForcelist: string[] }).ExtensionInstallForcelist;
const installed = async (id: string): Promise<boolean> => (await navigate(d, `chrome-extension://${id}/manifest.json`)) === undefined;

test('webRequestBlocking: a policy install through a restart; its blocking listener cancels requests', async () => {
  const body = await expectUploaded(await upload(d, indexed([['blocker', fixtureZip('webrequest-blocking')]])));
  const [ext] = body.extensions;
  assert.equal(ext?.activation, 'policy');
  assert.equal(body.chromium.restarted, true);
  ids.blocker = ext?.id ?? '';
  assert.deepEqual(forcelist().map((e) => e.split(';')[0]), [ids.blocker]);
  assert.match(forcelist()[0] ?? '', new RegExp(`^${ids.blocker};http://127\\.0\\.0\\.1:\\d+/${ids.blocker}/updates\\.xml$`));
  assert.ok(await installed(ids.blocker));
  await blockerReady();

  const targets = await watchTargets(d);
  try {
    assert.equal(await navigate(d, `${d.url}/healthz?browserd-blocked`), 'net::ERR_BLOCKED_BY_CLIENT');
    const worker = await targets.worker(ids.blocker);
    assert.equal(worker.url, `chrome-extension://${ids.blocker}/worker.js`);
  } finally {
    targets.close();
  }
  assert.equal(await navigate(d, `${d.url}/healthz`), undefined, 'other requests pass');
});

test('managed policy blocking unpacked extensions: an ordinary extension is force-installed', async () => {
  mkdirSync(POLICY_DIR, { recursive: true });
  let body;
  try {
    writeFileSync(BLOCKLIST, JSON.stringify({ ExtensionInstallBlocklist: ['*'] }));
    body = await expectUploaded(await upload(d, indexed([['blocked-worker', fixtureZip('mv3-worker')]])));
  } finally {
    rmSync(BLOCKLIST, { force: true });
  }
  const [ext] = body.extensions;
  assert.equal(ext?.activation, 'policy');
  ids.worker = ext?.id ?? '';
  assert.ok(d.logs.some((l) => l.event === 'extension_activated' && l.name === 'blocked-worker' && l.mode === 'policy'));
  assert.deepEqual(forcelist().map((e) => e.split(';')[0]).sort(), [ids.blocker, ids.worker].sort());
  assert.ok(await installed(ids.worker));
  assert.ok(await installed(ids.blocker), 'the first one stays');
  assert.deepEqual((await installedList(d)).map((e) => [e.name, e.activation]), [['blocker', 'policy'], ['blocked-worker', 'policy']]);
});

test('policy installs survive a daemon restart: same forcelist, still installed', async () => {
  const before = forcelist();
  await d.stop();
  d = await startDaemon({ autostart: true, stateDir, env });
  await waitBrowser(d, (b) => b.state === 'ready');
  assert.deepEqual(forcelist(), before, 'the update server is back on the same port');
  assert.ok(await installed(ids.blocker ?? ''));
  assert.ok(await installed(ids.worker ?? ''));
});

test('a policy install is replaced, even by a lower version: same id, still blocking', async () => {
  const body = await expectUploaded(await upload(d, indexed([['blocker', fixtureZip('webrequest-blocking', { manifest: { version: '0.9' } })]])));
  assert.deepEqual(body.extensions, [{ name: 'blocker', id: ids.blocker, version: '0.9', activation: 'policy' }]);
  assert.equal((await installedList(d)).find((e) => e.name === 'blocker')?.version, '0.9');
  assert.ok(await installed(ids.worker ?? ''), 'the other policy install stays');
  await blockerReady();
  assert.equal(await navigate(d, `${d.url}/healthz?browserd-blocked`), 'net::ERR_BLOCKED_BY_CLIENT');
});

test('DELETE: out of the forcelist and out of Chromium; the last one removes the policy file', async () => {
  assert.equal((await d.fetch('/browsers/local/extensions/blocked-worker', { method: 'DELETE' })).status, 204);
  assert.deepEqual(forcelist().map((e) => e.split(';')[0]), [ids.blocker]);
  await waitBrowser(d, (b) => b.state === 'ready');
  assert.equal(await installed(ids.worker ?? ''), false);
  assert.equal((await d.fetch('/browsers/local/extensions/blocker', { method: 'DELETE' })).status, 204);
  assert.equal(existsSync(OWN_FILE), false);
  assert.equal(await installed(ids.blocker ?? ''), false);
  assert.deepEqual(await installedList(d), []);
});
