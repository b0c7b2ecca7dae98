// Telemetry redacts by what a value is, wherever it appears, against real Chromium: secrets placed in
// a URL's query and fragment, the Referer of the next request, a redirect's target, a cookie (as a
// header and as console text), console text holding a URL, an authorization value and a JWT, a
// WebSocket URL, and a script's URL in a stack frame. None of
// them is in any event; the events that carried them are there, redacted.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { daemonCdp, waitBrowser } from '../kit/browser.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';
import { until } from '../kit/wait.js';

const S = {
  query: 'qs-token-1f4e',
  apiKey: 'qs-apikey-8c2d',
  fragment: 'frag-token-77ab',
  redirect: 'redir-password-3e9f',
  cookie: 'cookie-session-51c0',
  consoleUrl: 'console-code-a0b1',
  bearer: 'bearer-secret-c3d4e5',
  jwtSig: 'jwtsig9f8e7d6c',
  ws: 'ws-token-2b3c',
  script: 'script-token-4d5e',
};
const JWT = `eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.${S.jwtSig}`;

let d: Daemon;
let origin: http.Server;
let base: string;

before(async () => {
  origin = http.createServer((req, res) => {
    const url = req.url ?? '/';
    if (url.startsWith('/redirect')) {
      res.writeHead(302, { location: `/landing?password=${S.redirect}` }).end();
      return;
    }
    if (url.startsWith('/lib.js')) {
      res.writeHead(200, { 'content-type': 'text/javascript' }).end('function boom() { throw new Error("from lib"); }\nsetTimeout(boom, 0);\n');
      return;
    }
    if (url.startsWith('/start')) {
      res
        .writeHead(200, { 'content-type': 'text/html', 'set-cookie': `session=${S.cookie}; Path=/` })
        .end(
          `<title>start</title><script src="/lib.js?token=${S.script}"></script><script>
          window.done = (async () => {
            location.hash = 'access_token=${S.fragment}';
            await fetch('/next');                       // its Referer is this page's URL, secrets and all
            await fetch('/redirect');                   // to /landing?password=…
            console.log('cookie: ' + document.cookie);
            console.log('go to https://idp.test/cb?code=${S.consoleUrl}&state=x');
            console.log('Authorization: Bearer ${S.bearer}');
            console.log('jwt ${JWT}');
            await new Promise((resolve) => { const ws = new WebSocket('ws://127.0.0.1:${(origin.address() as AddressInfo).port}/ws?token=${S.ws}'); ws.onerror = ws.onclose = resolve; });
            console.log('redaction-done');
            return true;
          })();</script>`,
        );
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
  });
  origin.on('upgrade', (_req, socket) => socket.end('HTTP/1.1 400 Bad Request\r\n\r\n'));
  await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
  d = await startDaemon({ autostart: true });
  await waitBrowser(d, (s) => s.state === 'ready', 'ready');
  await d.call('/browsers/local/telemetry', { method: 'PATCH', json: { browser: { console: { enabled: true }, network: { enabled: true }, page: { enabled: true } } } });
});
after(async () => {
  await d.cleanup();
  await new Promise<void>((resolve) => origin.close(() => resolve()));
});

interface Envelope {
  seq: number;
  event: { type: string; data?: Record<string, unknown> };
}

test('secrets in a URL, a Referer, a redirect, a cookie, console text, a WebSocket URL and a stack frame never reach an event', async () => {
  const cdp = await daemonCdp(d);
  try {
    const { targetId } = await cdp.send('Target.createTarget', { url: `${base}/start?token=${S.query}&api_key=${S.apiKey}&page=1` });
    const { sessionId } = await cdp.send('Target.attachToTarget', { targetId, flatten: true });
    await until('the page ran its script', async () => {
      const r = await cdp.send('Runtime.evaluate', { expression: 'window.done', awaitPromise: true, returnByValue: true }, { sessionId });
      return r.result.value === true ? true : undefined;
    });
  } finally {
    cdp.close();
  }
  const events = async (): Promise<Envelope[]> => {
    const out: Envelope[] = [];
    for (;;) {
      const page = await d.call<Envelope[]>(`/browsers/local/telemetry/events?offset=${(out.at(-1)?.seq ?? 0) + 1}&limit=100`);
      out.push(...page);
      if (page.length < 100) return out;
    }
  };
  let last = '';
  const all = await until(() => `the page's last console line and the redirect's landing; seen: ${last}`, async () => {
    const es = await events();
    const text = JSON.stringify(es);
    last = es.map((e) => e.event.type).join(' ');
    return text.includes('redaction-done') && text.includes('/landing') ? es : undefined;
  });
  const raw = JSON.stringify(all);
  for (const [what, secret] of Object.entries(S)) assert.ok(!raw.includes(secret), `the ${what} secret (${secret}) leaked into telemetry`);
  // The carriers are there, redacted (not dropped).
  const referer = all.find((e) => e.event.type === 'network_request' && String(e.event.data?.url).endsWith('/next'));
  const headers = referer?.event.data?.headers as Record<string, string> | undefined;
  assert.match(String(headers?.Referer ?? headers?.referer), /\/start\?token=(%5B|\[)redacted/, JSON.stringify(headers));
  assert.ok(all.some((e) => e.event.type === 'network_request' && /\/landing\?password=(%5B|\[)redacted/.test(String(e.event.data?.url))), 'the redirect target, redacted');
  assert.match(raw, /https:\/\/idp\.test\/cb\?code=(%5B|\[)redacted/, 'the URL in console text, redacted');
  assert.ok(raw.includes('Bearer [redacted]'));
  assert.ok(raw.includes('session=[redacted]'));
});
