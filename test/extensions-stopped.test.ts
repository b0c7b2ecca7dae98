// Uploads while Chromium is not running: an extension is activated by starting Chromium with it
// (`restart`); when Chromium cannot start, 503 and nothing of the request stays installed.
import assert from 'node:assert/strict';
import { readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fixtures, startDaemon, type Daemon } from './helpers/daemon.js';
import { expectError } from './helpers/http.js';
import { browser, chromiumExtensions, expectUploaded, indexed, installedList, upload } from './helpers/extensions.js';
import { fixtureZip } from './helpers/zip.js';

let d: Daemon;

before(async () => {
  d = await startDaemon({
    // Autostart off: the browser is `stopped`. The fixture fails to start until "fixture-allow-start" exists.
    env: { BROWSERD_CHROMIUM: path.join(fixtures, 'chromium-crash.sh'), BROWSERD_RESTART_BACKOFF_MS: '60000' },
  });
});
after(() => d.cleanup());

test('Chromium cannot start: 503, nothing of the request installed', async () => {
  assert.equal((await browser(d)).state, 'stopped');
  await expectError(await upload(d, indexed([['never', fixtureZip('content-script')]])), 503, 'browser_unavailable');
  assert.deepEqual(await installedList(d), []);
  const ext = path.join(d.stateDir, 'extensions');
  assert.deepEqual(readdirSync(path.join(ext, 'installed')), []);
  assert.deepEqual(readdirSync(path.join(ext, 'staging')), []);
  assert.ok(d.logs.some((l) => l.event === 'extension_activation_failed' && l.cause === 'browser_unavailable'));
});

test('a stopped browser is started with the extension: `restart`', async () => {
  writeFileSync(path.join(d.stateDir, 'fixture-allow-start'), '');
  const body = await expectUploaded(await upload(d, indexed([['started', fixtureZip('content-script')]])));
  assert.equal(body.extensions[0]?.activation, 'restart');
  assert.equal(body.chromium.restarted, true);
  const b = await browser(d);
  assert.equal(b.state, 'ready');
  assert.equal(b.chromium.pid, body.chromium.pid);
  assert.equal((await chromiumExtensions(d)).get(body.extensions[0]?.id ?? ''), '2.1');
});
