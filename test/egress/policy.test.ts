// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The egress policy through the HTTP API and the forwarding proxy, with real clients on real
// sockets: curl as the agent user through the forwarder (as Chromium, whose uid it is), and `exec
// curl` through the proxy variables the daemon gives the processes it starts. The "world" lives on
// loopback (127.0.0.2 answers, 127.0.0.3 is a second private address); names are mapped there by
// the test build's resolve hook, which stands in for DNS (the forwarder resolves every name itself).
// The policy's file in the policy folder goes to a folder of the test's own (no Chromium reads it
// here), and nftables stays off (BROWSERD_EGRESS_NFTABLES=false): that is egress-nft.test.ts.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, existsSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Checker } from '../../daemon/egress/checker.js';
import { ruleset } from '../../daemon/egress/nftables.js';
import { expectError } from '../helpers/http.js';
import { forwarderPort } from '../helpers/proxies/forwarder.js';
import { tempDir } from '../kit/cleanup.js';
import { TEST_TOKEN, startDaemon, type Daemon } from '../kit/daemon.js';
import { until } from '../kit/wait.js';

const AGENT_UID = 999; // the kit's agent user, `browser` (BROWSERD_AGENT_USER's default)
const READER = 'network-reader-token-aaaaaaaaaaaa';
const hex = (t: string): string => createHash('sha256').update(t).digest('hex');
const stateDir = tempDir('browserd-egress-');
const policyDir = tempDir('browserd-egress-policies-');
const keysDir = tempDir('browserd-egress-keys-');
const POLICY = '/browsers/local/network/egress-policy';
let world: http.Server;
let wp: number;
let d: Daemon;
let fp: number;

const HOOKS = [
  'allowed.test:127.0.0.2',
  'other.test:127.0.0.2',
  'private.test:127.0.0.3',
  // One name, two addresses: one of them the metadata address (a rebinding attempt): refused whole.
  'rebind.test:127.0.0.2/169.254.169.254',
  'sub.wild.test:127.0.0.2',
  'blocked.wild.test:127.0.0.2',
].join(';');

async function start(): Promise<Daemon> {
  const keys = path.join(keysDir, 'keys.json');
  const all = ['browser:read', 'processes:exec', 'network:read', 'network:write', 'telemetry:read'];
  writeFileSync(keys, JSON.stringify([
    { id: 'admin', sha256: hex(TEST_TOKEN), scopes: all },
    { id: 'reader', sha256: hex(READER), scopes: ['network:read'] },
  ]));
  const daemon = await startDaemon({
    stateDir,
    env: { BROWSERD_KEYS_FILE: keys, BROWSERD_TEST_HOOKS: `resolve=${HOOKS}`, BROWSERD_POLICY_DIR: policyDir, BROWSERD_EGRESS_NFTABLES: 'false', BROWSERD_PROXY_DIAL_TIMEOUT_MS: '5000' },
  });
  fp = await forwarderPort(daemon);
  return daemon;
}

