// WebMCP against the real daemon and the real Chromium: a loopback page registers tools; GET
// …/webmcp/tools lists them with their page; invoke returns a tool's output, a tool that throws is
// status: error, one that never answers is 504 with its invocation id (and canceled); a stale
// tool_ref is 404; navigating away removes the tools; the scope is `webmcp`.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { expectError } from '../helpers/http.js';
import { daemonCdp, waitBrowser, type CdpClient } from '../kit/browser.js';
import { keysFile, startDaemon, type Daemon } from '../kit/daemon.js';
import { until } from '../kit/wait.js';

const PAGE = `<!doctype html><title>Calculator</title><script>
document.modelContext.registerTool({ name: 'add', description: 'Adds two numbers', inputSchema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] },
  execute: async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }] }) });
document.modelContext.registerTool({ name: 'boom', description: 'Always fails', inputSchema: { type: 'object', properties: {} },
  execute: async () => { throw new Error('kaboom'); } });
document.modelContext.registerTool({ name: 'never', description: 'Never answers', inputSchema: { type: 'object', properties: {} },
  execute: () => new Promise(() => {}) });
</script>`;
const NO_SCOPE = 'webmcp-no-scope-0123456789abcdef';

interface Listed {
  tool_ref: string;
  tool: { name: string; description: string; inputSchema?: unknown };
  source: { target_id: string; page_url: string; page_title: string; frame: { frame_id: string; url: string; main: boolean } };
}

let d: Daemon;
let site: Server;
let siteUrl = '';
let cdp: CdpClient;
let sessionId = '';

const tools = async (): Promise<Listed[]> => (await d.call<{ tools: Listed[] }>('/browsers/local/webmcp/tools')).tools;
const invoke = (json: unknown): Promise<Response> => d.fetch('/browsers/local/webmcp/invoke', { method: 'POST', json });

before(async () => {
  site = createServer((req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(req.url === '/tools' ? PAGE : '<!doctype html><title>plain</title>'));
  await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
  siteUrl = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
  d = await startDaemon({ autostart: true, env: { BROWSERD_KEYS_FILE: keysFile([{ id: 'cdp-only', token: NO_SCOPE, scopes: ['cdp'] }]) } });
  await waitBrowser(d, (s) => s.state === 'ready', 'ready');
  cdp = await daemonCdp(d);
  const { targetId } = await cdp.send('Target.createTarget', { url: `${siteUrl}/tools` });
  ({ sessionId } = await cdp.send('Target.attachToTarget', { targetId, flatten: true }));
});
after(async () => {
  cdp.close();
  await d.cleanup();
  await new Promise<void>((resolve) => site.close(() => resolve()));
});

test('GET …/webmcp/tools lists the tools a loopback page registered, with their page', async () => {
  const listed = await until('the page to register its tools', async () => {
    const t = await tools();
    return t.length === 3 ? t : undefined;
  });
  assert.deepEqual(listed.map((t) => t.tool.name), ['add', 'boom', 'never']);
  const add = listed[0];
  assert.equal(add?.tool.description, 'Adds two numbers');
  assert.deepEqual(add?.tool.inputSchema, { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] });
  assert.equal(add?.source.page_url, `${siteUrl}/tools`);
  assert.equal(add?.source.page_title, 'Calculator');
  assert.equal(add?.source.frame.main, true);
  assert.equal(add?.source.frame.url, `${siteUrl}/tools`);
  await expectError(await d.fetch('/browsers/local/webmcp/tools', { headers: { authorization: `Bearer ${NO_SCOPE}` } }), 403, 'forbidden');
});

test('invoke returns the output; a tool that throws is status: error; one that never answers is 504 and canceled', async () => {
  const [add, boom, never] = await tools();
  const ok = await d.call<Record<string, unknown>>('/browsers/local/webmcp/invoke', { method: 'POST', json: { tool_ref: add?.tool_ref, input: { a: 2, b: 40 } } });
  assert.equal(ok.status, 'completed');
  assert.deepEqual(ok.output, { content: [{ type: 'text', text: '42' }] });
  assert.match(String(ok.invocation_id), /^[0-9A-F]+$/);
  const bad = await d.call<Record<string, unknown>>('/browsers/local/webmcp/invoke', { method: 'POST', json: { tool_ref: boom?.tool_ref } });
  assert.equal(bad.status, 'error');
  assert.match(String(bad.error_text), /Error: kaboom/);
  const canceled = new Promise<unknown>((resolve) => {
    const off = cdp.on('WebMCP.toolResponded', (p, sid) => {
      if (sid === sessionId && p.status === 'Canceled') {
        off();
        resolve(p.invocationId);
      }
    });
  });
  await cdp.send('WebMCP.enable', {}, { sessionId });
  const slow = await expectError(await invoke({ tool_ref: never?.tool_ref, timeout_sec: 1 }), 504, 'timeout');
  const details = slow.details as { code: string; message: string }[];
  assert.equal(details[0]?.code, 'invocation_id');
  assert.equal(await canceled, details[0]?.message, 'that invocation was canceled');
  assert.ok(d.logs.some((l) => l.event === 'webmcp_invoked' && l.tool_name === 'add' && l.status === 'completed'));
  await expectError(await invoke({ tool_ref: 'not-a-ref' }), 400, 'bad_request');
});

test('navigating away removes the tools; their tool_ref is then 404', async () => {
  const [add] = await tools();
  await cdp.send('Page.navigate', { url: `${siteUrl}/plain` }, { sessionId });
  await until('the tools to go', async () => (await tools()).length === 0);
  await expectError(await invoke({ tool_ref: add?.tool_ref, input: { a: 1, b: 1 } }), 404, 'not_found');
  await cdp.send('Target.closeTarget', { targetId: add?.source.target_id ?? '' });
  await until('the page to close', async () => !(await cdp.send('Target.getTargets')).targetInfos.some((t) => t.targetId === add?.source.target_id));
  await expectError(await invoke({ tool_ref: add?.tool_ref, input: { a: 1, b: 1 } }), 404, 'not_found');
});
