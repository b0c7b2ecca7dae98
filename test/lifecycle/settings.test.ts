// @long: one of the slowest files (10 s or more alone), started first by test/run.mjs.
// Settings: a bad value stops the start with one log line naming it and exit code 2;
// the first start without a token writes <state>/token with mode 0600.
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, realpathSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { loadConfig } from '../../daemon/core/config.js';
import { MAX_STATE_DIR_BYTES } from '../../daemon/core/state-dir.js';
import { splitFlags } from '../../daemon/core/flags-parse.js';
import { agentTempDir } from '../kit/agent.js';
import { tempDir } from '../kit/cleanup.js';
import { waitBrowser } from '../kit/browser.js';
import { startDaemon } from '../kit/daemon.js';

const badSettings: [string, string][] = [
  ['BROWSERD_LISTEN', 'nonsense'],
  ['BROWSERD_LISTEN', '127.0.0.1:70000'],
  ['BROWSERD_HEADLESS', 'maybe'],
  ['BROWSERD_LOG_LEVEL', 'loud'],
  ['BROWSERD_SESSION_ID', 'a/b'],
  ['BROWSERD_CHROMIUM', '/nonexistent/chromium'],
  ['BROWSERD_CHROMIUM_FLAGS', '--user-data-dir=/tmp/x'],
  ['BROWSERD_CHROMIUM_FLAGS', '--remote-debugging-port=9222'],
  ['BROWSERD_CHROMIUM_FLAGS', '--lang="en'],
  ['BROWSERD_KEYS_FILE', '/nonexistent/keys.json'],
  ['BROWSERD_PROXY_CHECK_URLS', 'ftp://example.com/'],
  ['BROWSERD_STDIN_LIMIT_BYTES', '-5'],
  ['BROWSERD_MAX_PROCESSES', '0'],
  // A total that could never hold one request of the per-item limit.
  ['BROWSERD_STDIN_QUEUE_TOTAL_BYTES', '1024'],
  ['BROWSERD_REQUEST_IDLE_TIMEOUT_MS', '10'],
  ['BROWSERD_SSE_STALL_MS', '10'],
];

for (const [setting, value] of badSettings) {
  test(`bad ${setting}=${value}: exit 2 with one line naming the setting`, async () => {
    const d = await startDaemon({ env: { [setting]: value }, waitListening: false });
    const { code } = await d.waitExit();
    await d.cleanup();
    assert.equal(code, 2);
    const fatal = d.logs.filter((l) => l.level === 60);
    assert.equal(fatal.length, 1, JSON.stringify(d.logs));
    assert.equal(fatal[0]?.setting, setting);
    assert.ok(String(fatal[0]?.msg).startsWith(`${setting}: `), String(fatal[0]?.msg));
    assert.equal(d.logs.filter((l) => l.event === 'listening').length, 0);
  });
}

test('a broken keys file stops the start with exit 2', async () => {
  const dir = tempDir();
  const file = path.join(dir, 'keys.json');
  writeFileSync(file, JSON.stringify([{ id: 'x', sha256: 'nothex', scopes: ['browser:read'] }]));
  const d = await startDaemon({ token: null, env: { BROWSERD_KEYS_FILE: file }, waitListening: false });
  assert.equal((await d.waitExit()).code, 2);
  await d.cleanup();
  rmSync(dir, { recursive: true, force: true });
  assert.match(String(d.logs.find((l) => l.level === 60)?.msg), /^BROWSERD_KEYS_FILE: .*sha256/);
});

test('first start without a token writes <state>/token (0600), logs its path, never the token', async () => {
  const d = await startDaemon({ token: null });
  const file = path.join(d.stateDir, 'token');
  const token = readFileSync(file, 'utf8').trim();
  assert.equal(statSync(file).mode & 0o777, 0o600);
  assert.ok(token.length >= 32);
  const line = d.logs.find((l) => l.event === 'token_file');
  assert.equal(line?.path, file);
  assert.ok(!JSON.stringify(d.logs).includes(token));
  const res = await fetch(`${d.url}/whoami`, { headers: { authorization: `Bearer ${token}` } });
  assert.equal(res.status, 200);
  await res.text();
  // A second start reuses the same token.
  await d.stop();
  const again = await startDaemon({ token: null, stateDir: d.stateDir });
  const res2 = await fetch(`${again.url}/whoami`, { headers: { authorization: `Bearer ${token}` } });
  assert.equal(res2.status, 200);
  await res2.text();
  await again.stop();
  await d.cleanup();
});