before(async () => {
  world = http.createServer((req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end(`world ${req.headers.host ?? ''}`));
  await new Promise<void>((resolve) => world.listen(0, '127.0.0.2', resolve));
  wp = (world.address() as AddressInfo).port;
  d = await start();
});
after(async () => {
  await d?.cleanup();
  await new Promise<void>((resolve) => world.close(() => resolve()));
});

interface Answer {
  filtered: boolean;
  allowed_hosts: string[];
  allow_private: string[];
  blocked_hosts: string[];
  browser: string;
  processes: string;
  processes_reason?: string;
  chromium_policy_file: string;
}

/** curl as the agent user (Chromium's uid) through the forwarding proxy; `tunnel`: CONNECT. */
function viaForwarder(url: string, tunnel = false): Promise<{ code: number; out: string }> {
  const args = ['-s', '-i', '-x', `http://127.0.0.1:${fp}`, ...(tunnel ? ['-p'] : []), '--max-time', '20', url];
  return new Promise((resolve) => execFile('setpriv', [`--reuid=${AGENT_UID}`, `--regid=${AGENT_UID}`, '--clear-groups', 'curl', ...args], (e, out) => resolve({ code: typeof e?.code === 'number' ? e.code : 0, out })));
}

const put = (body: unknown): Promise<Response> => d.fetch(POLICY, { method: 'PUT', json: body });

test('the entries: each kind normalized; each bad entry its own detail; the checker by name, then by every address', () => {
  const c = new Checker({ filtered: true, allowed_hosts: ['example.com', '*.wild.test', '203.0.113.0/24'], allow_private: ['10.1.0.0/16', 'intranet.test'], blocked_hosts: ['blocked.wild.test', '203.0.113.7'] });
  assert.equal(c.byName('example.com'), null);
  assert.equal(c.byName('EXAMPLE.com.'), null, 'case and a trailing dot');
  assert.equal(c.byName('a.b.wild.test'), null);
  assert.equal(c.byName('wild.test'), null, 'allowed_hosts has ranges: a name not listed waits for its addresses');
  assert.equal(c.byAddresses('wild.test', ['93.184.215.14'])?.reason, 'not_allowed', '*.suffix is not the name itself');
  assert.equal(new Checker({ filtered: true, allowed_hosts: ['*.wild.test'], allow_private: [], blocked_hosts: [] }).byName('wild.test')?.reason, 'not_allowed', 'no ranges: refused by name, before any lookup');
  assert.equal(c.byName('blocked.wild.test')?.reason, 'blocked_host');
  assert.equal(c.byAddresses('example.com', ['93.184.215.14']), null);
  assert.equal(c.byAddresses('example.com', ['93.184.215.14', '10.0.0.1'])?.reason, 'private_address', 'every address is judged');
  assert.equal(c.byAddresses('example.com', ['10.1.2.3']), null, 'a private address in allow_private');
  assert.equal(c.byAddresses('intranet.test', ['192.168.1.1'])?.reason, 'not_allowed', 'allow_private does not allow a host');
  assert.equal(c.byAddresses('203.0.113.5', ['203.0.113.5'])?.reason, 'private_address', '203.0.113.0/24 is documentation space: private, though allowed');
  assert.equal(c.byAddresses('203.0.113.7', ['203.0.113.7'])?.reason, 'blocked_host');
  assert.equal(c.byAddresses('example.com', ['169.254.169.254'])?.reason, 'always_refused');
  assert.equal(c.byAddresses('example.com', ['::ffff:169.254.169.254'])?.reason, 'always_refused', 'IPv4-mapped');
  assert.equal(c.byAddresses('example.com', ['fe80::1'])?.reason, 'always_refused');
  assert.equal(c.byAddresses('example.com', ['0.0.0.0'])?.reason, 'always_refused');
  const open = new Checker({ filtered: false, allowed_hosts: ['*'], allow_private: [], blocked_hosts: [] });
  assert.equal(open.byAddresses('x.test', ['10.0.0.1']), null, 'not filtered: private addresses go');
  assert.equal(open.byAddresses('x.test', ['169.254.169.254'])?.reason, 'always_refused', 'not filtered: the metadata address stays refused');
  const text = ruleset(999, [{ address: '127.0.0.1', port: 4100 }, { address: '::1', port: 4200 }]);
  assert.match(text, /meta skuid != 999 accept/);
  assert.match(text, /ip daddr 127\.0\.0\.1 tcp dport 4100 accept/);
  assert.match(text, /ip6 daddr ::1 tcp dport 4200 accept/);
  assert.match(text, /reject\n {2}\}\n\}$/);
});

