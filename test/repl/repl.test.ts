// The persistent REPL against the real daemon, real Chromium and a real worker process: bindings
// survive between calls; console output and the last value come back as text; a throw is
// success: false with its stack; repl.emitImage of a screenshot is a PNG; an accessibility
// snapshot of a loopback form names its fields; fillInput and pressKey reach the page; a timeout
// ends the process (repl_terminated, a new repl_id, the state gone) and the next call works.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { expectError } from '../helpers/http.js';
import { waitBrowser } from '../kit/browser.js';
import { keysFile, startDaemon, type Daemon } from '../kit/daemon.js';

type Item = { type: 'text'; channel: string; text: string } | { type: 'image'; mime_type: string; data_b64: string };
interface Answer {
  success: boolean;
  repl_id: string;
  error?: string;
  stack?: string;
  content: Item[];
  content_truncated?: boolean;
  repl_terminated?: boolean;
  duration_ms: number;
}

const FORM = `<!doctype html><title>Sign in</title><form onsubmit="event.preventDefault(); document.title = 'sent ' + document.querySelector('#email').value">
<label for="email">Email address</label><input id="email" type="email">
<label>Password <input type="password" name="pw"></label>
<button type="submit">Sign in</button></form>`;
const TOOLS = `<!doctype html><title>Tools</title><script>
document.modelContext.registerTool({ name: 'echo', description: 'Echoes', inputSchema: { type: 'object', properties: { text: { type: 'string' } } },
  execute: async ({ text }) => 'echo ' + text });
</script>`;
const NO_SCOPE = 'repl-no-scope-0123456789abcdef';

let d: Daemon;
let site: Server;
let siteUrl = '';

const repl = (code: string, extra: Record<string, unknown> = {}): Promise<Answer> => d.call<Answer>('/browsers/local/repl', { method: 'POST', json: { code, ...extra } });
const texts = (a: Answer, channel: string): string => a.content.filter((c): c is Extract<Item, { type: 'text' }> => c.type === 'text' && c.channel === channel).map((c) => c.text).join('');

before(async () => {
  site = createServer((req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(req.url === '/tools' ? TOOLS : FORM));
  await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
  siteUrl = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
  d = await startDaemon({ autostart: true, env: { BROWSERD_KEYS_FILE: keysFile([{ id: 'cdp-only', token: NO_SCOPE, scopes: ['cdp'] }]) } });
  await waitBrowser(d, (s) => s.state === 'ready', 'ready');
});
after(async () => {
  await d.cleanup();
  await new Promise<void>((resolve) => site.close(() => resolve()));
});

test('a binding survives between calls; console output and the last value are text; calls keep their repl_id', async () => {
  const one = await repl('const base = 40;\nlet greet = (n) => `hi ${n}`;\nclass Box { constructor(v) { this.v = v; } }\nconsole.log("set up"); console.error("warned");');
  assert.equal(one.success, true, one.error);
  assert.equal(texts(one, 'stdout'), 'set up\n');
  assert.equal(texts(one, 'stderr'), 'warned\n');
  const two = await repl('const n = await Promise.resolve(base + 2);\ngreet(new Box(n).v)');
  assert.equal(two.success, true, two.error);
  assert.equal(two.repl_id, one.repl_id);
  assert.deepEqual(two.content, [{ type: 'text', channel: 'result', text: 'hi 42' }]);
  assert.equal(texts(await repl('({ n: 1 })'), 'result'), '{ n: 1 }', 'other values as Node prints them');
  // Declared again: no "already declared".
  assert.equal(texts(await repl('const base = 1; base'), 'result'), '1');
  const thrown = await repl('function fails() { throw new TypeError("nope"); }\nfails()');
  assert.equal(thrown.success, false);
  assert.equal(thrown.error, 'TypeError: nope');
  assert.match(thrown.stack ?? '', /at fails \(cell:1:\d+\)/);
  const syntax = await repl('const = 1');
  assert.equal(syntax.success, false);
  assert.match(syntax.error ?? '', /^SyntaxError: /);
  await expectError(await d.fetch('/browsers/local/repl', { method: 'POST', json: { code: '1' }, headers: { authorization: `Bearer ${NO_SCOPE}` } }), 403, 'forbidden');
  await expectError(await d.fetch('/browsers/local/repl', { method: 'POST', json: { code: '1', timeout_sec: 301 } }), 400, 'bad_request');
});

test('an accessibility snapshot of a loopback form names its fields; fillInput and pressKey reach the page', async () => {
  const nav = await repl(`await gotoUrl(${JSON.stringify(`${siteUrl}/form`)})`);
  assert.equal(nav.success, true, nav.error);
  const snap = texts(await repl('await accessibilitySnapshot()'), 'result');
  assert.match(snap, /textbox "Email address"/);
  assert.match(snap, /textbox "Password"/);
  assert.match(snap, /button "Sign in"/);
  const sent = await repl(`await fillInput('#email', 'a@example.test'); await pressKey('Enter'); (await pageInfo()).title`);
  assert.equal(sent.success, true, sent.error);
  assert.equal(texts(sent, 'result'), 'sent a@example.test');
});

test('webmcp.listTools and webmcp.invoke reach the tools of a loopback page', async () => {
  const r = await repl(`await gotoUrl(${JSON.stringify(`${siteUrl}/tools`)});
const listed = await webmcp.listTools();
const echo = listed.find((t) => t.tool.name === 'echo');
const answer = await webmcp.invoke(echo.tool_ref, { text: 'hi' });
[answer.status, answer.output]`);
  assert.equal(r.success, true, r.error);
  assert.equal(texts(r, 'result'), "[ 'completed', 'echo hi' ]");
});

test('repl.emitImage of a screenshot answers a PNG; repl.write picks its channel', async () => {
  const r = await repl('repl.write("look:", "note"); repl.emitImage(await captureScreenshot()); "done"');
  assert.equal(r.success, true, r.error);
  assert.deepEqual(r.content.map((c) => c.type), ['text', 'image', 'text']);
  assert.deepEqual(r.content[0], { type: 'text', channel: 'note', text: 'look:' });
  const image = r.content[1];
  assert.ok(image?.type === 'image');
  assert.equal(image.mime_type, 'image/png');
  assert.deepEqual([...Buffer.from(image.data_b64, 'base64').subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  const big = await repl('repl.emitImage(new Uint8Array(9 * 1024 * 1024))');
  assert.equal(big.success, false);
  assert.match(big.error ?? '', /REPL_IMAGE_LIMIT_BYTES/);
});

test('a timeout ends the REPL process: repl_terminated, a new repl_id, the state gone; the next call works', async () => {
  const before = await repl('globalThis.kept = "yes"; process.pid');
  const slow = await repl('console.log("started"); await new Promise(() => {})', { timeout_sec: 1 });
  assert.equal(slow.success, false);
  assert.equal(slow.repl_terminated, true);
  assert.notEqual(slow.repl_id, before.repl_id);
  assert.match(slow.error ?? '', /timed out/);
  assert.equal(texts(slow, 'stdout'), 'started\n', 'what it wrote before is kept');
  const after = await repl('[typeof kept, process.pid]');
  assert.equal(after.success, true, after.error);
  assert.equal(after.repl_id, slow.repl_id);
  assert.notEqual(texts(after, 'result'), texts(before, 'result'));
  assert.match(texts(after, 'result'), /^\[ 'undefined', \d+ \]$/);
  const reset = await repl('typeof base', { reset: true });
  assert.notEqual(reset.repl_id, after.repl_id);
  assert.equal(texts(reset, 'result'), 'undefined');
});
