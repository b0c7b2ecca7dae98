// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The proxies resource through the official SDK (`@onkernel/sdk`, `client.proxies.*`) against the
// real daemon and a real tinyproxy: create (with bypass_hosts), retrieve, update, list (the SDK's
// OffsetPagination walking every page), delete and check. Every result is checked at runtime
// against the shape node_modules/@onkernel/sdk/resources/proxies.d.ts declares for it.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import Kernel from '@onkernel/sdk';
import { z } from 'zod';
import { startOrigin, startTinyproxy, type Closer, type Origin, type Tinyproxy } from '../helpers/proxies/servers.js';
import { TEST_TOKEN, startDaemon, type Daemon } from '../kit/daemon.js';

// The response type of every proxies method (ProxyCreateResponse = ProxyRetrieveResponse = …):
// `type` required, every other field optional with its declared type; `config` is the interface
// of the proxy's type (the .d.ts declares a union of them).
const TYPES = ['datacenter', 'isp', 'residential', 'mobile', 'custom'] as const;
const geo = { country: z.string().optional() };
const residential = z.object({ ...geo, asn: z.string().optional(), city: z.string().optional(), os: z.enum(['windows', 'macos', 'android']).optional(), state: z.string().optional(), zip: z.string().optional() });
const mobile = z.object({ ...geo, city: z.string().optional(), state: z.string().optional() });
const customConfig = z.object({ host: z.string(), port: z.number(), has_password: z.boolean().optional(), username: z.string().optional() });
const common = {
  id: z.string().optional(),
  bypass_hosts: z.array(z.string()).optional(),
  ip_address: z.string().optional(),
  last_checked: z.string().optional(),
  name: z.string().optional(),
  protocol: z.enum(['http', 'https']).optional(),
  status: z.enum(['available', 'unavailable']).optional(),
};
const declaredProxy = z.discriminatedUnion('type', [
  z.object({ ...common, type: z.literal('datacenter'), config: z.object(geo).optional() }),
  z.object({ ...common, type: z.literal('isp'), config: z.object(geo).optional() }),
  z.object({ ...common, type: z.literal('residential'), config: residential.optional() }),
  z.object({ ...common, type: z.literal('mobile'), config: mobile.optional() }),
  z.object({ ...common, type: z.literal('custom'), config: customConfig.optional() }),
]);
type DeclaredProxy = z.infer<typeof declaredProxy>;

/** `value` itself (extra fields kept), once it has the declared shape. */
function shaped(value: unknown, what: string): DeclaredProxy {
  const parsed = declaredProxy.safeParse(value);
  assert.ok(parsed.success, `${what} does not have the declared shape: ${JSON.stringify(parsed.error?.issues)} in ${JSON.stringify(value)}`);
  assert.ok(TYPES.includes(parsed.data.type));
  return value as DeclaredProxy;
}

const closers: Closer[] = [];
let d: Daemon;
let origin: Origin;
let tiny: Tinyproxy;
let client: Kernel;
const listCalls: string[] = [];

before(async () => {
  origin = await startOrigin();
  tiny = await startTinyproxy({ user: 'user', pass: 'secret1', connectPorts: [origin.port] });
  closers.push(origin, tiny);
  d = await startDaemon({ env: { BROWSERD_PROXY_CHECK_URLS: `http://127.0.0.1:${origin.port}/json` } });
  client = new Kernel({
    apiKey: TEST_TOKEN,
    baseURL: d.url,
    maxRetries: 0,
    fetch: (input, init) => {
      const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
      if (url.pathname === '/proxies' && (init?.method ?? 'GET') === 'GET') listCalls.push(url.search);
      return fetch(input, init);
    },
  });
});
after(async () => {
  await d?.cleanup();
  for (const c of closers.reverse()) await c.close();
});

const tinyConfig = { host: '127.0.0.1', port: 0, username: 'user', password: 'secret1' };

test('create with bypass_hosts, retrieve, update: the declared shapes', async () => {
  const created = shaped(
    await client.proxies.create({ type: 'custom', name: 'office', protocol: 'http', bypass_hosts: ['Intranet.example', '*.corp.example'], config: { ...tinyConfig, port: tiny.port } }),
    'proxies.create',
  );
  assert.deepEqual(created.bypass_hosts, ['intranet.example', '*.corp.example']);
  assert.deepEqual(created.config, { host: '127.0.0.1', port: tiny.port, username: 'user', has_password: true, has_ca_bundle: false });
  const id = created.id as string;
  assert.deepEqual(shaped(await client.proxies.retrieve(id), 'proxies.retrieve'), created);
  const updated = shaped(await client.proxies.update(id, { name: 'my-renamed-proxy' }), 'proxies.update');
  assert.deepEqual(updated, { ...created, name: 'my-renamed-proxy' });
  for (const type of ['datacenter', 'isp', 'residential', 'mobile'] as const) {
    shaped(await client.proxies.create({ type }), `proxies.create ${type}`);
  }
});

