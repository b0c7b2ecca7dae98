// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// /proxies through the real daemon: create/list/get/delete, per-type validation (one detail per
// bad field), write-only fields, scopes, project scoping, 404s, the deprecated `os` field.
import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { MAX_PROXIES } from '../../daemon/proxies/routes.js';
import { STORE_FILE } from '../../daemon/proxies/store/store.js';
import { expectError } from '../helpers/http.js';
import { selfSigned } from '../helpers/proxies/servers.js';
import { tempDir } from '../kit/cleanup.js';
import { keysFile, startDaemon, type Daemon } from '../kit/daemon.js';

const ADMIN = 'admin-token-aaaaaaaaaaaaaaaaaaaa';
const P1 = 'project1-token-bbbbbbbbbbbbbbbbbb';
const P2 = 'project2-token-cccccccccccccccccc';
const READER = 'reader-token-dddddddddddddddddddd';
const ALL = ['proxies:read', 'proxies:write', 'proxies:check'];

const dir = tempDir();
const keys = keysFile([
  { id: 'admin', token: ADMIN, scopes: [...ALL, 'browser:read'] },
  { id: 'p1', token: P1, scopes: ALL, project: 'p1' },
  { id: 'p2', token: P2, scopes: ALL, project: 'p2' },
  { id: 'reader', token: READER, scopes: ['proxies:read'] },
]);
let d: Daemon;
let pem: string;

before(async () => {
  pem = selfSigned(dir, 'ca', ['DNS:proxy.example']).cert;
  d = await startDaemon({ token: null, env: { BROWSERD_KEYS_FILE: keys } });
});
after(async () => {
  await d.cleanup();
  rmSync(dir, { recursive: true, force: true });
});

function as(token: string, init: RequestInit & { json?: unknown } = {}): RequestInit & { json?: unknown } {
  return { ...init, headers: { authorization: `Bearer ${token}` } };
}

async function create(token: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await d.fetch('/proxies', as(token, { method: 'POST', json: body }));
  const text = await res.text();
  assert.equal(res.status, 201, text);
  const proxy = JSON.parse(text) as Record<string, unknown>;
  assert.equal(res.headers.get('location'), `/proxies/${String(proxy.id)}`);
  return proxy;
}

async function getJson(token: string, p: string): Promise<unknown> {
  const res = await d.fetch(p, as(token));
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return JSON.parse(text);
}

test('each type is created with its defaults and read back the same', async () => {
  const dc = await create(ADMIN, { type: 'datacenter', name: 'US DC' });
  assert.deepEqual({ ...dc, id: undefined }, { id: undefined, name: 'US DC', type: 'datacenter', protocol: 'https', config: { country: 'US' } });
  assert.match(String(dc.id), /^[0-9a-f-]{36}$/);
  const isp = await create(ADMIN, { type: 'isp', protocol: 'http', config: { country: 'de' } });
  assert.deepEqual(isp.config, { country: 'DE' });
  assert.equal(isp.protocol, 'http');
  assert.equal(isp.name, undefined, 'no name given, none returned');
  const res = await create(ADMIN, { type: 'residential', config: { country: 'us', state: 'co', city: 'Denver', zip: '80202-1234', asn: 'as7922' } });
  assert.deepEqual(res.config, { country: 'US', state: 'CO', city: 'denver', zip: '80202-1234', asn: 'AS7922' });
  const mob = await create(ADMIN, { type: 'mobile', config: { country: 'GB', carrier: 'vodafone' } });
  assert.deepEqual(mob.config, { country: 'GB', carrier: 'vodafone' });
  const bare = await create(ADMIN, { type: 'mobile' });
  assert.deepEqual(bare.config, {});
  for (const p of [dc, isp, res, mob, bare]) {
    assert.equal(p.status, undefined, 'status is absent until checked');
    assert.equal(p.last_checked, undefined);
    assert.deepEqual(await getJson(ADMIN, `/proxies/${String(p.id)}`), p);
  }
  const list = (await getJson(ADMIN, '/proxies')) as Record<string, unknown>[];
  const ids = list.map((p) => p.id);
  const order = [dc, isp, res, mob, bare].map((p) => ids.indexOf(p.id));
  assert.deepEqual([...order].sort((a, b) => a - b), order, 'oldest first');
  assert.ok(order.every((i) => i >= 0));
});

