// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The fields and routes the SDK declares beyond the seed: bypass_hosts (grammar, limits, stored
// form), PATCH /proxies/{id} (strict, visibility, durable), and GET /proxies with limit, offset,
// name and query and the pagination headers.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { BYPASS_LIMITS } from '../../daemon/proxies/store/bypass.js';
import { LIST_LIMITS } from '../../daemon/proxies/store/listing.js';
import { expectError } from '../helpers/http.js';
import { tempDir } from '../kit/cleanup.js';
import { keysFile, startDaemon, type Daemon } from '../kit/daemon.js';

const ADMIN = 'admin-token-aaaaaaaaaaaaaaaaaaaa';
const P1 = 'project1-token-bbbbbbbbbbbbbbbbbb';
const P2 = 'project2-token-cccccccccccccccccc';
const ALL = ['proxies:read', 'proxies:write', 'proxies:check'];

const stateDir = tempDir();
const keys = keysFile([
  { id: 'admin', token: ADMIN, scopes: ALL },
  { id: 'p1', token: P1, scopes: ALL, project: 'p1' },
  { id: 'p2', token: P2, scopes: ALL, project: 'p2' },
]);
let d: Daemon;

before(async () => {
  d = await startDaemon({ token: null, stateDir, env: { BROWSERD_KEYS_FILE: keys } });
});
after(async () => {
  await d.cleanup();
  rmSync(stateDir, { recursive: true, force: true });
});

function call(token: string, p: string, init: RequestInit & { json?: unknown } = {}): Promise<Response> {
  return d.fetch(p, { ...init, headers: { authorization: `Bearer ${token}` } });
}

async function ok(res: Response, status = 200): Promise<Record<string, unknown>> {
  const text = await res.text();
  assert.equal(res.status, status, text);
  return JSON.parse(text) as Record<string, unknown>;
}

const create = async (token: string, body: unknown): Promise<Record<string, unknown>> => ok(await call(token, '/proxies', { method: 'POST', json: body }), 201);

test('bypass_hosts: stored in one form, returned, absent when empty', async () => {
  const p = await create(ADMIN, {
    type: 'datacenter',
    bypass_hosts: ['Example.COM', 'example.com.', '*.Internal.example', '192.0.2.10', '[2001:DB8:0:0::1]', '::ffff:192.0.2.11', 'bücher.example', ' spaced.example '],
  });
  assert.deepEqual(p.bypass_hosts, ['example.com', '*.internal.example', '192.0.2.10', '2001:db8::1', '192.0.2.11', 'xn--bcher-kva.example', 'spaced.example']);
  assert.deepEqual(await ok(await call(ADMIN, `/proxies/${String(p.id)}`)), p);
  const none = await create(ADMIN, { type: 'datacenter', bypass_hosts: [] });
  assert.equal(none.bypass_hosts, undefined);
  const many = await create(ADMIN, { type: 'isp', bypass_hosts: Array.from({ length: BYPASS_LIMITS.maxEntries }, (_, i) => `h${i}.example`) });
  assert.equal((many.bypass_hosts as unknown[]).length, BYPASS_LIMITS.maxEntries);
});

const BAD_BYPASS: [string, unknown, string[]][] = [
  ['not an array', 'example.com', ['bypass_hosts']],
  ['a number', [5], ['bypass_hosts.0']],
  ['empty entry', ['ok.example', ''], ['bypass_hosts.1']],
  ['a scheme', ['http://example.com'], ['bypass_hosts.0']],
  ['a path', ['example.com/path'], ['bypass_hosts.0']],
  ['a port', ['example.com:8080'], ['bypass_hosts.0']],
  ['CIDR', ['10.0.0.0/8'], ['bypass_hosts.0']],
  ['* alone', ['*'], ['bypass_hosts.0']],
  ['* inside', ['a.*.example.com'], ['bypass_hosts.0']],
  ['*example.com', ['*example.com'], ['bypass_hosts.0']],
  ['an underscore', ['bad_name.example'], ['bypass_hosts.0']],
  ['a partial IP', ['10.1.2'], ['bypass_hosts.0']],
  ['a label over 63', [`${'a'.repeat(64)}.example`], ['bypass_hosts.0']],
  ['over the length limit', [`${'a.'.repeat(128)}example`], ['bypass_hosts.0']],
  ['two bad entries, two details', ['ok.example', 'x y', '*'], ['bypass_hosts.1', 'bypass_hosts.2']],
  ['too many', Array.from({ length: BYPASS_LIMITS.maxEntries + 1 }, (_, i) => `h${i}.example`), ['bypass_hosts']],
];

