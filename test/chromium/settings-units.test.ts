// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The checks of the browser's configuration, without Chromium: the viewport setting and its limits,
// policy names and types and the refused ones, flag shapes and the refused ones, the merges, and
// the launch flags a viewport gives.
import assert from 'node:assert/strict';
import { readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { createLogger } from '../../daemon/core/log.js';
import { SETTINGS_FILE, SettingsStore } from '../../daemon/chromium/settings/store.js';
import { loadConfig } from '../../daemon/core/config.js';
import { parseViewport } from '../../daemon/core/viewport.js';
import { settingsError } from '../../daemon/core/errors.js';
import { checkApiFlags, mergeFlags } from '../../daemon/chromium/settings/api-flags.js';
import { checkPolicies, mergePolicies } from '../../daemon/chromium/settings/policies.js';
import { viewportFlags } from '../../daemon/chromium/settings/viewport.js';
import { tempDir } from '../kit/cleanup.js';

test('BROWSERD_VIEWPORT: 1920x1080 unless set; WIDTHxHEIGHT[@HZ] within the limits', () => {
  const base = { BROWSERD_STATE_DIR: tempDir('browserd-vp-') };
  assert.deepEqual(loadConfig(base).chromium.viewport, { width: 1920, height: 1080 });
  assert.deepEqual(loadConfig({ ...base, BROWSERD_VIEWPORT: '1280x720@30' }).chromium.viewport, { width: 1280, height: 720, refresh_rate: 30 });
  assert.throws(() => loadConfig({ ...base, BROWSERD_VIEWPORT: '1280*720' }), /BROWSERD_VIEWPORT.*WIDTHxHEIGHT|WIDTHxHEIGHT/);
  assert.throws(() => parseViewport('99x720'), /width 99 is outside 100 to 7680/);
  assert.throws(() => parseViewport('800x600@0'), /refresh rate 0/);
});

test('viewport flags: headless screen and fullscreen windows; headful window size and position', () => {
  assert.deepEqual(viewportFlags({ width: 1280, height: 720 }, true), ['--screen-info={0,0 1280x720}', '--kiosk', '--window-size=1280,720']);
  assert.deepEqual(viewportFlags({ width: 1280, height: 720 }, false), ['--window-size=1280,720', '--window-position=0,0']);
});

test('policies: names and JSON types checked, the ones the daemon relies on refused with why, null removes', () => {
  assert.deepEqual(checkPolicies({ URLBlocklist: ['example.com'], BookmarkBarEnabled: true, RestoreOnStartup: 4, HomepageLocation: null }), { refused: [], invalid: [] });
  const p = checkPolicies({ URLBlocklist: 'example.com', NoSuchPolicy: 1, RestoreOnStartup: 1.5, ProxyMode: 'direct', ExtensionInstallForcelist: [] });
  assert.deepEqual(p.invalid, [
    'policies.URLBlocklist: must be a list of strings, or null to remove it',
    'policies.NoSuchPolicy: not a policy this daemon knows (names are case-sensitive; the list: docs/browser-configuration.md)',
    'policies.RestoreOnStartup: must be an integer, or null to remove it',
  ]);
  assert.equal(p.refused.length, 2);
  assert.match(p.refused[0]!, /^ProxyMode: refused, .*forwarding proxy/);
  assert.match(p.refused[1]!, /^ExtensionInstallForcelist: refused/);
  assert.deepEqual(mergePolicies({ A: 1, B: 2 }, { A: null, C: 3 }), { B: 2, C: 3 });
  assert.deepEqual(checkPolicies({ toString: true, constructor: 1 }).invalid.length, 2, 'no inherited names pass');
});

test('flags: shape checked, owned ones refused (start and API), merged by name', () => {
  assert.deepEqual(checkApiFlags(['--lang=de', '--force-dark-mode']), { refused: [], invalid: [] });
  // Every flag that routes around the forwarding proxy (where the egress policy is judged: docs/egress.md).
  const around = ['--proxy-server=http://x', '--proxy-bypass-list=*', '--proxy-pac-url=http://x/p.pac', '--no-proxy-server', '--proxy-auto-detect', '--host-resolver-rules=MAP * 127.0.0.1', '--host-rules=MAP a b', '--force-webrtc-ip-handling-policy=default'];
  assert.deepEqual(checkApiFlags(around).refused.map((r) => r.split(':')[0]), around.map((f) => f.split('=')[0]));
  const f = checkApiFlags(['lang=de', '--Bad', '--x=a\nb', '--remote-debugging-port=9222', '--user-data-dir=/tmp/x', '--proxy-server=http://x', '--window-size=1,1']);
  assert.equal(f.invalid.length, 3);
  assert.match(f.invalid[0]!, /^flags\[0\]: "lang=de" is not a --flag/);
  assert.deepEqual(
    f.refused.map((r) => r.split(':')[0]),
    ['--remote-debugging-port', '--user-data-dir', '--proxy-server', '--window-size'],
  );
  assert.deepEqual(mergeFlags(['--lang=de', '--a'], ['--lang=fr', '--b', '--b=2'], ['--a']), ['--lang=fr', '--b=2']);
});

test('settings errors: any invalid part is 400 bad_request, only refusals 422 setting_refused; every problem in details', () => {
  const both = settingsError(['viewport: width 1 is outside 100 to 7680'], ['ProxyMode: refused, x']).toBody();
  assert.equal(both.code, 'bad_request');
  assert.deepEqual(both.details?.map((x) => x.code), ['invalid_input', 'refused']);
  const refused = settingsError([], ['ProxyMode: refused, x', '--no-sandbox: refused, y']).toBody();
  assert.equal(refused.code, 'setting_refused');
  assert.match(refused.message, /^ProxyMode: refused, x \(and 1 more problem\)$/);
  // configure's references to what does not exist: not_found details, 422 unless a part is invalid.
  const missing = settingsError([], ['--no-sandbox: refused, y'], ['profile: no profile named p']).toBody();
  assert.equal(missing.code, 'setting_refused');
  assert.deepEqual(missing.details, [
    { code: 'refused', message: '--no-sandbox: refused, y' },
    { code: 'not_found', message: 'profile: no profile named p' },
  ]);
  assert.equal(settingsError(['flags: bad'], [], ['profile: no profile named p']).toBody().code, 'bad_request');
  assert.equal(settingsError([], [], ['extensions[0]: no installed extension named x']).toBody().code, 'setting_refused');
});

test('settings store: written atomically and read back; a broken file is set aside, never overwritten', async () => {
  const dir = tempDir('browserd-settings-');
  const log = createLogger('silent');
  const s = SettingsStore.open(dir, log);
  assert.deepEqual(s.get(), { viewport: null, policies: {}, flags: [] });
  await s.set({ viewport: { width: 800, height: 600 }, policies: { BookmarkBarEnabled: true }, flags: ['--lang=de'] });
  assert.deepEqual(SettingsStore.open(dir, log).get(), { viewport: { width: 800, height: 600 }, policies: { BookmarkBarEnabled: true }, flags: ['--lang=de'] });
  writeFileSync(path.join(dir, SETTINGS_FILE), '{"version": 1, "viewport": ');
  assert.deepEqual(SettingsStore.open(dir, log).get(), { viewport: null, policies: {}, flags: [] });
  assert.equal(readdirSync(dir).filter((n) => n.startsWith(`${SETTINGS_FILE}.broken-`)).length, 1);
});
