// The two sides (docs/security.md), through the HTTP API of the real daemon, as an agent would try
// them with an ordinary key (processes:exec, no processes:root): every way into the daemon's side
// fails, and each attempt is checked to have really run (its exit code and the kernel's error
// text), so a guard that went missing fails the test instead of passing it. Then Chromium: its
// processes run as the agent user, without --no-sandbox, a renderer in a PID namespace of its own.
// And processes:root: as_root and as_user root or the daemon's own user are 403 without it.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { expectError } from '../helpers/http.js';
import { execProcess, PROC } from '../helpers/processes.js';
import { forwarderPort } from '../helpers/proxies/forwarder.js';
import { waitBrowser } from '../kit/browser.js';
import { tempDir } from '../kit/cleanup.js';
import { keysFile, startDaemon, type ApiKey, type Daemon } from '../kit/daemon.js';
import { until } from '../kit/wait.js';

const AGENT = 'browser';
const agentUid = Number(/^browser:x:(\d+):/m.exec(readFileSync('/etc/passwd', 'utf8'))?.[1]);
const ordinary: ApiKey = { id: 'agent', token: 'agent-token-0123456789abcdef', scopes: ['processes:exec', 'processes:write', 'browser:read', 'proxies:write', 'proxies:read'] };
const rooted: ApiKey = { id: 'root', token: 'root-token-0123456789abcdef0', scopes: ['processes:exec', 'processes:root', 'browser:read'] };

const secrets = tempDir('browserd-sec-');
const keys = keysFile([ordinary, rooted], path.join(secrets, 'keys.json'));
const providers = path.join(secrets, 'providers.json');
writeFileSync(providers, JSON.stringify({ datacenter: { host: 'gw.example', port: 8000, username: 'svc', password: 'provider-secret' } }), { mode: 0o600 });
let d: Daemon;

before(async () => {
  const stateDir = tempDir('browserd-sec-state-');
  // A token file as an earlier run without keys left it (the daemon reads keys now).
  writeFileSync(path.join(stateDir, 'token'), 'left-token-0123456789abcdef', { mode: 0o600 });
  d = await startDaemon({ stateDir, autostart: true, token: null, bearer: ordinary.token, env: { BROWSERD_KEYS_FILE: keys, BROWSERD_PROXY_PROVIDERS_FILE: providers } });
  // proxies.json with a password in it.
  const created = await d.fetch('/proxies', { method: 'POST', json: { type: 'custom', protocol: 'http', config: { host: '127.0.0.1', port: 3128, username: 'u', password: 'proxy-secret' } } });
  assert.equal(created.status, 201, await created.clone().text());
});
after(() => d.cleanup());

const text = (s: string): string => Buffer.from(s, 'base64').toString();

/** Runs `sh -c script` through the API with the ordinary key; exit code, stdout, stderr. */
async function agentSh(script: string): Promise<{ code: number | null; out: string; err: string }> {
  const r = await execProcess(d, { command: 'sh', args: ['-c', script] });
  return { code: r.exit_code, out: text(r.stdout_b64), err: text(r.stderr_b64) };
}

test('a command of an ordinary key runs as the agent user, with its HOME and groups, no capability, no daemon descriptor or setting', async () => {
  const r = await agentSh('id -un; echo "$HOME"; grep -E "^Cap(Prm|Eff|Amb)" /proc/self/status; ls /proc/self/fd; env');
  assert.equal(r.code, 0, r.err);
  const [user, home, ...rest] = r.out.split('\n');
  assert.equal(user, AGENT);
  assert.equal(home, readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.startsWith(`${AGENT}:`))?.split(':')[5]);
  for (const cap of rest.filter((l) => l.startsWith('Cap'))) assert.match(cap, /:\s+0{16}$/, cap);
  // 0, 1, 2 and the descriptor ls itself opens for /proc/self/fd: nothing of the daemon's.
  const fds = rest.filter((l) => /^\d+$/.test(l)).map(Number);
  assert.deepEqual(fds.filter((fd) => fd > 3), [], `descriptors: ${fds.join(' ')}`);
  assert.ok(!r.out.includes('BROWSERD_'), 'no setting of the daemon in the environment');
});

test("the daemon's secrets: token, keys, proxies.json, the provider file, /proc/<daemon>/environ are unreadable; the state dir unwritable", async () => {
  const files = {
    token: path.join(d.stateDir, 'token'),
    keys,
    'proxies.json': path.join(d.stateDir, 'proxies.json'),
    providers,
    environ: `/proc/${d.pid}/environ`,
  };
  // They exist (the daemon's side sees them), so a refusal is the guard's, not a missing file.
  for (const [name, file] of Object.entries(files)) assert.ok(readFileSync(file).length > 0, `${name} exists`);
  assert.match(readFileSync(files['proxies.json'], 'utf8'), /proxy-secret/);
  for (const [name, file] of Object.entries(files)) {
    const r = await agentSh(`cat '${file}'`);
    assert.equal(r.code, 1, `${name}: cat exits 1 (${r.out})`);
    assert.match(r.err, /Permission denied/, name);
    assert.equal(r.out, '', name);
  }
  const w = await agentSh(`echo x > '${path.join(d.stateDir, 'planted')}'`);
  assert.notEqual(w.code, 0);
  assert.match(w.err, /Permission denied/);
  const m = await agentSh(`mkdir '${path.join(d.stateDir, 'planted')}'`);
  assert.equal(m.code, 1);
  assert.match(m.err, /Permission denied/);
  assert.ok(!readdirSync(d.stateDir).includes('planted'));
});