test('bypass_hosts validation: one detail per bad entry, naming its index', async () => {
  for (const [why, bypass, fields] of BAD_BYPASS) {
    const err = await expectError(await call(ADMIN, '/proxies', { method: 'POST', json: { type: 'datacenter', bypass_hosts: bypass } }), 400, 'bad_request');
    const got = (err.details as { message: string }[]).map((x) => x.message.slice(0, x.message.indexOf(':')));
    assert.deepEqual(got, fields, `${why}: ${JSON.stringify(err.details)}`);
  }
});

test('PATCH /proxies/{id}: name and bypass_hosts, validated like create, strict, stored durably', async () => {
  const p = await create(ADMIN, { type: 'custom', name: 'old', protocol: 'http', config: { host: 'proxy.example', port: 3128, username: 'u', password: 'secret1' } });
  const id = String(p.id);
  const renamed = await ok(await call(ADMIN, `/proxies/${id}`, { method: 'PATCH', json: { name: '  my-renamed-proxy  ' } }));
  assert.deepEqual(renamed, { ...p, name: 'my-renamed-proxy' }, 'trimmed; nothing else changed');
  const both = await ok(await call(ADMIN, `/proxies/${id}`, { method: 'PATCH', json: { bypass_hosts: ['*.Corp.example'], name: 'dup' } }));
  assert.deepEqual(both.bypass_hosts, ['*.corp.example']);
  assert.equal(both.name, 'dup');
  await create(ADMIN, { type: 'datacenter', name: 'dup' });
  const problems: [unknown, string[]][] = [
    [{}, ['(body)']],
    [{ name: '' }, ['name']],
    [{ name: '   ' }, ['name']],
    [{ name: 'x'.repeat(256) }, ['name']],
    [{ bypass_hosts: ['*'] }, ['bypass_hosts.0']],
    [{ type: 'isp' }, ['(body)', '(body)']], // an unknown field, and neither name nor bypass_hosts
    [{ name: 'x', config: { port: 1 } }, ['(body)']],
  ];
  for (const [body, fields] of problems) {
    const err = await expectError(await call(ADMIN, `/proxies/${id}`, { method: 'PATCH', json: body }), 400, 'bad_request');
    assert.deepEqual((err.details as { message: string }[]).map((x) => x.message.slice(0, x.message.indexOf(':'))), fields, JSON.stringify(body));
  }
  await expectError(await call(ADMIN, '/proxies/no-such-proxy', { method: 'PATCH', json: { name: 'x' } }), 404, 'not_found');
  const mine = await create(P1, { type: 'datacenter', name: 'p1 proxy' });
  await expectError(await call(P2, `/proxies/${String(mine.id)}`, { method: 'PATCH', json: { name: 'stolen' } }), 404, 'not_found');
  assert.equal((await ok(await call(P1, `/proxies/${String(mine.id)}`))).name, 'p1 proxy', 'the refused PATCH changed nothing');
  // Durable: a daemon killed right after the answer keeps the change.
  d.proc.kill('SIGKILL');
  await d.waitExit();
  d = await startDaemon({ token: null, stateDir, env: { BROWSERD_KEYS_FILE: keys } });
  assert.deepEqual(await ok(await call(ADMIN, `/proxies/${id}`)), both);
});

