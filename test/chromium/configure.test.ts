// @serial: writes the daemon's policy file in /etc/chromium/policies/managed, which every Chromium on the machine reads.
// POST /browsers/{id}/configure through the HTTP API with the real Chromium: a start URL, a flag, a
// policy, a viewport, an installed extension and a stored profile in one request are one restart
// (one new pid) with every part in effect; the same request with bad parts (an owned flag, an
// unknown profile) changes nothing, and every problem is listed in `details`. (The extension and
// profile parts in depth, without the machine's policy folder: configure-parts.test.ts.)
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { chromiumExtensions, expectUploaded, indexed, navigate, upload } from '../helpers/extensions.js';
import { fixtureZip } from '../helpers/zip.js';
import { expectError } from '../helpers/http.js';
import { evalInTab, pageUrls } from '../helpers/settings.js';
import { browser, waitBrowser } from '../kit/browser.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';
import { until } from '../kit/wait.js';

const OWN_FILE = path.join('/etc/chromium/policies/managed', 'browserd-policies.json');
const UA = 'browserd-configure-test/1.0';
let d: Daemon;
const servers: http.Server[] = [];
let site: string;
let blocked: string;

async function serve(): Promise<string> {
  const s = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<title>ok</title>'));
  servers.push(s);
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
}

before(async () => {
  site = await serve();
  blocked = await serve();
  d = await startDaemon({ autostart: true });
  await waitBrowser(d, (s) => s.state === 'ready');
});
after(async () => {
  await d.cleanup();
  for (const s of servers) await new Promise<void>((resolve) => s.close(() => resolve()));
  rmSync(OWN_FILE, { force: true });
});

interface Settings {
  policies: Record<string, unknown>;
  flags: string[];
}
const settingsNow = async (): Promise<{ viewport: unknown; policies: unknown; flags: unknown; pid: number | null; restarts: number }> => {
  const b = await browser(d);
  return {
    viewport: b.viewport,
    policies: (await d.call<Settings>('/browsers/local/chromium/policies')).policies,
    flags: (await d.call<Settings>('/browsers/local/chromium/flags')).flags,
    pid: b.chromium.pid,
    restarts: b.chromium.restarts,
  };
};

test('start URL, flag, policy, viewport, extension and profile: one restart, every part in effect', async () => {
  const ext = (await expectUploaded(await upload(d, indexed([['worker', fixtureZip('mv3-worker')]])))).extensions[0];
  await d.call('/profiles', { method: 'POST', json: { name: 'q' } }, 201);
  const before = await browser(d);
  const start = `${site}/start`;
  const res = await d.fetch('/browsers/local/configure', {
    method: 'POST',
    json: {
      start_url: start,
      flags: [`--user-agent=${UA}`],
      policies: { URLBlocklist: [blocked] },
      viewport: { width: 1024, height: 768 },
      extensions: [{ id: ext?.id }],
      profile: { name: 'q' },
    },
  });
  assert.equal(res.status, 200, await res.clone().text());
  const body = (await res.json()) as { chromium: { restarted: boolean; pid: number } };
  assert.equal(body.chromium.restarted, true);
  const after = await browser(d);
  assert.equal(after.chromium.restarts, before.chromium.restarts + 1, 'one restart');
  assert.notEqual(after.chromium.pid, before.chromium.pid);
  assert.equal(after.chromium.pid, body.chromium.pid);
  await until('the start page open', async () => (await pageUrls(d)).includes(start));
  assert.equal(await evalInTab<string>(d, `${site}/ua`, 'navigator.userAgent'), UA);
  assert.deepEqual(await evalInTab<number[]>(d, `${site}/size`, '[innerWidth, innerHeight]'), [1024, 768]);
  assert.equal(await navigate(d, `${blocked}/x`), 'net::ERR_BLOCKED_BY_ADMINISTRATOR');
  assert.equal((await chromiumExtensions(d)).get(ext?.id ?? ''), '1.0.0', 'the extension enabled in Chromium');
  assert.equal(((await browser(d)) as unknown as { profile?: { name: string } }).profile?.name, 'q');
});

test('one bad part: nothing changes, every problem in details', async () => {
  const was = await settingsNow();
  const res = await d.fetch('/browsers/local/configure', {
    method: 'POST',
    json: { start_url: `${site}/other`, flags: ['--no-sandbox', '--lang=de'], policies: { URLBlocklist: null, BookmarkBarEnabled: true }, viewport: { width: 800, height: 600 }, profile: { name: 'p' } },
  });
  const err = await expectError(res, 400, 'bad_request');
  assert.deepEqual(
    (err.details as { code: string; message: string }[]).map((x) => [x.code, x.message.split(':')[0]]),
    [['invalid_input', 'flags[0]'], ['not_found', 'profile']],
  );
  assert.deepEqual(await settingsNow(), was);
  const invalid = await expectError(await d.fetch('/browsers/local/configure', { method: 'POST', json: { viewport: { width: 1, height: 600 }, policies: { Nope: 1 } } }), 400, 'bad_request');
  assert.equal((invalid.details as unknown[]).length, 2);
  assert.deepEqual(await settingsNow(), was);
  // Leave no policy behind for other Chromiums.
  await d.call('/browsers/local/chromium/policies', { method: 'PATCH', json: { policies: { URLBlocklist: null } } });
});
