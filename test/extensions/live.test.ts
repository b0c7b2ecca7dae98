// @long: one of the slowest files (10 s or more alone), started first by test/run.mjs.
// Live activation with the real Chromium: upload → `live`, the worker visible through the
// daemon's CDP endpoint; a manifest Chromium refuses is a rejection (the request's other items
// taken out again, no restart); the set survives a kill -9 of Chromium and a daemon restart; a
// live failure (test hook) → `restart`; a failed activation puts the previous version back; DELETE.
// Each test has a daemon and a Chromium of its own: any one runs alone (--test-name-pattern).
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { expectError } from '../helpers/http.js';
import { chromiumExtensions, expectUploaded, indexed, installedList, upload, watchTargets } from '../helpers/extensions.js';
import { fixtureZip } from '../helpers/zip.js';
import { browser, waitBrowser } from '../kit/browser.js';
import { tempDir } from '../kit/cleanup.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';

const HOOKS = 'fail-live-activation=via-restart,fail-activation=worker@2.0.0';

/** A daemon of this test alone (its state dir kept for a restart), Chromium ready; cleaned up after the test. */
async function daemon(t: TestContext, stateDir = tempDir('browserd-ext-live-')): Promise<Daemon> {
  const d = await startDaemon({ autostart: true, stateDir, env: { BROWSERD_POLICY_DIR: tempDir('browserd-ext-live-policy-'), BROWSERD_TEST_HOOKS: HOOKS } });
  t.after(() => d.cleanup());
  await waitBrowser(d, (b) => b.state === 'ready', 'ready');
  return d;
}

/** Such a daemon with `worker` (mv3-worker 1.0.0) installed live; its id. */
async function withWorker(t: TestContext): Promise<{ d: Daemon; workerId: string }> {
  const d = await daemon(t);
  const body = await expectUploaded(await upload(d, indexed([['worker', fixtureZip('mv3-worker')]])));
  assert.equal(body.extensions[0]?.activation, 'live');
  return { d, workerId: body.extensions[0]?.id ?? '' };
}

test('an upload activates live: 200, same Chromium, the worker target visible through the CDP endpoint', async (t) => {
  const d = await daemon(t);
  const pid = (await browser(d)).chromium.pid;
  const targets = await watchTargets(d);
  t.after(() => targets.close());
  const body = await expectUploaded(await upload(d, indexed([['worker', fixtureZip('mv3-worker')]])));
  assert.equal(body.extensions.length, 1);
  const [ext] = body.extensions;
  assert.equal(ext?.name, 'worker');
  assert.equal(ext?.version, '1.0.0');
  assert.equal(ext?.activation, 'live');
  assert.match(ext?.id ?? '', /^[a-p]{32}$/);
  assert.deepEqual(body.chromium, { restarted: false, pid, ready_ms: 0 });
  const workerId = ext?.id ?? '';

  const target = await targets.worker(workerId);
  assert.equal(target.url, `chrome-extension://${workerId}/worker.js`);
  assert.equal((await chromiumExtensions(d)).get(workerId), '1.0.0');
  assert.deepEqual((await installedList(d)).map((e) => [e.name, e.activation]), [['worker', 'live']]);
  const b = await browser(d);
  assert.deepEqual(b.extensions.map((e) => e.name), ['worker']);
  assert.equal(b.chromium.pid, pid);
  assert.ok(d.logs.some((l) => l.event === 'extension_activated' && l.name === 'worker' && l.mode === 'live' && l.id === workerId && typeof l.ms === 'number'));
  const metrics = await (await d.fetch('/metrics')).text();
  assert.match(metrics, /browserd_extension_activations_total\{mode="live",outcome="ok"\} 1/);
});

/** Nothing of a rejected request stayed: same Chromium, same set, same extensions running, same files. */
async function unchangedBy(d: Daemon, run: () => Promise<void>): Promise<void> {
  const before = await browser(d);
  const list = await installedList(d);
  const running = await chromiumExtensions(d);
  const mark = d.logs.length;
  await run();
  assert.equal((await browser(d)).chromium.pid, before.chromium.pid, 'Chromium kept running as it was');
  assert.deepEqual(d.logs.slice(mark).filter((l) => l.event === 'chromium_restart'), [], 'no restart');
  assert.deepEqual(await installedList(d), list);
  assert.deepEqual(await chromiumExtensions(d), running, 'the same extensions, at the same versions, run in Chromium');
  assert.deepEqual(readdirSync(path.join(d.agentDir, 'extensions', 'installed')).sort(), list.map((e) => e.name).sort());
  assert.deepEqual(readdirSync(path.join(d.agentDir, 'extensions', 'previous')), []);
}

test('default_locale without _locales is rejected before Chromium: 422 extension_rejected, the good item not loaded', async (t) => {
  const { d } = await withWorker(t);
  await unchangedBy(d, async () => {
    const res = await upload(d, indexed([['good', fixtureZip('content-script')], ['locale', fixtureZip('broken-default-locale')]]));
    const err = await expectError(res, 422, 'extension_rejected');
    assert.deepEqual(err.inner_error, { code: 'manifest_invalid', message: 'manifest.json: default_locale: is "en", but the archive has no _locales folder' });
    assert.deepEqual((err.details as { message: string }[]).map((x) => x.message), ['extensions[1] (locale): manifest.json: default_locale: is "en", but the archive has no _locales folder']);
  });
});