test('GET /proxies: limit, offset, name, query, and the pagination headers', async () => {
  const fresh = tempDir();
  const dl = await startDaemon({ token: null, stateDir: fresh, env: { BROWSERD_KEYS_FILE: keys } });
  try {
    const mk = async (token: string, body: Record<string, unknown>): Promise<string> => {
      const res = await dl.fetch('/proxies', { method: 'POST', json: body, headers: { authorization: `Bearer ${token}` } });
      assert.equal(res.status, 201);
      return String(((await res.json()) as { id: string }).id);
    };
    const ids = [
      await mk(P1, { type: 'datacenter', name: 'Café Berlin' }),
      await mk(P1, { type: 'custom', name: 'office', protocol: 'http', config: { host: 'Squid.Corp.example', port: 3128 } }),
      await mk(P1, { type: 'isp', name: 'cafe' }),
      await mk(P2, { type: 'isp', name: 'cafe' }),
      await mk(P1, { type: 'mobile' }),
    ];
    const list = async (token: string, q: string): Promise<{ ids: string[]; more: string | null; next: string | null }> => {
      const res = await dl.fetch(`/proxies${q}`, { headers: { authorization: `Bearer ${token}` } });
      const body = (await res.json()) as { id: string }[];
      assert.equal(res.status, 200, JSON.stringify(body));
      return { ids: body.map((p) => p.id), more: res.headers.get('x-has-more'), next: res.headers.get('x-next-offset') };
    };
    const p1 = [ids[0], ids[1], ids[2], ids[4]];
    assert.deepEqual(await list(P1, ''), { ids: p1, more: 'false', next: '0' });
    assert.deepEqual(await list(P1, '?limit=2'), { ids: p1.slice(0, 2), more: 'true', next: '2' });
    assert.deepEqual(await list(P1, '?limit=2&offset=2'), { ids: p1.slice(2), more: 'false', next: '0' });
    assert.deepEqual(await list(P1, '?limit=3&offset=1'), { ids: p1.slice(1), more: 'false', next: '0' });
    assert.deepEqual(await list(P1, '?offset=9'), { ids: [], more: 'false', next: '0' });
    assert.deepEqual((await list(P1, `?name=${encodeURIComponent('CAFE')}`)).ids, [ids[2]], 'exact, case- and accent-insensitive, own project only');
    assert.deepEqual((await list(P1, `?name=${encodeURIComponent('cafe berlin')}`)).ids, [ids[0]]);
    assert.deepEqual((await list(P1, '?name=caf')).ids, [], 'name is not a substring match');
    assert.deepEqual((await list(ADMIN, '?name=cafe')).ids, [ids[2], ids[3]], 'a key without a project sees both');
    assert.deepEqual((await list(P1, '?query=CAF')).ids, [ids[0], ids[2]], 'query: substring of the name, any case');
    assert.deepEqual((await list(P1, '?query=corp.EXAMPLE')).ids, [ids[1]], 'query: substring of the host');
    assert.deepEqual((await list(P1, `?query=${ids[4]}`)).ids, [ids[4]], 'query: the whole id');
    assert.deepEqual((await list(P1, `?query=${ids[4]?.slice(0, 8)}`)).ids, [], 'an id matches only whole');
    assert.deepEqual((await list(P1, '?query=&name=')).ids, p1, 'empty filters filter nothing');
    assert.deepEqual(await list(P1, '?query=caf&limit=1&offset=1'), { ids: [ids[2]], more: 'false', next: '0' }, 'filters before the page');
    for (const q of ['?limit=0', `?limit=${LIST_LIMITS.max + 1}`, '?limit=x', '?offset=-1', '?limit=1&limit=2', '?page=2', '?cursor=a']) {
      const err = await expectError(await dl.fetch(`/proxies${q}`, { headers: { authorization: `Bearer ${P1}` } }), 400, 'bad_request');
      assert.match(String(err.message), /^(limit|offset|page|cursor): /, q);
    }
  } finally {
    await dl.cleanup();
    rmSync(fresh, { recursive: true, force: true });
  }
});
