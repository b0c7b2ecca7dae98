// The OpenAPI document is kept true: it names exactly the contract's routes, each one is
// served (no "no route" 404, no 405), and info.version is the package version.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { repoRoot, startDaemon, type Daemon } from '../kit/daemon.js';

/**
 * Every route of ../shared/CONTRACT.md, and those of the SDK and the DevTools discovery the daemon
 * serves; each route under /browsers/{id}/… also at its root path (the SDK's direct calls to base_url).
 */
const DECLARED_ROUTES = [
  'GET /healthz',
  'GET /readyz',
  'GET /openapi.json',
  'GET /docs',
  'GET /metrics',
  'GET /whoami',
  'GET /browsers/{id}',
  'PATCH /browsers/{id}',
  'POST /browsers/{id}/restart',
  'POST /browsers/{id}/tokens',
  'GET /browsers/{id}/chromium/policies',
  'PATCH /browsers/{id}/chromium/policies',
  'GET /browsers/{id}/chromium/flags',
  'PATCH /browsers/{id}/chromium/flags',
  'POST /browsers/{id}/configure',
  'GET /browsers/{id}/cdp',
  'GET /browsers/{id}/cdp/devtools/page/{target_id}',
  'GET /browsers/{id}/cdp/json/version',
  'GET /browsers/{id}/cdp/json/list',
  'GET /browsers/{id}/cdp/json',
  'GET /browsers/{id}/cdp/json/protocol',
  'POST /browsers/{id}/process/exec',
  'POST /browsers/{id}/process/spawn',
  'GET /browsers/{id}/process',
  'GET /browsers/{id}/process/{process_id}/status',
  'GET /browsers/{id}/process/{process_id}/stdout/stream',
  'POST /browsers/{id}/process/{process_id}/stdin',
  'POST /browsers/{id}/process/{process_id}/kill',
  'POST /browsers/{id}/process/{process_id}/resize',
  'GET /browsers/{id}/process/{process_id}/attach',
  'POST /browsers/{id}/extensions',
  'GET /browsers/{id}/extensions',
  'DELETE /browsers/{id}/extensions/{name}',
  'POST /proxies',
  'GET /proxies',
  'GET /proxies/{id}',
  'PATCH /proxies/{id}',
  'DELETE /proxies/{id}',
  'POST /proxies/{id}/check',
  'POST /profiles',
  'GET /profiles',
  'GET /profiles/{id_or_name}',
  'PATCH /profiles/{id_or_name}',
  'DELETE /profiles/{id_or_name}',
  'GET /profiles/{id_or_name}/download',
  'POST /browsers/{id}/computer/screenshot',
  'POST /browsers/{id}/computer/click_mouse',
  'POST /browsers/{id}/computer/move_mouse',
  'POST /browsers/{id}/computer/drag_mouse',
  'POST /browsers/{id}/computer/scroll',
  'POST /browsers/{id}/computer/type',
  'POST /browsers/{id}/computer/press_key',
  'POST /browsers/{id}/computer/get_mouse_position',
  'POST /browsers/{id}/computer/cursor',
  'POST /browsers/{id}/computer/batch',
  'POST /browsers/{id}/computer/clipboard/read',
  'POST /browsers/{id}/computer/clipboard/write',
  'POST /browsers/{id}/playwright/execute',
  'GET /browsers/{id}/playwright/executors',
  'DELETE /browsers/{id}/playwright/executors/{name}',
  'POST /browsers/{id}/repl',
  'GET /browsers/{id}/webmcp/tools',
  'POST /browsers/{id}/webmcp/invoke',
  'GET /browsers/{id}/logs/stream',
  'GET /browsers/{id}/network/egress-policy',
  'GET /browsers/{id}/fs/read_file',
  'PUT /browsers/{id}/fs/write_file',
  'PUT /browsers/{id}/network/egress-policy',
  'GET /browsers/{id}/fs/list_files',
  'GET /browsers/{id}/fs/file_info',
  'PUT /browsers/{id}/fs/create_directory',
  'PUT /browsers/{id}/fs/delete_file',
  'PUT /browsers/{id}/fs/delete_directory',
  'PUT /browsers/{id}/fs/move',
  'PUT /browsers/{id}/fs/set_file_permissions',
  'POST /browsers/{id}/fs/upload',
  'POST /browsers/{id}/fs/upload_zip',
  'GET /browsers/{id}/fs/download_dir_zip',
  'POST /browsers/{id}/fs/upload_zstd',
  'GET /browsers/{id}/fs/download_dir_zstd',
  'POST /browsers/{id}/fs/watch',
  'GET /browsers/{id}/fs/watch/{watch_id}/events',
  'DELETE /browsers/{id}/fs/watch/{watch_id}',
  'GET /browsers/{id}/fs/downloads',
  'POST /browsers/{id}/replays',
  'GET /browsers/{id}/replays',
  'GET /browsers/{id}/replays/{replay_id}',
  'DELETE /browsers/{id}/replays/{replay_id}',
  'POST /browsers/{id}/replays/{replay_id}/stop',
  'POST /browsers/{id}/replays/{replay_id}/markers',
  'POST /browsers/{id}/curl',
  'GET /curl/raw',
  'POST /curl/raw',
  'PUT /curl/raw',
  'PATCH /curl/raw',
  'DELETE /curl/raw',
  'GET /browsers/{id}/telemetry',
  'PUT /browsers/{id}/telemetry',
  'PATCH /browsers/{id}/telemetry',
  'POST /browsers/{id}/telemetry/events',
  'GET /browsers/{id}/telemetry/events',
  'GET /browsers/{id}/telemetry/stream',
  'GET /browsers/{id}/live',
  'GET /browsers/{id}/live/ws',
  // WebDriver (docs/webdriver.md): classic commands to ChromeDriver, the BiDi sockets.
  'GET /browsers/{id}/webdriver/status',
  'POST /browsers/{id}/webdriver/session',
  'GET /browsers/{id}/webdriver/session',
  'GET /browsers/{id}/webdriver/session/{session_id}',
  'DELETE /browsers/{id}/webdriver/session/{session_id}',
  ...['{command}', '{command}/{a}', '{command}/{a}/{b}', '{command}/{a}/{b}/{c}'].flatMap((tail) =>
    ['GET', 'POST', 'DELETE'].map((m) => `${m} /browsers/{id}/webdriver/session/{session_id}/${tail}`),
  ),
];
const CONTRACT_ROUTES = [
  ...DECLARED_ROUTES,
  ...DECLARED_ROUTES.filter((r) => r.includes(' /browsers/{id}/')).map((r) => r.replace(' /browsers/{id}/', ' /')),
].sort();