test('listen address: `:0` picks a free port on 127.0.0.1; [::1] is accepted', () => {
  const base = { PATH: process.env.PATH, BROWSERD_STATE_DIR: tempDir() };
  assert.deepEqual(loadConfig({ ...base, BROWSERD_LISTEN: ':0' }).listen, { host: '127.0.0.1', port: 0 });
  assert.deepEqual(loadConfig({ ...base, BROWSERD_LISTEN: '[::1]:8080' }).listen, { host: '::1', port: 8080 });
  rmSync(base.BROWSERD_STATE_DIR, { recursive: true, force: true });
});

test('BROWSERD_CHROMIUM_FLAGS splits on spaces and keeps quoted values whole', () => {
  assert.deepEqual(splitFlags('--a --host-resolver-rules="MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"  --b=\'x y\''), [
    '--a',
    '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1',
    '--b=x y',
  ]);
  assert.throws(() => splitFlags('--a="x'), /unterminated/);
});

test('a state dir that cannot be a writable folder: exit 2 naming BROWSERD_STATE_DIR', async () => {
  const dir = tempDir();
  const file = path.join(dir, 'a-file');
  writeFileSync(file, 'not a folder');
  const d = await startDaemon({ env: { BROWSERD_STATE_DIR: file }, waitListening: false });
  assert.equal((await d.waitExit()).code, 2);
  await d.cleanup();
  assert.match(String(d.logs.find((l) => l.level === 60)?.msg), /^BROWSERD_STATE_DIR: cannot use/);
  rmSync(dir, { recursive: true, force: true });
});

test(`an agent dir of ${MAX_STATE_DIR_BYTES} bytes runs Chromium; one byte more: exit 2 naming BROWSERD_AGENT_DIR and the limit`, async () => {
  // Chromium aborts ("Socket path too long") when $TMPDIR/org.chromium.Chromium.XXXXXX/SingletonSocket
  // does not fit a Unix socket path; its TMPDIR is <agent dir>/tmp. Chromium (the agent user) must reach it.
  const base = realpathSync(agentTempDir('s-'));
  const exact = path.join(base, 'x'.repeat(MAX_STATE_DIR_BYTES - base.length - 1));
  assert.equal(Buffer.byteLength(exact), MAX_STATE_DIR_BYTES);
  const ok = await startDaemon({ env: { BROWSERD_AGENT_DIR: exact }, autostart: true });
  try {
    await waitBrowser(ok, (b) => b.state === 'ready');
  } finally {
    await ok.cleanup();
  }
  const tooLong = await startDaemon({ env: { BROWSERD_AGENT_DIR: `${exact}y` }, waitListening: false });
  assert.equal((await tooLong.waitExit()).code, 2);
  await tooLong.cleanup();
  assert.match(String(tooLong.logs.find((l) => l.level === 60)?.msg), new RegExp(`^BROWSERD_AGENT_DIR: .* is ${MAX_STATE_DIR_BYTES + 1} bytes long; at most ${MAX_STATE_DIR_BYTES}`));
});

test('a state dir behind a symlink is used by its real path (extension ids derive from it)', () => {
  const dir = tempDir();
  mkdirSync(path.join(dir, 'real'));
  symlinkSync(path.join(dir, 'real'), path.join(dir, 'link'));
  const config = loadConfig({ PATH: process.env.PATH, BROWSERD_STATE_DIR: path.join(dir, 'link') });
  assert.equal(config.stateDir, path.join(realpathSync(dir), 'real'));
  rmSync(dir, { recursive: true, force: true });
});