test('custom proxies: password and ca_bundle are write-only, has_password and has_ca_bundle derived', async () => {
  const withAll = await create(ADMIN, {
    type: 'custom',
    name: 'mine',
    config: { host: 'proxy.example.com', port: 3128, username: 'user123', password: 'secure_password', ca_bundle: pem },
  });
  assert.deepEqual(withAll.config, { host: 'proxy.example.com', port: 3128, username: 'user123', has_password: true, has_ca_bundle: true });
  assert.equal(withAll.protocol, 'https', 'protocol defaults to https');
  const plain = await create(ADMIN, { type: 'custom', protocol: 'http', config: { host: '[2001:db8::1]', port: 8080 } });
  assert.deepEqual(plain.config, { host: '2001:db8::1', port: 8080, has_password: false, has_ca_bundle: false });
  const all = JSON.stringify([await getJson(ADMIN, '/proxies'), await getJson(ADMIN, `/proxies/${String(withAll.id)}`)]);
  assert.ok(!all.includes('secure_password'), 'the password is never returned');
  assert.ok(!all.includes('BEGIN CERTIFICATE'), 'the CA bundle is never returned');
  assert.ok(!JSON.stringify(d.logs).includes('secure_password'), 'the password is never logged');
});

const customOk = { host: 'proxy.example.com', port: 8080 };
const VALIDATION: [string, unknown, string[]][] = [
  ['unknown type', { type: 'socks5' }, ['type']],
  ['no type', { config: { country: 'US' } }, ['type']],
  ['country not ISO', { type: 'datacenter', config: { country: 'XX' } }, ['config.country']],
  ['UK is not the ISO code of Britain', { type: 'isp', config: { country: 'UK' } }, ['config.country']],
  ['three-letter country', { type: 'datacenter', config: { country: 'USA' } }, ['config.country']],
  ['city with a space', { type: 'residential', config: { country: 'US', city: 'san francisco' } }, ['config.city']],
  ['city without country', { type: 'residential', config: { city: 'denver' } }, ['config.country']],
  ['mobile city without country', { type: 'mobile', config: { city: 'denver' } }, ['config.country']],
  ['asn without AS', { type: 'residential', config: { asn: '7922' } }, ['config.asn']],
  ['state of three letters', { type: 'residential', config: { state: 'CAL' } }, ['config.state']],
  ['zip of four digits', { type: 'residential', config: { zip: '1234' } }, ['config.zip']],
  ['US zip with another country', { type: 'residential', config: { country: 'DE', zip: '12345' } }, ['config.zip']],
  ['unknown os', { type: 'residential', config: { os: 'linux' } }, ['config.os']],
  ['unknown carrier', { type: 'mobile', config: { carrier: 'nokia' } }, ['config.carrier']],
  ['datacenter takes no city', { type: 'datacenter', config: { country: 'US', city: 'denver' } }, ['config']],
  ['custom without config', { type: 'custom' }, ['config']],
  ['custom without port', { type: 'custom', config: { host: 'proxy.example.com' } }, ['config.port']],
  ['custom without host', { type: 'custom', config: { port: 8080 } }, ['config.host']],
  ['host with a scheme', { type: 'custom', config: { host: 'http://proxy.example.com', port: 8080 } }, ['config.host']],
  ['port 0', { type: 'custom', config: { ...customOk, port: 0 } }, ['config.port']],
  ['port 65536', { type: 'custom', config: { ...customOk, port: 65536 } }, ['config.port']],
  ['port as text', { type: 'custom', config: { ...customOk, port: '8080' } }, ['config.port']],
  ['short password', { type: 'custom', config: { ...customOk, username: 'u', password: 'abc' } }, ['config.password']],
  ['password without username', { type: 'custom', config: { ...customOk, password: 'secret1' } }, ['config.username']],
  ['username with a colon', { type: 'custom', config: { ...customOk, username: 'a:b' } }, ['config.username']],
  ['ca_bundle not PEM', { type: 'custom', config: { ...customOk, ca_bundle: 'not a certificate' } }, ['config.ca_bundle']],
  [
    'ca_bundle with a broken certificate',
    { type: 'custom', config: { ...customOk, ca_bundle: '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n' } },
    ['config.ca_bundle'],
  ],
  ['has_password is not input', { type: 'custom', config: { ...customOk, has_password: true } }, ['config.has_password']],
  ['has_ca_bundle is not input', { type: 'custom', config: { ...customOk, has_ca_bundle: false } }, ['config.has_ca_bundle']],
  ['an unknown config key', { type: 'custom', config: { ...customOk, user: 'x' } }, ['config']],
  ['unknown protocol', { type: 'datacenter', protocol: 'socks5' }, ['protocol']],
  ['empty name', { type: 'datacenter', name: '' }, ['name']],
  ['status is not input', { type: 'datacenter', status: 'available' }, ['(body)']],
  // Cross-field rules are judged even when another field fails, whatever the kind of failure.
  ['password without username and a port as text', { type: 'custom', config: { ...customOk, port: '8080', password: 'secret1' } }, ['config.port', 'config.username']],
  ['password without username and a fractional port', { type: 'custom', config: { ...customOk, port: 80.5, password: 'secret1' } }, ['config.port', 'config.username']],
  [
    'password without username, no host, has_password',
    { type: 'custom', config: { port: 8080, password: 'secret1', has_password: true } },
    ['config.host', 'config.username', 'config.has_password'],
  ],
  ['city without country and an unknown os', { type: 'residential', config: { city: 'denver', os: 'linux' } }, ['config.country', 'config.os']],
  ['city of the wrong type without country', { type: 'mobile', config: { city: 5, carrier: 'nokia' } }, ['config.city', 'config.country', 'config.carrier']],
  ['zip of the wrong type with another country: one detail for zip', { type: 'residential', config: { country: 'DE', zip: 12345 } }, ['config.zip']],
  ['US zip with another country and a bad state', { type: 'residential', config: { country: 'de', zip: '12345', state: 3 } }, ['config.zip', 'config.state']],
  [
    'several bad fields, one detail each',
    { type: 'residential', name: '', config: { city: 'a b', zip: 'x', state: '1', asn: 'ASX' } },
    ['name', 'config.city', 'config.state', 'config.zip', 'config.asn', 'config.country'],
  ],
];

