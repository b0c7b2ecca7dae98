// Chromium flags through the HTTP API: a flag with an effect a page sees (--user-agent) takes
// effect after the one restart PATCH does, shows in GET, survives a daemon restart and is removed
// again; flags off the allowlist (those the daemon owns among them) and malformed ones are 400 naming
// each; neither changes anything (every hostile switch: flag-allowlist.test.ts).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { expectError } from '../helpers/http.js';
import { evalInTab } from '../helpers/settings.js';
import { browser, waitBrowser } from '../kit/browser.js';
import { tempDir } from '../kit/cleanup.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';
import { startOrigin, type Origin } from '../kit/origin.js';

const stateDir = tempDir('browserd-flags-');
const UA = 'browserd-flags-test/1.0';
let d: Daemon;
let origin: Origin;
let site: string;

interface FlagsAnswer {
  flags: string[];
  operator_flags: string[];
  chromium?: { restarted: boolean; pid: number | null };
}

before(async () => {
  origin = await startOrigin();
  site = `${origin.url}/`;
  d = await startDaemon({ autostart: true, stateDir });
  await waitBrowser(d, (s) => s.state === 'ready');
});
after(async () => {
  await d.cleanup();
  await origin.close();
});

const patch = (json: unknown): Promise<Response> => d.fetch('/browsers/local/chromium/flags', { method: 'PATCH', json });
const userAgent = (): Promise<string> => evalInTab<string>(d, site, 'navigator.userAgent');

test('a flag: in effect after one restart, in GET, kept across a daemon restart, removed again', async () => {
  const pid = (await browser(d)).chromium.pid;
  const body = (await (await patch({ flags: [`--user-agent=${UA}`] })).json()) as FlagsAnswer;
  assert.deepEqual(body.flags, [`--user-agent=${UA}`]);
  assert.equal(body.chromium?.restarted, true);
  assert.notEqual(body.chromium?.pid, pid);
  assert.equal(await userAgent(), UA);

  await d.stop();
  d = await startDaemon({ autostart: true, stateDir });
  await waitBrowser(d, (s) => s.state === 'ready');
  assert.deepEqual((await d.call<FlagsAnswer>('/browsers/local/chromium/flags')).flags, [`--user-agent=${UA}`]);
  assert.equal(await userAgent(), UA);

  const removed = (await (await patch({ remove: ['--user-agent'] })).json()) as FlagsAnswer;
  assert.deepEqual(removed.flags, []);
  assert.notEqual(await userAgent(), UA);
});

test('flags off the allowlist are 400 naming each, a malformed one too; nothing changes', async () => {
  const before = await browser(d);
  const refused = await expectError(await patch({ flags: ['--remote-debugging-port=9222', '--proxy-server=http://10.0.0.1:8080', '--lang=de'] }), 400, 'bad_request');
  assert.deepEqual(
    (refused.details as { message: string }[]).map((x) => x.message.split(' ')[1]),
    ['--remote-debugging-port', '--proxy-server'],
  );
  const malformed = await expectError(await patch({ flags: ['lang=de'] }), 400, 'bad_request');
  assert.match(String(malformed.message), /flags\[0\]: "lang=de" is not a --flag/);
  assert.deepEqual((await d.call<FlagsAnswer>('/browsers/local/chromium/flags')).flags, []);
  const now = await browser(d);
  assert.equal(now.chromium.pid, before.chromium.pid, 'no restart');
});
