// A Chromium that writes malformed DevTools messages on its pipe (fixtures/chromium-fake.mjs, a
// stand-in that speaks the pipe protocol on fds 3/4): the real daemon logs and counts each, keeps
// the same browser and keeps serving; an answer cut short fails its command at once.
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { CdpCallError } from '../../daemon/cdp/client.js';
import { EXCERPT_BYTES } from '../../daemon/cdp/malformed.js';
import { MALFORMED_ANSWER_CODE } from '../../daemon/cdp/wire.js';
import { browser, daemonCdp, waitBrowser } from '../kit/browser.js';
import { fixtures, startDaemon } from '../kit/daemon.js';

test('malformed messages from Chromium are logged (short excerpts) and counted; the daemon keeps serving; a cut answer fails its command at once', async () => {
  const d = await startDaemon({ autostart: true, env: { BROWSERD_CHROMIUM: path.join(fixtures, 'chromium-fake.mjs') } });
  try {
    const ready = await waitBrowser(d, (s) => s.state === 'ready', 'ready');
    const cdp = await daemonCdp(d);
    try {
      // Answered after the garbage: everything before it has been read by the daemon.
      assert.deepEqual(await cdp.send('Fake.garbage' as never), {});
      assert.deepEqual(await cdp.send('Browser.getVersion'), { protocolVersion: '1.3', product: 'FakeChromium/1.0', revision: '@0', userAgent: 'FakeChromium/1.0', jsVersion: '0' });
      await assert.rejects(cdp.send('Fake.cutAnswer' as never, {} as never, { timeoutMs: 120_000 }), (err: CdpCallError) => {
        assert.ok(err instanceof CdpCallError && err.malformed, String(err));
        assert.match(err.text, /^browserd: Chromium sent a malformed answer/);
        return true;
      });
      const again = await daemonCdp(d);
      assert.equal((await again.send('Browser.getVersion')).product, 'FakeChromium/1.0', 'a new client is served too');
      again.close();
    } finally {
      cdp.close();
    }
    const lines = d.logs.filter((l) => l.event === 'cdp_malformed_message');
    assert.deepEqual(lines.map((l) => l.reason), ['not_json', 'not_json', 'bad_shape', 'bad_shape', 'not_json', 'unknown_id', 'not_json']);
    for (const l of lines) assert.ok(String(l.excerpt).length <= EXCERPT_BYTES + 1, `a short excerpt: ${String(l.excerpt).length} characters`);
    assert.ok(Number(lines[4]?.bytes) > 200_000, 'the size of the long one, not its text');
    assert.equal(lines.at(-1)?.method, 'Fake.cutAnswer', 'the cut answer names its command');
    const metrics = await (await d.fetch('/metrics')).text();
    const count = (reason: string): number => Number(new RegExp(`browserd_cdp_malformed_messages_total\\{reason="${reason}"\\} (\\d+)`).exec(metrics)?.[1]);
    assert.deepEqual([count('not_json'), count('bad_shape'), count('unknown_id')], [4, 2, 1]);
    const now = await browser(d);
    assert.deepEqual([now.state, now.chromium.pid], ['ready', ready.chromium.pid], 'the same browser, still ready');
    assert.equal(MALFORMED_ANSWER_CODE, -32099);
  } finally {
    await d.cleanup();
  }
});