test('the daemon cannot be signalled or traced from the agent side', async () => {
  const k = await agentSh(`kill -TERM ${d.pid}`);
  assert.notEqual(k.code, 0);
  assert.match(k.err, /Operation not permitted/);
  // PTRACE_ATTACH (16): -1, errno EPERM (1).
  const py = `import ctypes; libc = ctypes.CDLL(None, use_errno=True); print(libc.ptrace(16, ${d.pid}, None, None), ctypes.get_errno())`;
  const t = await agentSh(`/usr/bin/python3 -c '${py}'`);
  assert.equal(t.code, 0, t.err);
  assert.equal(t.out.trim(), '-1 1');
  const mem = await agentSh(`head -c 1 /proc/${d.pid}/mem; ls /proc/${d.pid}/fd`);
  assert.match(mem.err, /Permission denied/);
  // Still serving.
  assert.equal((await d.fetch('/browsers/local')).status, 200);
});

test('processes:root: as_root and as_user root or the daemon user are 403 without it and run with it; any other user runs', async () => {
  for (const body of [{ as_root: true }, { as_user: 'root' }]) {
    const refused = await expectError(await d.fetch(`${PROC}/exec`, { method: 'POST', json: { command: 'id', args: ['-u'], ...body } }), 403, 'forbidden');
    assert.match(String(refused.message), /processes:root/);
    const ok = await d.fetch(`${PROC}/exec`, { method: 'POST', json: { command: 'id', args: ['-u'], ...body }, headers: { authorization: `Bearer ${rooted.token}` } });
    assert.equal(ok.status, 200);
    assert.equal(text(((await ok.json()) as { stdout_b64: string }).stdout_b64), '0\n');
  }
  const nobody = await execProcess(d, { command: 'id', args: ['-un'], as_user: 'nobody' });
  assert.equal(text(nobody.stdout_b64), 'nobody\n');
});

/** curl through the forwarding proxy as `uid` (setpriv): exit code and output. */
function curlAs(uid: number, port: number): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const c = spawn('setpriv', [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', 'curl', '-sS', '--max-time', '20', '-o', '/dev/null', '-w', '%{http_code}', '-x', `http://127.0.0.1:${port}`, `http://127.0.0.1:${port}/`], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    c.stdout.on('data', (b: Buffer) => (out += b.toString()));
    c.on('close', (code) => resolve({ code, out }));
  });
}

test("the forwarding proxy serves the agent user only: a third user's and the daemon's own connections are closed unanswered", async () => {
  const port = await forwarderPort(d);
  // The agent user gets an answer: 403, its own port is never a target (an HTTP answer, not a closed connection).
  const served = await curlAs(agentUid, port);
  assert.equal(served.code, 0);
  assert.equal(served.out, '403');
  for (const uid of [65534, 0]) {
    const r = await curlAs(uid, port);
    assert.ok(r.code === 52 || r.code === 56, `uid ${uid}: curl exit ${r.code}`);
    await d.waitLog((l) => l.event === 'forwarder_refused' && l.peer_uid === uid);
  }
});

const statusOf = (pid: number): string => readFileSync(`/proc/${pid}/status`, 'utf8');
const uidOf = (pid: number): number => Number(/^Uid:\s+(\d+)/m.exec(statusOf(pid))?.[1]);

test("Chromium runs as the agent user with its sandbox: no --no-sandbox, a renderer in a PID namespace of its own", async () => {
  // The browser started with the daemon: wait for it (the tests before need no browser).
  const snap = await waitBrowser(d, (s) => s.state === 'ready', 'ready');
  const browserPid = snap.chromium.pid as number;
  const profile = path.join(d.agentDir, 'chromium-profile');
  const members = (): number[] =>
    readdirSync('/proc')
      .filter((n) => /^\d+$/.test(n))
      .map(Number)
      .filter((pid) => {
        try {
          return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(profile) || readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('--type=');
        } catch {
          return false;
        }
      })
      .filter((pid) => {
        try {
          return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ')[3] === String(browserPid); // its session
        } catch {
          return false;
        }
      });
  let renderer = 0;
  await until('a renderer runs', () => (renderer = members().find((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('--type=renderer')) ?? 0) > 0);
  const all = members();
  assert.ok(all.length >= 3, `Chromium's processes: ${all.join(' ')}`);
  for (const pid of all) {
    assert.equal(uidOf(pid), agentUid, `pid ${pid} runs as the agent user`);
    assert.ok(!readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes('--no-sandbox'), `pid ${pid}: no --no-sandbox`);
  }
  assert.notEqual(readlinkSync(`/proc/${renderer}/ns/pid`), readlinkSync(`/proc/${browserPid}/ns/pid`), "the renderer's PID namespace is its own");
  // The daemon's side is not the profile's.
  assert.equal(uidOf(d.pid), 0);
});
