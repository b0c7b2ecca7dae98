// @long: ChromeDriver's sessions take seconds each on a busy machine.
// WebDriver through the daemon (docs/webdriver.md) with real clients against the daemon's real
// Chromium and loopback pages: selenium-webdriver (classic), the `webdriver` package (BiDi over a
// classic session's webSocketUrl), puppeteer-core over webdriver_ws_url (BiDi only); refused
// capabilities; the tabs a session opened, and only those, closed at its end; a Chromium restart
// answering a session's client within seconds; and the agent user reaching neither ChromeDriver nor
// its DevTools endpoint.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { Builder, By, until as seleniumUntil } from 'selenium-webdriver';
import { Driver as ChromeDriverClient, Options as ChromeOptions } from 'selenium-webdriver/chrome.js';
import type * as SeleniumHttp from 'selenium-webdriver/http.js';
import WebDriver from 'webdriver';
import puppeteer from 'puppeteer-core';
import WebSocket from 'ws';
import { daemonCdp, waitBrowser } from '../kit/browser.js';
import { TEST_TOKEN, startDaemon, type Daemon } from '../kit/daemon.js';
import { AGENT_USER } from '../kit/agent.js';
import { until, within } from '../kit/wait.js';

let d: Daemon;
let origin: http.Server;
let page: string;
const auth = { authorization: `Bearer ${TEST_TOKEN}` };

const FORM = `<!doctype html><title>form</title>
<input id="name"><button id="go" onclick="document.getElementById('out').textContent = 'hello ' + document.getElementById('name').value">go</button>
<p id="out"></p><script>console.log('page says hi')</script>`;