test('a manifest Chromium refuses: 422 extension_rejected (chromium_refused), the items loaded before it taken out, no restart', async (t) => {
  const { d, workerId } = await withWorker(t);
  await unchangedBy(d, async () => {
    const res = await upload(
      d,
      indexed([
        ['worker', fixtureZip('mv3-worker', { manifest: { version: '1.1' } })],
        ['good', fixtureZip('content-script')],
        ['refused', fixtureZip('refused-by-chromium')],
      ]),
    );
    const err = await expectError(res, 422, 'extension_rejected');
    const inner = err.inner_error as { code: string; message: string };
    assert.equal(inner.code, 'chromium_refused');
    assert.match(inner.message, /^Chromium refused to load it: .*Insecure CSP value "'unsafe-eval'"/);
    assert.deepEqual((err.details as { code: string }[]).map((x) => x.code), ['chromium_refused']);
    assert.match((err.details as { message: string }[])[0]?.message ?? '', /^extensions\[2\] \(refused\): /);
  });
  assert.equal((await chromiumExtensions(d)).get(workerId), '1.0.0', 'the replaced extension is back at its previous version');
  assert.ok(d.logs.some((l) => l.event === 'extension_rollback' && l.how === 'cdp'));
});

test('the extension comes back after a kill -9 of Chromium', async (t) => {
  const { d, workerId } = await withWorker(t);
  const before = await browser(d);
  process.kill(before.chromium.pid as number, 'SIGKILL');
  await waitBrowser(d, (b) => b.state === 'ready' && b.chromium.pid !== null && b.chromium.pid !== before.chromium.pid, 'ready again on a new Chromium');
  assert.equal((await chromiumExtensions(d)).get(workerId), '1.0.0');
});

test('a live activation that fails is done by a restart: `restart`, every extension running', async (t) => {
  const { d, workerId } = await withWorker(t);
  const pid = (await browser(d)).chromium.pid;
  const body = await expectUploaded(await upload(d, indexed([['via-restart', fixtureZip('mv3-worker', { manifest: { version: '3.0' } })]])));
  assert.equal(body.extensions[0]?.activation, 'restart');
  assert.equal(body.chromium.restarted, true);
  assert.notEqual(body.chromium.pid, pid);
  assert.equal((await browser(d)).chromium.pid, body.chromium.pid);
  const running = await chromiumExtensions(d);
  assert.equal(running.get(body.extensions[0]?.id ?? ''), '3.0');
  assert.equal(running.get(workerId), '1.0.0');
  assert.ok(d.logs.some((l) => l.event === 'extension_live_failed'));
});

test('a replacement that fails to activate: 422 activation_failed, the previous version back and running', async (t) => {
  const { d, workerId } = await withWorker(t);
  const res = await upload(d, indexed([['worker', fixtureZip('mv3-worker', { manifest: { version: '2.0.0' } })]]));
  const err = await expectError(res, 422, 'activation_failed');
  assert.equal((err.inner_error as { code: string }).code, 'not_verified');
  const list = await installedList(d);
  assert.equal(list.find((e) => e.name === 'worker')?.version, '1.0.0');
  const manifest = JSON.parse(readFileSync(path.join(d.agentDir, 'extensions', 'installed', 'worker', 'manifest.json'), 'utf8')) as { version: string };
  assert.equal(manifest.version, '1.0.0');
  await waitBrowser(d, (b) => b.state === 'ready', 'ready');
  assert.equal((await chromiumExtensions(d)).get(workerId), '1.0.0');
  const metrics = await (await d.fetch('/metrics')).text();
  assert.match(metrics, /browserd_extension_activations_total\{mode="restart",outcome="failed"\} 1/);
});

test('a replacement that activates: same id, the new version live', async (t) => {
  const { d, workerId } = await withWorker(t);
  const res = await upload(d, indexed([['worker', fixtureZip('mv3-worker', { manifest: { version: '1.5' } })]]));
  const body = await expectUploaded(res);
  const liveFailed = d.logs.filter((l) => l.event === 'extension_live_failed' && l.req_id === res.headers.get('x-request-id'));
  assert.deepEqual(body.extensions, [{ name: 'worker', id: workerId, version: '1.5', activation: 'live' }], `live activation failed: ${JSON.stringify(liveFailed)}`);
  assert.equal((await chromiumExtensions(d)).get(workerId), '1.5');
});

test('DELETE: 204, gone from the list and from Chromium; unknown: 404', async (t) => {
  const { d, workerId } = await withWorker(t);
  const added = await expectUploaded(await upload(d, indexed([['content', fixtureZip('content-script')]])));
  const id = added.extensions[0]?.id ?? '';
  assert.equal((await chromiumExtensions(d)).has(id), true);
  const pid = (await browser(d)).chromium.pid;
  const res = await d.fetch('/browsers/local/extensions/content', { method: 'DELETE' });
  assert.equal(res.status, 204);
  assert.deepEqual((await installedList(d)).map((e) => e.name), ['worker']);
  const running = await chromiumExtensions(d);
  assert.equal(running.has(id), false);
  assert.equal(running.has(workerId), true);
  assert.equal((await browser(d)).chromium.pid, pid, 'Extensions.uninstall, no restart');
  await expectError(await d.fetch('/browsers/local/extensions/content', { method: 'DELETE' }), 404, 'not_found');
  await expectError(await d.fetch('/browsers/local/extensions/never-was', { method: 'DELETE' }), 404, 'not_found');
});

test('the installed set is applied after a daemon restart on the same state dir', async (t) => {
  const { d, workerId } = await withWorker(t);
  await d.stop();
  const again = await daemon(t, d.stateDir);
  assert.deepEqual((await installedList(again)).map((e) => [e.name, e.version]), [['worker', '1.0.0']]);
  assert.equal((await chromiumExtensions(again)).get(workerId), '1.0.0');
});
