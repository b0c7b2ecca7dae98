// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// Project scoping is a property of the route (issue 38): a key, or a session token, of another
// project than BROWSERD_PROJECT_ID — holding every scope — is walked over every route of the OpenAPI
// document (both paths of each browser route, WebSockets included). Each answer is 404 (or 403), and
// nothing of this project's changes: its telemetry switches and events, processes, files, proxies,
// profiles, extensions, replays, Chromium settings. Only GET /whoami, which reads the caller's own
// credential, answers it; public routes need no token at all.
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { SignJWT } from 'jose';
import WebSocket from 'ws';
import { agentTempDir } from '../kit/agent.js';
import { tempDir } from '../kit/cleanup.js';
import { keysFile, startDaemon, type Daemon } from '../kit/daemon.js';

const ALL_SCOPES = [
  'browser:read', 'browser:write', 'browser:configure', 'processes:exec', 'processes:write', 'processes:root', 'extensions:write',
  'proxies:read', 'proxies:write', 'proxies:check', 'profiles:read', 'profiles:write', 'cdp', 'computer', 'playwright:execute',
  'logs:read', 'fs:read', 'fs:write', 'replays:read', 'replays:write', 'browser:fetch', 'telemetry:read', 'telemetry:write', 'live:view', 'live:control',
];
const OWNER = 'owner-project-token-0123456789ab';
const FOREIGN = 'foreign-project-token-0123456789';
const cp = generateKeyPairSync('ed25519');
const jwksFile = path.join(tempDir('browserd-jwks-'), 'jwks.json');
writeFileSync(jwksFile, JSON.stringify({ keys: [{ ...(cp.publicKey.export({ format: 'jwk' }) as object), kid: 'cp' }] }));

interface Op { 'x-websocket'?: boolean; security?: unknown[] }
let d: Daemon;
let doc: { paths: Record<string, Record<string, Op>> };
/** Ids of this project's things, so that each `{param}` names one that exists. */
const ids: Record<string, string> = { id: 'local', name: 'none', target_id: 'none', watch_id: 'none', replay_id: 'none' };
const dir = agentTempDir('browserd-foreign-');
const marker = path.join(dir, 'marker.txt');

before(async () => {
  d = await startDaemon({
    token: null,
    bearer: OWNER,
    env: {
      BROWSERD_PROJECT_ID: 'mine',
      BROWSERD_JWT_KEYS_FILE: jwksFile,
      BROWSERD_KEYS_FILE: keysFile([
        { id: 'owner', token: OWNER, scopes: ALL_SCOPES, project: 'mine' },
        { id: 'foreign', token: FOREIGN, scopes: ALL_SCOPES, project: 'theirs' },
      ]),
    },
  });
  doc = (await (await fetch(`${d.url}/openapi.json`)).json()) as typeof doc;
  // Things of this project for the foreign credential to reach for.
  const spawned = await d.fetch('/browsers/local/process/spawn', { method: 'POST', json: { command: 'sleep', args: ['300'] } });
  assert.equal(spawned.status, 200, await spawned.clone().text());
  ids.process_id = ((await spawned.json()) as { process_id: string }).process_id;
  const profile = await d.fetch('/profiles', { method: 'POST', json: { name: 'ours' } });
  assert.equal(profile.status, 201, await profile.clone().text());
  ids.id_or_name = 'ours';
  writeFileSync(path.join(dir, 'kept.txt'), 'kept');
});
after(async () => {
  await d.fetch(`/browsers/local/process/${ids.process_id}/kill`, { method: 'POST', json: { signal: 'KILL' } }).then((r) => r.text());
  await d.cleanup();
});

/** What the foreign credential must not change, read with the owner's key. */
async function state(): Promise<unknown> {
  const read = async (p: string): Promise<unknown> => {
    const res = await d.fetch(p);
    assert.equal(res.status, 200, `${p}: ${res.status}`);
    return res.json();
  };
  const events = (await read('/browsers/local/telemetry/events?since=1h&limit=1000')) as { event: { type: string } }[];
  return {
    telemetry: await read('/browsers/local/telemetry'),
    // Every request is an api_call event (the audit of refused ones included): any other event is a change.
    events: events.filter((e) => e.event.type !== 'api_call'),
    processes: ((await read('/browsers/local/process')) as { processes: { process_id: string; state: string }[] }).processes.map((p) => [p.process_id, p.state]),
    files: readdirSync(dir).sort(),
    proxies: await read('/proxies'),
    profiles: await read('/profiles'),
    extensions: await read('/browsers/local/extensions'),
    replays: await read('/browsers/local/replays'),
    flags: await read('/browsers/local/chromium/flags'),
    policies: await read('/browsers/local/chromium/policies'),
  };
}

