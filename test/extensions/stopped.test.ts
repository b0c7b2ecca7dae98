// Uploads while Chromium is not running. A stopped (BROWSERD_BROWSER_AUTOSTART=false) or failed
// browser is not launched by an upload: the extensions are installed and apply at its next
// launch, and the browser stays exactly as it was (no launch, no crash restart armed behind it:
// either would show in its state at once). Also: a state dir with a comma takes no uploads.
import assert from 'node:assert/strict';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { expectError } from '../helpers/http.js';
import { chromiumExtensions, expectUploaded, indexed, installedList, upload } from '../helpers/extensions.js';
import { fixtureZip } from '../helpers/zip.js';
import { browser, waitBrowser, type Snapshot } from '../kit/browser.js';
import { tempDir } from '../kit/cleanup.js';
import { fixtures, startDaemon, type Daemon } from '../kit/daemon.js';

const BACKOFF_MS = 20;
const policyDir = tempDir('browserd-ext-stopped-policy-');
let d: Daemon;

before(async () => {
  d = await startDaemon({
    // Autostart off: the browser is `stopped`. The fixture fails to start until "fixture-allow-start" exists.
    env: {
      BROWSERD_CHROMIUM: path.join(fixtures, 'chromium-crash.sh'),
      BROWSERD_RESTART_BACKOFF_MS: String(BACKOFF_MS),
      BROWSERD_RESTART_BACKOFF_MAX_MS: String(BACKOFF_MS),
      BROWSERD_CRASH_LOOP_MAX: '3',
      BROWSERD_POLICY_DIR: policyDir,
    },
  });
});
after(async () => {
  await d.cleanup();
  rmSync(policyDir, { recursive: true, force: true });
});

const LAUNCH_EVENTS = new Set(['chromium_restart', 'chromium_launched', 'chromium_launch_failed']);

/**
 * The browser was left as it was: no launch during the upload, and none armed behind it. Both show
 * in the state at once, no waiting needed: a launch asked for sets `starting` before it queues for
 * the lifecycle lock, and a crash restart sets `restarting` (and logs chromium_restart) before it
 * arms its backoff timer (chromium/supervisor.ts).
 */
async function leftAsItWas(was: Snapshot, logsBefore: number): Promise<void> {
  const launches = (): unknown[] => d.logs.slice(logsBefore).filter((l) => LAUNCH_EVENTS.has(l.event ?? ''));
  assert.deepEqual(launches(), [], 'no launch for the upload');
  const now = await browser(d);
  assert.equal(now.state, was.state);
  assert.equal(now.chromium.restarts, was.chromium.restarts);
  assert.equal(now.chromium.pid, null);
  assert.deepEqual(launches(), [], 'no crash restart armed behind it');
}

test('a stopped browser is not started by an upload: installed, activation `restart`, applied at the next launch', async () => {
  const was = await browser(d);
  assert.equal(was.state, 'stopped');
  const mark = d.logs.length;
  const body = await expectUploaded(await upload(d, indexed([['later', fixtureZip('content-script')]])));
  assert.deepEqual(body.extensions.map((e) => [e.name, e.version, e.activation]), [['later', '2.1', 'restart']]);
  assert.deepEqual(body.chromium, { restarted: false, pid: null, ready_ms: 0 });
  assert.deepEqual((await installedList(d)).map((e) => e.name), ['later']);
  assert.ok(d.logs.some((l) => l.event === 'extension_activation_deferred' && l.state === 'stopped'));
  await leftAsItWas(was, mark);
});

test('policy installs while stopped: written and kept; replacing one needs two launches, so 503', async () => {
  const was = await browser(d);
  const mark = d.logs.length;
  const body = await expectUploaded(await upload(d, indexed([['blocker', fixtureZip('webrequest-blocking')]])));
  assert.deepEqual(body.extensions.map((e) => [e.name, e.activation]), [['blocker', 'policy']]);
  assert.equal(body.chromium.restarted, false);
  const forcelist = JSON.parse(readFileSync(path.join(policyDir, 'browserd-extensions.json'), 'utf8')) as { ExtensionInstallForcelist: string[] };
  assert.equal(forcelist.ExtensionInstallForcelist[0]?.split(';')[0], body.extensions[0]?.id);

  const err = await expectError(await upload(d, indexed([['blocker', fixtureZip('webrequest-blocking', { manifest: { version: '2.0' } })]])), 503, 'browser_unavailable');
  assert.match(String(err.message), /Chromium is stopped: replacing the policy install blocker takes two Chromium launches/);
  assert.equal((await installedList(d)).find((e) => e.name === 'blocker')?.version, '1.0');

  assert.equal((await d.fetch('/browsers/local/extensions/blocker', { method: 'DELETE' })).status, 204);
  assert.equal(existsSync(path.join(policyDir, 'browserd-extensions.json')), false);
  await leftAsItWas(was, mark);
});

test('a failed browser is not launched by an upload either', async () => {
  await expectError(await d.fetch('/browsers/local/restart', { method: 'POST' }), 503, 'browser_unavailable');
  const was = await waitBrowser(d, (b) => b.state === 'failed');
  const mark = d.logs.length;
  const body = await expectUploaded(await upload(d, indexed([['also-later', fixtureZip('mv3-worker')]])));
  assert.deepEqual(body.extensions.map((e) => [e.name, e.activation]), [['also-later', 'restart']]);
  assert.deepEqual(body.chromium, { restarted: false, pid: null, ready_ms: 0 });
  await leftAsItWas(was, mark);
});

test('the next launch applies what was installed meanwhile', async () => {
  writeFileSync(path.join(d.agentDir, 'fixture-allow-start'), '');
  const res = await d.fetch('/browsers/local/restart', { method: 'POST' });
  assert.equal(res.status, 200, await res.text());
  const list = await installedList(d);
  assert.deepEqual(list.map((e) => e.name).sort(), ['also-later', 'later']);
  const running = await chromiumExtensions(d);
  for (const e of list) assert.equal(running.get(e.id), e.version, e.name);
});

test('an agent dir with a comma in its path (the kit puts it beside the state dir) takes no uploads: 422 activation_failed naming the cause', async () => {
  const stateDir = tempDir('browserd-ext,comma-');
  const c = await startDaemon({ stateDir });
  try {
    await c.waitLog((l) => l.event === 'extensions_unusable');
    const err = await expectError(await upload(c, indexed([['x', fixtureZip('content-script')]])), 422, 'activation_failed');
    assert.equal((err.inner_error as { code: string }).code, 'state_dir_unusable');
    assert.match(String(err.message), /has a comma in its path.*BROWSERD_AGENT_DIR/);
    assert.deepEqual(await installedList(c), []);
  } finally {
    await c.cleanup();
    rmSync(stateDir, { recursive: true, force: true });
  }
});