test('list walks every proxy exactly once with limit 2 (x-has-more, x-next-offset)', async () => {
  const fresh = await startDaemon();
  try {
    const c = new Kernel({ apiKey: TEST_TOKEN, baseURL: fresh.url, maxRetries: 0 });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await c.proxies.create({ type: 'datacenter', name: `p${i}` })).id as string);
    const seen: string[] = [];
    for await (const p of c.proxies.list({ limit: 2 })) seen.push(shaped(p, 'proxies.list item').id as string);
    assert.deepEqual(seen, ids, 'each once, oldest first');
    const firstPage = await c.proxies.list({ limit: 2 });
    assert.equal(firstPage.getPaginatedItems().length, 2);
    assert.equal(firstPage.has_more, true);
    assert.equal(firstPage.next_offset, 2);
    const filtered: string[] = [];
    for await (const p of c.proxies.list({ name: 'P3' })) filtered.push(p.id as string);
    assert.deepEqual(filtered, [ids[3]]);
    const queried: string[] = [];
    for await (const p of c.proxies.list({ query: ids[1] as string, limit: 1 })) queried.push(p.id as string);
    assert.deepEqual(queried, [ids[1]]);
  } finally {
    await fresh.cleanup();
  }
  // The pages the client of this file asked for carry only declared parameters.
  for await (const p of client.proxies.list({ limit: 1 })) shaped(p, 'proxies.list item');
  assert.ok(listCalls.length >= 2 && listCalls.every((q) => /^\?(limit=1(&offset=\d+)?)?$/.test(q)), listCalls.join(' '));
});

test('check: available through tinyproxy, unavailable with a wrong password', async () => {
  const good = await client.proxies.create({ type: 'custom', protocol: 'http', config: { ...tinyConfig, port: tiny.port } });
  const checked = shaped(await client.proxies.check(good.id as string), 'proxies.check');
  assert.equal(checked.status, 'available');
  assert.equal(checked.ip_address, '127.0.0.1');
  assert.ok(!Number.isNaN(Date.parse(checked.last_checked ?? '')));
  const bad = await client.proxies.create({ type: 'custom', protocol: 'http', config: { ...tinyConfig, port: tiny.port, password: 'wrongpass' } });
  const failed = await client.proxies.check(bad.id as string);
  assert.equal(shaped(failed, 'proxies.check').status, 'unavailable');
  assert.deepEqual((failed as unknown as { last_check_error: { code: string } }).last_check_error.code, 'proxy_auth_failed');
});

test('delete, then retrieve, update and delete are 404 (the SDK NotFoundError)', async () => {
  const p = await client.proxies.create({ type: 'isp' });
  const id = p.id as string;
  assert.equal((await client.proxies.delete(id)) ?? undefined, undefined, 'void (204)');
  for (const call of [() => client.proxies.retrieve(id), () => client.proxies.update(id, { name: 'x' }), () => client.proxies.delete(id)]) {
    await assert.rejects(call(), (err: unknown) => err instanceof Kernel.NotFoundError && err.status === 404);
  }
  await assert.rejects(client.proxies.update('x', { name: '' }), (err: unknown) => err instanceof Kernel.BadRequestError && /name: /.test(err.message));
});

test('browsers.update sets and removes the proxy (proxy_id, and the active proxy)', async () => {
  const p = await client.proxies.create({ type: 'custom', protocol: 'http', config: { ...tinyConfig, port: tiny.port } });
  const on = await client.browsers.update('local', { proxy_id: p.id as string });
  assert.equal(on.proxy_id, p.id);
  assert.deepEqual((on as unknown as { proxy: unknown }).proxy, { id: p.id, last_error: null });
  await assert.rejects(client.proxies.delete(p.id as string), (err: unknown) => err instanceof Kernel.ConflictError && /proxy_in_use|browser's proxy/.test(err.message));
  const off = await client.browsers.update('local', { proxy_id: '' });
  assert.equal(off.proxy_id, undefined);
  await client.proxies.delete(p.id as string);
});