/** A body that would act if the route let the caller through (for the routes that change something); else `{}`. */
function bodyFor(p: string): unknown {
  const rest = p.replace(/^\/browsers\/\{id\}/, '');
  const bodies: Record<string, unknown> = {
    '/telemetry': { browser: { console: { enabled: true }, control: { enabled: false } } },
    '/telemetry/events': { type: 'forged' },
    '/process/exec': { command: 'touch', args: [marker] },
    '/process/spawn': { command: 'touch', args: [marker] },
    '/process/{process_id}/kill': { signal: 'KILL' },
    '/process/{process_id}/stdin': { data_b64: Buffer.from('x').toString('base64') },
    '/fs/create_directory': { path: path.join(dir, 'made') },
    '/fs/delete_file': { path: path.join(dir, 'kept.txt') },
    '/fs/move': { src_path: path.join(dir, 'kept.txt'), dest_path: marker },
    '/chromium/flags': { flags: ['--lang=de'] },
    '/chromium/policies': { policies: { BookmarkBarEnabled: true } },
    '/proxies': { name: 'theirs', type: 'datacenter', config: { country: 'US' } },
    '/profiles': { name: 'theirs' },
    '/replays': {},
  };
  return bodies[rest] ?? {};
}

function urlFor(template: string, method: string, credential: 'key' | 'jwt', jwt: string): string {
  let p = template.replace(/\{([^}]+)\}/g, (_m, name: string) => encodeURIComponent(ids[name] ?? 'none'));
  const q = new URLSearchParams();
  if (p.endsWith('/fs/write_file') || p.endsWith('/fs/read_file') || p.endsWith('/fs/list_files') || p.endsWith('/fs/file_info') || p.includes('/fs/download_dir')) q.set('path', p.endsWith('/write_file') ? marker : dir);
  if (p.endsWith('/curl/raw')) q.set('url', 'http://127.0.0.1:9/');
  if (method === 'GET' && p.endsWith('/telemetry/stream')) q.set('replay', 'all');
  if (credential === 'jwt') q.set('jwt', jwt);
  const s = q.toString();
  if (s !== '') p += `?${s}`;
  return `${d.url}${p}`;
}

/** The status of a WebSocket handshake: the HTTP answer that refused it (or 101). */
function upgradeStatus(url: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url.replace(/^http/, 'ws'), { headers });
    ws.on('unexpected-response', (_req, res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
      ws.terminate();
    });
    ws.on('open', () => {
      resolve(101);
      ws.terminate();
    });
    ws.on('error', (err) => reject(err));
  });
}

for (const credential of ['key', 'jwt'] as const) {
  test(`a ${credential === 'key' ? 'key' : 'session token'} of another project: every route of the document is 404 or 403, and nothing changes`, async () => {
    const jwt = await new SignJWT({ sub: 'local', aud: 'browserd', scope: ALL_SCOPES.join(' '), project: 'theirs', exp: Math.floor(Date.now() / 1000) + 600 })
      .setProtectedHeader({ alg: 'EdDSA', kid: 'cp' })
      .sign(cp.privateKey);
    const headers: Record<string, string> = credential === 'key' ? { authorization: `Bearer ${FOREIGN}` } : {};
    const before = await state();
    const answers: string[] = [];
    let walked = 0;
    for (const [template, ops] of Object.entries(doc.paths)) {
      for (const [m, op] of Object.entries(ops)) {
        const method = m.toUpperCase();
        if ((op.security ?? []).length === 0) continue; // public: no credential is looked at
        const url = urlFor(template, method, credential, jwt);
        let status: number;
        let text = '';
        if (op['x-websocket'] === true) {
          status = await upgradeStatus(url, headers);
        } else {
          const body = method === 'GET' || method === 'DELETE' ? undefined : template.endsWith('/write_file') || template.endsWith('/curl/raw') ? 'forged' : JSON.stringify(bodyFor(template));
          const res = await fetch(url, { method, headers: { ...headers, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) }, body });
          status = res.status;
          // A stream that opened is a failure: not read to its end.
          if ((res.headers.get('content-type') ?? '').startsWith('text/event-stream')) await res.body?.cancel();
          else text = await res.text();
        }
        walked++;
        if (method === 'GET' && template === '/whoami') {
          assert.equal(status, 200, text);
          assert.deepEqual(JSON.parse(text), { key_id: credential === 'key' ? 'foreign' : JSON.parse(text).key_id, scopes: [...ALL_SCOPES].sort(), project: 'theirs' });
          continue;
        }
        if (status !== 404 && status !== 403) answers.push(`${method} ${template}: ${status} ${text.slice(0, 200)}`);
        else if (text !== '') assert.equal((JSON.parse(text) as { code: string }).code, status === 404 ? 'not_found' : 'forbidden', `${method} ${template}`);
      }
    }
    assert.deepEqual(answers, [], 'every route refuses a credential of another project');
    assert.ok(walked > 150, `walked ${walked} operations (both paths of each browser route)`);
    assert.deepEqual(await state(), before, 'nothing of this project changed');
    assert.ok(!existsSync(marker), 'no command ran, no file was written');
  });
}

test('the same routes answer a key of this project (the walk above is not refused for another reason)', async () => {
  for (const p of ['/telemetry', '/browsers/local/telemetry', '/process', '/proxies', '/profiles', '/metrics']) {
    const res = await d.fetch(p);
    assert.equal(res.status, 200, p);
    await res.text();
  }
});
