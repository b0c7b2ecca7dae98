// chrome-remote-interface, a CDP client with no option for headers, through the daemon's CDP
// endpoint with the session token of `?jwt=` (the cdp_ws_url of GET /browsers/{id}): it drives a
// page; without a token, or with a token that lacks the cdp scope, the upgrade is refused.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import CDP from 'chrome-remote-interface';
import { waitBrowser } from '../kit/browser.js';
import { TEST_TOKEN, keysFile, startDaemon, type Daemon } from '../kit/daemon.js';
import { htmlPage, startOrigin, type Origin } from '../kit/origin.js';

const READER = 'reader-token-aaaaaaaaaaaaaaaa';
let d: Daemon;
let origin: Origin;
let page: string;

before(async () => {
  const keys = keysFile([
    { id: 'admin', token: TEST_TOKEN, scopes: ['browser:read', 'cdp'] },
    { id: 'reader', token: READER, scopes: ['browser:read'] },
  ]);
  d = await startDaemon({ autostart: true, token: null, bearer: TEST_TOKEN, env: { BROWSERD_KEYS_FILE: keys } });
  origin = await startOrigin(htmlPage((req) => `<title>cri ${req.url}</title>`));
  page = origin.url;
  await waitBrowser(d, (s) => s.state === 'ready', 'ready');
});
after(async () => {
  await d.cleanup();
  await origin.close();
});

const cdpWsUrl = async (token: string): Promise<string> => (await d.call<{ cdp_ws_url: string }>('/browsers/local', { headers: { authorization: `Bearer ${token}` } })).cdp_ws_url;

test('chrome-remote-interface reaches the CDP endpoint with ?jwt= and drives a page', async () => {
  const url = await cdpWsUrl(TEST_TOKEN);
  assert.match(url, /\/browsers\/local\/cdp\?jwt=/);
  const client = await CDP({ target: url, local: true });
  try {
    const version = await client.Browser.getVersion();
    assert.match(version.product, /Chrome/);
    const { targetId } = await client.Target.createTarget({ url: 'about:blank' });
    const { sessionId } = await client.Target.attachToTarget({ targetId, flatten: true });
    const nav = await client.send('Page.navigate', { url: `${page}/one` }, sessionId);
    assert.equal(nav.errorText, undefined);
    const expression = "new Promise((r) => (document.readyState === 'complete' ? r(document.title) : addEventListener('load', () => r(document.title))))";
    const title = await client.send('Runtime.evaluate', { expression, awaitPromise: true, returnByValue: true }, sessionId);
    assert.equal(title.result.value, 'cri /one');
    await client.Target.closeTarget({ targetId });
  } finally {
    await client.close();
  }
  const line = await d.waitLog((l) => l.event === 'upgrade' && l.route === '/browsers/{id}/cdp');
  assert.equal(line.key_id, 'jwt:self');
});

test('without a token, or with one that lacks the cdp scope, the upgrade is refused', async () => {
  const bare = (await cdpWsUrl(TEST_TOKEN)).split('?')[0] as string;
  await assert.rejects(CDP({ target: bare, local: true }), /Unexpected server response: 401/);
  const readerUrl = await cdpWsUrl(READER);
  await assert.rejects(CDP({ target: readerUrl, local: true }), /Unexpected server response: 403/);
});