test('GET: not filtered by default; PUT: every bad entry named, nothing changed; scopes network:read and network:write', async () => {
  const first = await d.call<Answer>(POLICY);
  assert.deepEqual({ ...first, chromium_policy_file: undefined }, { filtered: false, allowed_hosts: ['*'], allow_private: [], blocked_hosts: [], browser: 'not filtered', processes: 'not filtered', chromium_policy_file: undefined });
  const bad = await put({ filtered: true, allowed_hosts: ['ok.test', 'http://x.test/', 'a.*.test', 'x.test:443', '10.0.0.0/33', ''], allow_private: ['*'], blocked_hosts: [7] });
  const err = await expectError(bad, 400, 'bad_request');
  const messages = ((err.details ?? []) as { message: string }[]).map((x) => x.message);
  for (const want of [/^allowed_hosts\.1: .*without scheme/, /^allowed_hosts\.2: may hold \*/, /^allowed_hosts\.3: may not carry a port/, /^allowed_hosts\.4: has a prefix longer than 32/, /^allowed_hosts\.5: must not be empty/, /^allow_private\.0: may not be \*/, /^blocked_hosts\.0: must be a string/]) {
    assert.ok(messages.some((m) => want.test(m)), `${want}: ${messages.join(' | ')}`);
  }
  assert.equal(messages.length, 7, messages.join(' | '));
  assert.equal((await d.call<Answer>(POLICY)).filtered, false, 'nothing changed');
  const reader = { headers: { authorization: `Bearer ${READER}` } };
  assert.equal((await d.fetch(POLICY, reader)).status, 200);
  const denied = await expectError(await d.fetch(POLICY, { ...reader, method: 'PUT', headers: { ...reader.headers, 'content-type': 'application/json' }, body: '{"filtered":true}' }), 403, 'forbidden');
  assert.match(JSON.stringify(denied.details), /network:write/);
});

test('filtered: allowed hosts go, others get 403 network_policy_denied (plain and CONNECT), private and rebinding names refused, processes get the proxy variables', async () => {
  const res = await put({ filtered: true, allowed_hosts: ['allowed.test', 'private.test', 'rebind.test', '*.wild.test', '169.254.169.254'], allow_private: ['127.0.0.2', '169.254.0.0/16'], blocked_hosts: ['blocked.wild.test'] });
  assert.equal(res.status, 200);
  const body = (await res.json()) as Answer;
  assert.equal(body.filtered, true);
  assert.equal(body.browser, 'enforced');
  assert.equal(body.processes, 'not enforced', 'never pretends');
  assert.equal(body.processes_reason, 'BROWSERD_EGRESS_NFTABLES=false');
  assert.ok(d.logs.some((l) => l.event === 'egress_processes_not_enforced'), 'said in the log too');
  // Chromium's managed policy: pinned to this daemon's forwarder.
  const file = JSON.parse(readFileSync(path.join(policyDir, 'browserd-egress.json'), 'utf8')) as Record<string, { ProxyServer?: string }>;
  assert.equal(file.ProxySettings?.ProxyServer, `http://127.0.0.1:${fp}`);
  assert.equal(file.WebRtcIPHandling as unknown, 'disable_non_proxied_udp');
  assert.equal(file.DnsOverHttpsMode as unknown, 'off');

  const ok = await viaForwarder(`http://allowed.test:${wp}/`);
  assert.match(ok.out, /^HTTP\/1\.1 200/);
  assert.match(ok.out, /world allowed\.test/);
  assert.match((await viaForwarder(`http://sub.wild.test:${wp}/`)).out, /^HTTP\/1\.1 200/);
  const cases: [string, RegExp][] = [
    [`http://other.test:${wp}/`, /not_allowed\): other\.test .* is not in allowed_hosts/],
    [`http://blocked.wild.test:${wp}/`, /blocked_host/],
    [`http://private.test:${wp}/`, /private_address.*127\.0\.0\.3 is a private address \(loopback\)/],
    [`http://rebind.test:${wp}/`, /always_refused.*169\.254\.169\.254/],
    ['http://169.254.169.254/latest/meta-data/', /always_refused/],
    [`http://127.0.0.2:${wp}/`, /not_allowed/],
  ];
  for (const [url, why] of cases) {
    const r = await viaForwarder(url);
    assert.match(r.out, /^HTTP\/1\.1 403/, url);
    assert.match(r.out, /x-kernel-proxy-error: network_policy_denied/i, url);
    assert.match(r.out, /network_policy_denied/, url);
    assert.match(r.out, why, url);
  }
  const tunnel = await viaForwarder(`https://other.test:${wp}/`, true);
  assert.match(tunnel.out, /^HTTP\/1\.1 403/);
  assert.match(tunnel.out, /x-kernel-proxy-error: network_policy_denied/i);
  assert.notEqual(tunnel.code, 0, 'no tunnel');
  assert.ok(d.logs.some((l) => l.event === 'forwarder_refused' && l.reason === 'network_policy' && l.policy_reason === 'private_address'));

  // The decisions are telemetry events.
  const events = await until('policy decisions in the telemetry ring', async () => {
    const list = (await d.call<{ event: { type: string; data: Record<string, unknown> } }[]>('/telemetry/events?category=system&limit=100')).map((e) => e.event);
    const ours = list.filter((e) => e.type === 'network_policy_decision');
    return ours.some((e) => e.data.decision === 'denied') && ours.some((e) => e.data.decision === 'allowed') ? ours : undefined;
  });
  const rebind = events.find((e) => e.data.host === 'rebind.test');
  assert.deepEqual(rebind?.data.addresses, ['127.0.0.2', '169.254.169.254']);
  assert.equal(rebind?.data.reason, 'always_refused');

  // exec: the agent's process gets the proxy variables and is held to the same policy through them.
  const exec = async (url: string): Promise<string> => {
    const r = await d.call<{ exit_code: number; stdout_b64: string }>('/browsers/local/process/exec', { method: 'POST', json: { command: 'curl', args: ['-s', '-i', '--max-time', '20', url] } });
    return Buffer.from(r.stdout_b64, 'base64').toString('utf8');
  };
  assert.match(await exec(`http://allowed.test:${wp}/`), /^HTTP\/1\.1 200[^]*world allowed\.test/);
  assert.match(await exec(`http://other.test:${wp}/`), /^HTTP\/1\.1 403[^]*network_policy_denied/);
  const env = await d.call<{ stdout_b64: string }>('/browsers/local/process/exec', { method: 'POST', json: { command: 'env' } });
  assert.match(Buffer.from(env.stdout_b64, 'base64').toString(), new RegExp(`^HTTPS_PROXY=http://127\\.0\\.0\\.1:${fp}$`, 'm'));
});

