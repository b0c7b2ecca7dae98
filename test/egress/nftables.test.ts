// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The agent's processes under the egress policy, with nftables, in a network namespace of the
// daemon's own (unshare -n, loopback up): its rules are that namespace's alone, so daemons side by
// side never share them, and nothing outside it is touched. The test reaches the daemon's API and
// runs the "world" (127.0.0.2) inside the namespace with nsenter. While filtered, the agent user's
// sockets reach only the forwarding proxy and the daemon's API: `exec curl` straight to a host
// fails at once (reset), `exec curl` through the proxy variables follows the policy.
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { after, before, test } from 'node:test';
import { tempDir } from '../kit/cleanup.js';
import { TEST_TOKEN, startDaemon, type Daemon } from '../kit/daemon.js';

const POLICY = '/browsers/local/network/egress-policy';
let d: Daemon;
let world: ChildProcess;
let wp: number;

/** Runs `cmd` inside the daemon's network namespace. */
function inNs(cmd: string[], input?: string): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = execFile('nsenter', ['-t', String(d.pid), '-n', ...cmd], { maxBuffer: 16 * 1024 * 1024 }, (e, out, err) => resolve({ code: typeof e?.code === 'number' ? e.code : 0, out, err }));
    if (input !== undefined) child.stdin?.end(input);
  });
}

/** A call to the daemon's API from inside its namespace. */
async function api<T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
  const args = ['curl', '-s', '-w', '\n%{http_code}', '-X', method, '-H', `authorization: Bearer ${TEST_TOKEN}`, ...(body !== undefined ? ['-H', 'content-type: application/json', '--data-binary', '@-'] : []), `${d.url}${path}`];
  const r = await inNs(args, body !== undefined ? JSON.stringify(body) : undefined);
  const nl = r.out.lastIndexOf('\n');
  return { status: Number(r.out.slice(nl + 1)), body: JSON.parse(r.out.slice(0, nl)) as T };
}

/** `exec curl <args>` through the API: the exit code and what it printed. */
async function execCurl(args: string[]): Promise<{ exit_code: number; out: string }> {
  const r = await api<{ exit_code: number; stdout_b64: string; stderr_b64: string }>('POST', '/browsers/local/process/exec', { command: 'curl', args: ['-s', '-S', '-i', '--max-time', '20', ...args] });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return { exit_code: r.body.exit_code, out: Buffer.from(r.body.stdout_b64, 'base64').toString() + Buffer.from(r.body.stderr_b64, 'base64').toString() };
}

before(async () => {
  d = await startDaemon({
    wrapper: ['unshare', '-n', 'sh', '-c', 'ip link set lo up && exec "$@"', 'sh'],
    env: { BROWSERD_TEST_HOOKS: 'resolve=allowed.test:127.0.0.2;other.test:127.0.0.2', BROWSERD_POLICY_DIR: tempDir('browserd-egress-policies-') },
  });
  const code = "require('http').createServer((q,s)=>s.end('world '+q.headers.host)).listen(0,'127.0.0.2',function(){console.log(this.address().port)})";
  world = spawn('nsenter', ['-t', String(d.pid), '-n', process.execPath, '-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = (await once(world.stdout as NodeJS.ReadableStream, 'data')) as [Buffer];
  wp = Number(line.toString().trim());
});
after(async () => {
  world?.kill();
  await d?.cleanup();
});

test('not filtered: no rules, the agent reaches the world directly', async () => {
  const r = await api<{ processes: string }>('GET', POLICY);
  assert.equal(r.body.processes, 'not filtered');
  assert.notEqual((await inNs(['nft', 'list', 'table', 'inet', 'browserd_egress'])).code, 0, 'no table');
  const direct = await execCurl([`http://127.0.0.2:${wp}/`]);
  assert.equal(direct.exit_code, 0, direct.out);
});

test('filtered with nftables: exec curl straight to a host fails, through the proxy variables it follows the policy; not filtered again removes the rules', async () => {
  const put = await api<{ processes: string; processes_reason?: string }>('PUT', POLICY, { filtered: true, allowed_hosts: ['allowed.test'], allow_private: ['127.0.0.2'] });
  assert.equal(put.status, 200, JSON.stringify(put.body));
  assert.equal(put.body.processes, 'enforced', put.body.processes_reason);
  const rules = await inNs(['nft', 'list', 'table', 'inet', 'browserd_egress']);
  assert.match(rules.out, /meta skuid != 999 accept/);
  assert.ok(d.logs.some((l) => l.event === 'egress_processes_enforced'));

  // Straight to the world (the host is even one the policy allows): refused by the kernel at once.
  const direct = await execCurl(['--noproxy', '*', `http://127.0.0.2:${wp}/`]);
  assert.equal(direct.exit_code, 7, `curl: could not connect: ${direct.out}`);
  const name = await execCurl(['--noproxy', '*', '--resolve', `other.test:${wp}:127.0.0.2`, `http://other.test:${wp}/`]);
  assert.equal(name.exit_code, 7, name.out);
  // Through the proxy variables the daemon set: the forwarding proxy judges it.
  const allowed = await execCurl([`http://allowed.test:${wp}/`]);
  assert.equal(allowed.exit_code, 0, allowed.out);
  assert.match(allowed.out, /^HTTP\/1\.1 200[^]*world allowed\.test/);
  const denied = await execCurl([`http://other.test:${wp}/`]);
  assert.match(denied.out, /^HTTP\/1\.1 403[^]*x-kernel-proxy-error: network_policy_denied/i);
  // The API stays reachable for the agent (the Playwright runners connect there).
  const own = await execCurl(['-H', `authorization: Bearer ${TEST_TOKEN}`, `${d.url}/healthz`]);
  assert.match(own.out, /^HTTP\/1\.1 200/);
  // Root's processes (the daemon's own side) are not the agent's: untouched.
  const root = await inNs(['curl', '-s', '--noproxy', '*', '--max-time', '20', `http://127.0.0.2:${wp}/`]);
  assert.equal(root.out, `world 127.0.0.2:${wp}`);

  const open = await api<{ processes: string }>('PUT', POLICY, { filtered: false });
  assert.equal(open.body.processes, 'not filtered');
  assert.notEqual((await inNs(['nft', 'list', 'table', 'inet', 'browserd_egress'])).code, 0, 'the table is gone');
  assert.equal((await execCurl([`http://127.0.0.2:${wp}/`])).exit_code, 0);
});