test('validation: each bad field is one details entry naming it', async () => {
  const before = ((await getJson(ADMIN, '/proxies')) as unknown[]).length;
  for (const [why, body, fields] of VALIDATION) {
    const res = await d.fetch('/proxies', as(ADMIN, { method: 'POST', json: body }));
    const err = await expectError(res, 400, 'bad_request');
    const details = err.details as { code: string; message: string }[];
    const got = details.map((x) => x.message.slice(0, x.message.indexOf(':'))).sort();
    assert.deepEqual(got, [...fields].sort(), `${why}: ${JSON.stringify(details)}`);
    for (const x of details) assert.equal(x.code, 'invalid_input');
  }
  assert.equal(((await getJson(ADMIN, '/proxies')) as unknown[]).length, before, 'nothing was created');
});

test('a body that is not JSON is invalid_request', async () => {
  const res = await d.fetch('/proxies', { method: 'POST', headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' }, body: '{"type":' });
  await expectError(res, 400, 'invalid_request');
  const res2 = await d.fetch('/proxies', { method: 'POST', headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'text/plain' }, body: '{}' });
  await expectError(res2, 400, 'invalid_request');
});

test('scopes: proxies:read lists, proxies:write creates and deletes, proxies:check checks', async () => {
  const p = await create(ADMIN, { type: 'datacenter' });
  assert.ok(Array.isArray(await getJson(READER, '/proxies')));
  const c = await expectError(await d.fetch('/proxies', as(READER, { method: 'POST', json: { type: 'datacenter' } })), 403, 'forbidden');
  assert.deepEqual(c.details, [{ code: 'missing_scope', message: 'proxies:write' }]);
  const del = await expectError(await d.fetch(`/proxies/${String(p.id)}`, as(READER, { method: 'DELETE' })), 403, 'forbidden');
  assert.deepEqual(del.details, [{ code: 'missing_scope', message: 'proxies:write' }]);
  const chk = await expectError(await d.fetch(`/proxies/${String(p.id)}/check`, as(READER, { method: 'POST' })), 403, 'forbidden');
  assert.deepEqual(chk.details, [{ code: 'missing_scope', message: 'proxies:check' }]);
  await expectError(await fetch(`${d.url}/proxies`), 401, 'unauthorized');
  await expectError(await d.fetch('/proxies', as('unknown-token-eeeeeeeeeeeeeeee')), 401, 'unauthorized');
});

test('project keys see only their project: others are 404, lists are filtered', async () => {
  const a = await create(P1, { type: 'datacenter', name: 'of p1' });
  const b = await create(P2, { type: 'datacenter', name: 'of p2' });
  const ids = (token: string): Promise<unknown[]> => getJson(token, '/proxies').then((l) => (l as { id: unknown }[]).map((p) => p.id));
  const p1 = await ids(P1);
  const p2 = await ids(P2);
  assert.ok(p1.includes(a.id) && !p1.includes(b.id));
  assert.ok(p2.includes(b.id) && !p2.includes(a.id));
  const admin = await ids(ADMIN);
  assert.ok(admin.includes(a.id) && admin.includes(b.id), 'a key without a project sees every proxy');
  assert.deepEqual(await getJson(P1, `/proxies/${String(a.id)}`), a);
  await expectError(await d.fetch(`/proxies/${String(b.id)}`, as(P1)), 404, 'not_found');
  await expectError(await d.fetch(`/proxies/${String(b.id)}`, as(P1, { method: 'DELETE' })), 404, 'not_found');
  await expectError(await d.fetch(`/proxies/${String(b.id)}/check`, as(P1, { method: 'POST' })), 404, 'not_found');
  assert.deepEqual(await getJson(P2, `/proxies/${String(b.id)}`), b, 'the refused delete changed nothing');
  const unscoped = await create(ADMIN, { type: 'isp' });
  assert.ok(!(await ids(P1)).includes(unscoped.id), 'a proxy of no project is not shown to project keys');
});

test('unknown proxies are 404 on every route', async () => {
  await expectError(await d.fetch('/proxies/no-such-proxy', as(ADMIN)), 404, 'not_found');
  await expectError(await d.fetch('/proxies/no-such-proxy', as(ADMIN, { method: 'DELETE' })), 404, 'not_found');
  await expectError(await d.fetch('/proxies/no-such-proxy/check', as(ADMIN, { method: 'POST' })), 404, 'not_found');
  await expectError(await d.fetch('/proxies/no-such-proxy/check', as(ADMIN, { method: 'POST', json: { url: 'https://example.com/' } })), 404, 'not_found');
  await expectError(await d.fetch('/proxies', as(ADMIN, { method: 'PUT' })), 405, 'method_not_allowed');
});

test('delete: 204, then gone from get and list; a second delete is 404', async () => {
  const p = await create(ADMIN, { type: 'datacenter' });
  const res = await d.fetch(`/proxies/${String(p.id)}`, as(ADMIN, { method: 'DELETE' }));
  assert.equal(res.status, 204);
  assert.equal(await res.text(), '');
  await expectError(await d.fetch(`/proxies/${String(p.id)}`, as(ADMIN)), 404, 'not_found');
  assert.ok(!((await getJson(ADMIN, '/proxies')) as { id: unknown }[]).some((x) => x.id === p.id));
  await expectError(await d.fetch(`/proxies/${String(p.id)}`, as(ADMIN, { method: 'DELETE' })), 404, 'not_found');
});

test('the deprecated residential os is accepted, logged, and marked deprecated in OpenAPI', async () => {
  const p = await create(ADMIN, { type: 'residential', config: { country: 'US', os: 'windows' } });
  assert.deepEqual(p.config, { country: 'US', os: 'windows' });
  const line = await d.waitLog((l) => l.event === 'deprecated_field' && l.proxy_id === p.id);
  assert.equal(line.field, 'config.os');
  const doc = (await (await fetch(`${d.url}/openapi.json`)).json()) as Record<string, unknown>;
  const found: unknown[] = [];
  const walk = (x: unknown): void => {
    if (typeof x !== 'object' || x === null) return;
    const props = (x as { properties?: Record<string, unknown> }).properties;
    if (props?.os !== undefined) found.push(props.os);
    for (const v of Object.values(x)) walk(v);
  };
  walk((doc.paths as Record<string, Record<string, unknown>>)['/proxies']?.post);
  assert.ok(found.length > 0, 'os is in the document');
  for (const os of found) assert.equal((os as { deprecated?: boolean }).deprecated, true);
});

test('a managed type without a gateway: 422 provider_not_configured', async () => {
  const p = await create(ADMIN, { type: 'datacenter' });
  for (const json of [undefined, { url: 'http://93.184.216.34/' }]) {
    const res = await d.fetch(`/proxies/${String(p.id)}/check`, as(ADMIN, { method: 'POST', ...(json ? { json } : {}) }));
    const err = await expectError(res, 422, 'proxy_check_failed');
    assert.equal((err.inner_error as { code: string }).code, 'provider_not_configured');
  }
  assert.equal(((await getJson(ADMIN, `/proxies/${String(p.id)}`)) as { status?: string }).status, undefined, 'nothing changed');
});

test('the proxy limit is per project; keys without a project share one bucket', async () => {
  const stateDir = tempDir();
  const seeded = (project: string | null, n: number): unknown[] =>
    Array.from({ length: n }, (_, i) => ({
      id: `seed-${project ?? 'none'}-${i}`,
      type: 'datacenter',
      protocol: 'https',
      config: { country: 'US' },
      project,
      created_at: '2026-01-01T00:00:00.000Z',
    }));
  // p1 is full; the keys without a project have one place left.
  writeFileSync(path.join(stateDir, STORE_FILE), JSON.stringify({ version: 1, proxies: [...seeded('p1', MAX_PROXIES), ...seeded(null, MAX_PROXIES - 1)] }), {
    mode: 0o600,
  });
  const dl = await startDaemon({ token: null, stateDir, env: { BROWSERD_KEYS_FILE: keys } });
  try {
    const post = (token: string): Promise<Response> => dl.fetch('/proxies', as(token, { method: 'POST', json: { type: 'datacenter' } }));
    assert.equal((await post(P2)).status, 201, 'another project has a bucket of its own');
    const full = await expectError(await post(P1), 429, 'limit_exceeded');
    assert.match(String(full.message), new RegExp(`project p1 .*limit ${MAX_PROXIES}`));
    assert.equal((await post(ADMIN)).status, 201, 'the last place of the keys without a project');
    await expectError(await post(ADMIN), 429, 'limit_exceeded');
    assert.equal((await dl.fetch('/proxies/seed-p1-0', as(P1, { method: 'DELETE' }))).status, 204);
    assert.equal((await post(P1)).status, 201, 'a delete frees a place');
  } finally {
    await dl.cleanup();
    rmSync(stateDir, { recursive: true, force: true });
  }
});
