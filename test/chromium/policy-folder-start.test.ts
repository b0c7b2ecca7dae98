// Before each launch the daemon makes the policy folder hold exactly its state dir's policies: a
// policy file an earlier run left while the settings have none is removed (before: it stayed in force
// while GET …/chromium/policies answered {}); one that differs from the settings is written over;
// other files of the folder are not the daemon's and stay; a daemon that launches nothing leaves the
// folder alone. Each in its own policy folder (not the machine's).
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { tempDir } from '../kit/cleanup.js';
import { waitBrowser } from '../kit/browser.js';
import { startDaemon } from '../kit/daemon.js';

const FILE = 'browserd-policies.json';

test("a stale policy file of an earlier run is removed when the settings have no policies; another file of the folder stays", async () => {
  const dir = tempDir('browserd-policy-start-');
  writeFileSync(path.join(dir, FILE), JSON.stringify({ BookmarkBarEnabled: false }));
  writeFileSync(path.join(dir, 'someone-else.json'), JSON.stringify({ HomepageLocation: 'https://example.test/' }));
  // A daemon that launches no Chromium leaves the machine's folder alone (test daemons share it).
  const idle = await startDaemon({ env: { BROWSERD_POLICY_DIR: dir } });
  try {
    assert.ok(existsSync(path.join(dir, FILE)), 'untouched while nothing launches');
  } finally {
    await idle.cleanup();
  }
  const d = await startDaemon({ autostart: true, env: { BROWSERD_POLICY_DIR: dir } });
  try {
    await waitBrowser(d, (s) => s.state === 'ready', 'ready');
    assert.equal(existsSync(path.join(dir, FILE)), false, 'the stale file is gone');
    assert.ok(existsSync(path.join(dir, 'someone-else.json')), "a file not the daemon's stays");
    assert.deepEqual((await d.call<{ policies: unknown }>('/browsers/local/chromium/policies')).policies, {});
    const line = d.logs.find((l) => l.event === 'browser_policies_stale');
    assert.equal(line?.action, 'removed');
  } finally {
    await d.cleanup();
  }
});

test("a policy file that differs from the state dir's policies is written over with them", async () => {
  const dir = tempDir('browserd-policy-start-');
  const stateDir = tempDir('browserd-policy-state-');
  mkdirSync(stateDir, { recursive: true });
  writeFileSync(path.join(stateDir, 'browser-settings.json'), JSON.stringify({ version: 1, viewport: null, policies: { BookmarkBarEnabled: true }, flags: [] }));
  writeFileSync(path.join(dir, FILE), JSON.stringify({ BookmarkBarEnabled: false, URLBlocklist: ['*'] }));
  const d = await startDaemon({ stateDir, autostart: true, env: { BROWSERD_POLICY_DIR: dir } });
  try {
    await waitBrowser(d, (s) => s.state === 'ready', 'ready');
    assert.deepEqual(JSON.parse(readFileSync(path.join(dir, FILE), 'utf8')), { BookmarkBarEnabled: true });
    assert.deepEqual((await d.call<{ policies: unknown }>('/browsers/local/chromium/policies')).policies, { BookmarkBarEnabled: true });
    assert.equal(d.logs.find((l) => l.event === 'browser_policies_stale')?.action, 'rewritten');
  } finally {
    await d.cleanup();
  }
});