test('a policy change ends the connections opened under the old one (a tunnel to a host no longer allowed)', async () => {
  // As the agent user: a CONNECT tunnel through the forwarder to allowed.test, held open until the forwarder ends it.
  const code = `const s=require('net').connect(${fp},'127.0.0.1',()=>s.write('CONNECT allowed.test:${wp} HTTP/1.1\\r\\nHost: allowed.test:${wp}\\r\\n\\r\\n'));let b='';s.on('data',(d)=>{b+=d;if(b.includes('\\r\\n\\r\\n')){console.log(b.split('\\r\\n')[0]);b='';}});s.on('close',()=>{console.log('closed');process.exit(0)});s.on('error',()=>{})`;
  const child = spawn('setpriv', [`--reuid=${AGENT_UID}`, `--regid=${AGENT_UID}`, '--clear-groups', process.execPath, '-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
  await until('the tunnel is open', () => out.includes('200 Connection established'));
  assert.equal((await put({ filtered: true, allowed_hosts: ['sub.wild.test'], allow_private: ['127.0.0.2'] })).status, 200);
  await until('the tunnel is closed', () => out.includes('closed'));
  assert.match((await viaForwarder(`http://allowed.test:${wp}/`)).out, /^HTTP\/1\.1 403/);
});

test('the policy survives a daemon restart (the new forwarder port in the policy file); not filtered removes the file and the variables', async () => {
  const before = await d.call<Answer>(POLICY);
  assert.equal(before.filtered, true);
  await d.stop();
  d = await start();
  const after = await d.call<Answer>(POLICY);
  assert.deepEqual(after, before);
  const file = JSON.parse(readFileSync(path.join(policyDir, 'browserd-egress.json'), 'utf8')) as { ProxySettings: { ProxyServer: string } };
  assert.equal(file.ProxySettings.ProxyServer, `http://127.0.0.1:${fp}`, "the new daemon's forwarder");
  assert.match((await viaForwarder(`http://other.test:${wp}/`)).out, /^HTTP\/1\.1 403/);
  const open = await put({ filtered: false });
  assert.equal(((await open.json()) as Answer).processes, 'not filtered');
  assert.equal(existsSync(path.join(policyDir, 'browserd-egress.json')), false);
  assert.match((await viaForwarder(`http://other.test:${wp}/`)).out, /^HTTP\/1\.1 200/);
  const env = await d.call<{ stdout_b64: string }>('/browsers/local/process/exec', { method: 'POST', json: { command: 'env' } });
  assert.doesNotMatch(Buffer.from(env.stdout_b64, 'base64').toString(), /HTTPS_PROXY/);
});
