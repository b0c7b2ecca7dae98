// @serial: writes the daemon's policy file in /etc/chromium/policies/managed, which every Chromium on the machine reads.
// Managed policies through the HTTP API with the real Chromium (it reads only that folder): a
// URLBlocklist entry for this test's own loopback origin blocks navigation there
// (ERR_BLOCKED_BY_ADMINISTRATOR) after the one restart PATCH does, shows in GET, survives a daemon
// restart and is removed again with null (the file too); the policies the daemon relies on are 422
// naming each, and change nothing.
import assert from 'node:assert/strict';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { navigate } from '../helpers/extensions.js';
import { expectError } from '../helpers/http.js';
import { browser, waitBrowser } from '../kit/browser.js';
import { tempDir } from '../kit/cleanup.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';
import { startOrigin, type Origin } from '../kit/origin.js';

const OWN_FILE = path.join('/etc/chromium/policies/managed', 'browserd-policies.json');
const stateDir = tempDir('browserd-policies-');
let d: Daemon;
let origin: Origin;
let site: string;

interface PoliciesAnswer {
  policies: Record<string, unknown>;
  file: string;
  chromium?: { restarted: boolean; pid: number | null };
}

before(async () => {
  origin = await startOrigin();
  site = origin.url;
  d = await startDaemon({ autostart: true, stateDir });
  await waitBrowser(d, (s) => s.state === 'ready');
});
after(async () => {
  await d.cleanup();
  await origin.close();
  // Only this test's daemon writes it; a failed test must not leave it for other Chromiums.
  rmSync(OWN_FILE, { force: true });
});

const patch = (policies: Record<string, unknown>): Promise<Response> => d.fetch('/browsers/local/chromium/policies', { method: 'PATCH', json: { policies } });

test('URLBlocklist for a loopback origin: blocked after one restart, in GET, kept across a daemon restart, removed with null', async () => {
  assert.equal(await navigate(d, `${site}/before`), undefined, 'reachable before');
  const pid = (await browser(d)).chromium.pid;
  const res = await patch({ URLBlocklist: [site] });
  assert.equal(res.status, 200);
  const body = (await res.json()) as PoliciesAnswer;
  assert.deepEqual(body.policies, { URLBlocklist: [site] });
  assert.equal(body.file, OWN_FILE);
  assert.equal(body.chromium?.restarted, true);
  assert.notEqual(body.chromium?.pid, pid);
  assert.deepEqual(JSON.parse(readFileSync(OWN_FILE, 'utf8')), { URLBlocklist: [site] });
  assert.equal(await navigate(d, `${site}/blocked`), 'net::ERR_BLOCKED_BY_ADMINISTRATOR');
  assert.deepEqual((await d.call<PoliciesAnswer>('/browsers/local/chromium/policies')).policies, { URLBlocklist: [site] });

  await d.stop();
  rmSync(OWN_FILE, { force: true }); // the daemon writes it again from its state at start
  d = await startDaemon({ autostart: true, stateDir });
  await waitBrowser(d, (s) => s.state === 'ready');
  assert.deepEqual((await d.call<PoliciesAnswer>('/browsers/local/chromium/policies')).policies, { URLBlocklist: [site] });
  assert.equal(await navigate(d, `${site}/still-blocked`), 'net::ERR_BLOCKED_BY_ADMINISTRATOR');

  const removed = (await (await patch({ URLBlocklist: null })).json()) as PoliciesAnswer;
  assert.deepEqual(removed.policies, {});
  assert.equal(existsSync(OWN_FILE), false, 'no policy left: no file');
  assert.equal(await navigate(d, `${site}/after`), undefined, 'reachable again');
});

test('policies the daemon relies on are 422 naming each; unknown names and wrong types 400; nothing changes', async () => {
  const pid = (await browser(d)).chromium.pid;
  const refused = await expectError(await patch({ ProxyMode: 'direct', DeveloperToolsAvailability: 2, BookmarkBarEnabled: true }), 422, 'setting_refused');
  const named = (refused.details as { message: string }[]).map((x) => x.message.split(':')[0]);
  assert.deepEqual(named, ['ProxyMode', 'DeveloperToolsAvailability']);
  const invalid = await expectError(await patch({ URLBlocklist: 'x', NotAPolicy: true }), 400, 'bad_request');
  assert.equal((invalid.details as unknown[]).length, 2);
  assert.deepEqual((await d.call<PoliciesAnswer>('/browsers/local/chromium/policies')).policies, {});
  assert.equal((await browser(d)).chromium.pid, pid, 'no restart');
  assert.equal(existsSync(OWN_FILE), false);
});