let d: Daemon;
let doc: { openapi: string; info: { version: string }; paths: Record<string, Record<string, { security?: unknown[] }>> };

before(async () => {
  d = await startDaemon();
  const res = await fetch(`${d.url}/openapi.json`);
  assert.equal(res.status, 200);
  doc = (await res.json()) as typeof doc;
});
after(() => d.cleanup());

const documented = (): string[] =>
  Object.entries(doc.paths)
    .flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${p}`))
    .sort();

test('the document is OpenAPI 3.1 with the package version', () => {
  const pkg = JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string };
  assert.equal(doc.openapi, '3.1.0');
  assert.equal(doc.info.version, pkg.version);
});

test('every contract route is in the document, and the document names no other', () => {
  assert.deepEqual(documented(), CONTRACT_ROUTES);
});

test('every documented route is served: no "no route" 404 and no 405', async () => {
  for (const entry of documented()) {
    const [method, template] = entry.split(' ') as [string, string];
    const url = template.replace('{id}', 'local').replace(/\{[^}]+\}/g, 'x');
    const res = await d.fetch(url, { method, headers: template.endsWith('/cdp') ? { connection: 'close' } : {} });
    // An event stream that opened (the telemetry stream takes no parameters) is served: it is not read to its end.
    if (res.status === 200 && (res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
      await res.body?.cancel();
      continue;
    }
    const text = await res.text();
    assert.notEqual(res.status, 405, `${entry}: ${text}`);
    if (res.status === 404) assert.doesNotMatch(text, /no route/, `${entry} is documented but not served`);
  }
});

test('the session token is documented: its format and both sources (Authorization and ?jwt=)', async () => {
  const full = (await (await fetch(`${d.url}/openapi.json`)).json()) as { components: { securitySchemes: Record<string, { type: string; scheme?: string; bearerFormat?: string; in?: string; name?: string; description?: string }> } };
  const schemes = full.components.securitySchemes;
  assert.equal(schemes.sessionToken?.bearerFormat, 'JWT');
  assert.deepEqual([schemes.sessionTokenQuery?.type, schemes.sessionTokenQuery?.in, schemes.sessionTokenQuery?.name], ['apiKey', 'query', 'jwt']);
  for (const s of [schemes.sessionToken, schemes.sessionTokenQuery]) assert.match(s?.description ?? '', /EdDSA.*ES256.*RS256[\s\S]*BROWSERD_JWT_KEYS_FILE[\s\S]*state dir/);
  const op = doc.paths['/browsers/{id}/cdp']?.get;
  assert.deepEqual(op?.security, [{ bearer: [] }, { sessionToken: [] }, { sessionTokenQuery: [] }]);
});

test('public routes are marked without security; the others need a bearer token', () => {
  for (const [p, ops] of Object.entries(doc.paths)) {
    for (const [m, op] of Object.entries(ops)) {
      const isPublic = ['/healthz', '/readyz', '/openapi.json', '/docs'].includes(p);
      assert.equal((op.security ?? []).length === 0, isPublic, `${m} ${p}`);
    }
  }
});