before(async () => {
  d = await startDaemon({ autostart: true });
  origin = http.createServer((req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(req.url === '/form' ? FORM : `<title>page ${req.url}</title>`));
  await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
  page = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
  await waitBrowser(d, (s) => s.state === 'ready', 'ready');
});
after(async () => {
  await d.cleanup();
  await new Promise<void>((resolve) => origin.close(() => resolve()));
});

const serverUrl = (): string => `${d.url}/browsers/local/webdriver`;

// selenium-webdriver's http module is a folder of CommonJS (its index.js): required, with its types.
const { Executor, HttpClient } = createRequire(import.meta.url)('selenium-webdriver/http') as typeof SeleniumHttp;

/** selenium-webdriver's HTTP client with the bearer token on every command. */
class BearerClient extends HttpClient {
  override send(req: SeleniumHttp.Request): Promise<SeleniumHttp.Response> {
    (req as unknown as { headers: Map<string, string> }).headers.set('Authorization', `Bearer ${TEST_TOKEN}`);
    return super.send(req);
  }
}

function selenium(): Promise<ChromeDriverClient> {
  return Promise.resolve(ChromeDriverClient.createSession(new ChromeOptions(), new Executor(new BearerClient(serverUrl()))));
}

async function pageTargets(): Promise<string[]> {
  const cdp = await daemonCdp(d);
  try {
    const { targetInfos } = await cdp.send('Target.getTargets');
    return targetInfos.filter((t) => t.type === 'page').map((t) => t.targetId);
  } finally {
    cdp.close();
  }
}

test('selenium-webdriver: get a loopback page, find an element, type, click, take a screenshot', async () => {
  const driver = await selenium();
  try {
    await driver.get(`${page}/form`);
    assert.equal(await driver.getTitle(), 'form');
    await driver.findElement(By.id('name')).sendKeys('selenium');
    await driver.findElement(By.css('#go')).click();
    const out = await driver.wait(seleniumUntil.elementLocated(By.id('out')), 10_000);
    await driver.wait(async () => (await out.getText()) !== '', 10_000);
    assert.equal(await out.getText(), 'hello selenium');
    const png = Buffer.from(await driver.takeScreenshot(), 'base64');
    assert.equal(png.subarray(1, 4).toString(), 'PNG');
  } finally {
    await driver.quit();
  }
  assert.ok(new Builder(), 'the Builder is the usual entry; the executor carries the token');
});

test('a session closed by its client closes the tabs it opened, and only those', async () => {
  const before = new Set(await pageTargets());
  const cdp = await daemonCdp(d);
  try {
    const { targetId: cdpTab } = await cdp.send('Target.createTarget', { url: `${page}/cdp-tab` });
    const driver = await selenium();
    await driver.switchTo().newWindow('tab');
    const own = await driver.getWindowHandle();
    assert.ok(!before.has(own) && own !== cdpTab);
    await driver.get(`${page}/webdriver-tab`);
    await driver.quit();
    const after = await until('the session\'s tab closed', async () => {
      const now = await pageTargets();
      return now.includes(own) ? undefined : now;
    });
    assert.ok(after.includes(cdpTab), 'the CDP client\'s tab stays');
    for (const t of before) assert.ok(after.includes(t), `the tab ${t} that was there before stays`);
    await cdp.send('Target.closeTarget', { targetId: cdpTab });
  } finally {
    cdp.close();
  }
});

test('a WebDriver session coexists with a CDP client and the computer controls', async () => {
  const driver = await selenium();
  const cdp = await puppeteer.connect({ browserURL: `${d.url}/browsers/local/cdp`, headers: auth });
  try {
    await driver.get(`${page}/form`);
    const tab = await cdp.newPage();
    await tab.goto(`${page}/cdp-side`);
    const shot = await d.fetch('/browsers/local/computer/screenshot', { method: 'POST', json: {} });
    assert.equal(shot.status, 200);
    assert.equal(Buffer.from(await shot.arrayBuffer()).subarray(1, 4).toString(), 'PNG');
    await driver.findElement(By.id('name')).sendKeys('both');
    await driver.findElement(By.id('go')).click();
    await driver.wait(async () => (await driver.findElement(By.id('out')).getText()) === 'hello both', 10_000);
    assert.equal(await tab.title(), 'page /cdp-side');
    await tab.close();
  } finally {
    await cdp.disconnect();
    await driver.quit();
  }
});

test('capabilities that launch another binary or add --no-sandbox are refused with 400 bad_request', async () => {
  const cases: [string, Record<string, unknown>, RegExp][] = [
    ['binary', { alwaysMatch: { 'goog:chromeOptions': { binary: '/bin/sh' } } }, /alwaysMatch\.goog:chromeOptions\.binary/],
    ['--no-sandbox', { firstMatch: [{ 'goog:chromeOptions': { args: ['--no-sandbox'] } }] }, /firstMatch\[0\]\.goog:chromeOptions\.args/],
    ['debuggerAddress', { alwaysMatch: { 'goog:chromeOptions': { debuggerAddress: '127.0.0.1:1' } } }, /debuggerAddress/],
  ];
  for (const [what, capabilities, detail] of cases) {
    const res = await d.fetch('/browsers/local/webdriver/session', { method: 'POST', json: { capabilities } });
    assert.equal(res.status, 400, what);
    const body = (await res.json()) as { code: string; details: { message: string }[] };
    assert.equal(body.code, 'bad_request', what);
    assert.match(body.details[0]?.message ?? '', detail, what);
  }
  // Over BiDi: session.new is answered with BiDi's error, the daemon's message and details in it.
  const snap = (await (await d.fetch('/browsers/local')).json()) as { webdriver_ws_url: string };
  const ws = new WebSocket(snap.webdriver_ws_url);
  await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
  const answer = new Promise<Record<string, unknown>>((resolve) => ws.once('message', (data: Buffer) => resolve(JSON.parse(data.toString()) as Record<string, unknown>)));
  ws.send(JSON.stringify({ id: 1, method: 'session.new', params: { capabilities: { alwaysMatch: { 'goog:chromeOptions': { args: ['--no-sandbox'] } } } } }));
  const refused = await answer;
  ws.close();
  assert.equal(refused.type, 'error');
  assert.equal(refused.error, 'invalid argument');
  assert.match(String(refused.message), /^bad_request: .*goog:chromeOptions\.args/);
  // Through selenium too: its session is refused, nothing runs.
  const opts = new ChromeOptions().addArguments('--no-sandbox');
  await assert.rejects(Promise.resolve(ChromeDriverClient.createSession(opts, new Executor(new BearerClient(serverUrl())))).then((dr) => dr.getSession()));
});

/** Waits until the page targets are those of `before` again (a session leaves no tab of its own: not even ChromeDriver's BiDi mapper). */
async function noTabLeft(before: Set<string>): Promise<void> {
  await until('no tab of the ended session left', async () => ((await pageTargets()).every((t) => before.has(t)) ? true : undefined));
}

test('webdriver (BiDi over the session\'s webSocketUrl): log.entryAdded sees a console.log, script.evaluate answers', async () => {
  const before = new Set(await pageTargets());
  const url = new URL(serverUrl());
  const client = await WebDriver.newSession({
    protocol: 'http',
    hostname: url.hostname,
    port: Number(url.port),
    path: url.pathname,
    headers: auth,
    logLevel: 'warn',
    capabilities: { browserName: 'chrome', webSocketUrl: true },
  });
  try {
    assert.match(String(client.capabilities.webSocketUrl), /^ws:\/\/127\.0\.0\.1:\d+\/browsers\/local\/webdriver\/session\/[^/?]+\?jwt=/);
    const logs: string[] = [];
    client.on('log.entryAdded', (e: { text?: string | null }) => logs.push(e.text ?? ''));
    await client.sessionSubscribe({ events: ['log.entryAdded'] });
    const { contexts } = await client.browsingContextGetTree({});
    const context = contexts[0]!.context;
    await client.browsingContextNavigate({ context, url: `${page}/form`, wait: 'complete' });
    await until('the console.log as a log.entryAdded event', async () => (logs.includes('page says hi') ? true : undefined));
    const r = (await client.scriptEvaluate({ expression: '6 * 7', target: { context }, awaitPromise: false })) as { type: string; result?: { type: string; value?: unknown } };
    assert.equal(r.type, 'success');
    assert.deepEqual(r.result, { type: 'number', value: 42 });
  } finally {
    await client.deleteSession();
  }
  await noTabLeft(before);
});

test('puppeteer-core over webdriver_ws_url (WebDriver BiDi, session.new over the socket)', async () => {
  const snap = (await (await d.fetch('/browsers/local')).json()) as { webdriver_ws_url: string };
  assert.match(snap.webdriver_ws_url, /^ws:\/\/.+\/browsers\/local\/webdriver\/session\?jwt=/);
  const before = new Set(await pageTargets());
  const browser = await puppeteer.connect({ browserWSEndpoint: snap.webdriver_ws_url, protocol: 'webDriverBiDi' });
  try {
    const tab = await browser.newPage();
    await tab.goto(`${page}/puppeteer-bidi`);
    assert.equal(await tab.title(), 'page /puppeteer-bidi');
    assert.equal(await tab.evaluate(() => 6 * 7), 42);
    await tab.close();
  } finally {
    await browser.disconnect();
  }
  await noTabLeft(before);
});

test('the agent user reaches neither ChromeDriver nor its DevTools endpoint', async () => {
  const started = await until('ChromeDriver started', async () => d.logs.findLast((l) => l.event === 'chromedriver_started'));
  const pid = started.pid as number;
  const dir = started.dir as string;
  // ChromeDriver's user is its own: neither the agent's nor root.
  const uid = Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
  const agentUid = Number(readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.startsWith(`${AGENT_USER}:`))?.split(':')[2]);
  assert.ok(uid !== 0 && uid !== agentUid, `ChromeDriver runs as uid ${uid}`);
  // The ports ChromeDriver and the DevTools relay listen on, as its own namespace sees them.
  const listening = [
    ...new Set(
      ['tcp', 'tcp6'].flatMap((table) =>
        readFileSync(`/proc/${pid}/net/${table}`, 'utf8')
          .split('\n')
          .slice(1)
          .map((l) => l.trim().split(/\s+/))
          .filter((f) => f[3] === '0A') // LISTEN
          .map((f) => parseInt((f[1] as string).split(':').at(-1) as string, 16)),
      ),
    ),
  ];
  assert.equal(listening.length, 2, `ChromeDriver's port and the DevTools port: ${listening.join(', ')}`);
  const tries = [
    ...listening.map((port) => ['-sS', '--max-time', '5', `http://127.0.0.1:${port}/json/version`]),
    ...listening.map((port) => ['-sS', '--max-time', '5', `http://127.0.0.1:${port}/status`]),
    ['-sS', '--max-time', '5', '--unix-socket', `${dir}/webdriver.sock`, 'http://localhost/status'],
    ['-sS', '--max-time', '5', '--unix-socket', `${dir}/devtools.sock`, 'http://localhost/json/version'],
  ];
  for (const args of tries) {
    const res = await d.fetch('/browsers/local/process/exec', { method: 'POST', json: { command: 'curl', args, as_user: AGENT_USER } });
    assert.equal(res.status, 200);
    const r = (await res.json()) as { exit_code: number; stdout_b64: string; stderr_b64: string };
    const out = Buffer.from(r.stdout_b64, 'base64').toString();
    assert.notEqual(r.exit_code, 0, `curl ${args.join(' ')} must fail; it printed ${out}`);
    assert.doesNotMatch(out, /ready|webSocketDebuggerUrl/);
  }
});

test('a ChromeDriver that dies is started again on the next request', async () => {
  const first = await until('ChromeDriver started', async () => d.logs.findLast((l) => l.event === 'chromedriver_started'));
  process.kill(-(first.pid as number), 'SIGKILL');
  await d.waitLog((l) => l.event === 'chromedriver_exited' && l.pid === first.pid, 30_000);
  const res = await d.fetch('/browsers/local/webdriver/status');
  assert.equal(res.status, 200);
  assert.equal(((await res.json()) as { value: { ready: boolean } }).value.ready, true);
  const again = d.logs.findLast((l) => l.event === 'chromedriver_started');
  assert.notEqual(again?.pid, first.pid);
});

test('a Chromium restart during a session answers its client within seconds (an error, not a hang), and a new session works', async () => {
  const driver = await selenium();
  await driver.get(`${page}/before-restart`);
  const restart = await d.fetch('/browsers/local/restart', { method: 'POST' });
  assert.equal(restart.status, 200);
  // The session's client hears it ended (an error), rather than waiting without end.
  const answered = driver.getTitle().then(
    () => 'answered',
    () => 'error',
  );
  assert.ok(await within(answered, 30_000), 'the command is answered');
  assert.equal(await answered, 'error');
  const again = await selenium();
  try {
    await again.get(`${page}/after-restart`);
    assert.equal(await again.getTitle(), 'page /after-restart');
  } finally {
    await again.quit();
  }
});
