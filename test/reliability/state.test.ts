// What the daemon owns, held and left clean, through the real daemon: one daemon per state dir (a
// second exits at once naming the holder, touching nothing; kill -9 leaves no stale lock), the
// temps of unfinished store writes removed at start, Chromium's TMPDIR in the state dir and
// emptied after a stop, DevTools on no TCP port at all, and the smaller holes: invalid UTF-8 in
// JSON, /metrics to a key of another project, a manifest with comments, an entry name longer than
// the file system takes (named as such, no internal path in the message).
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { indexed, upload } from '../helpers/extensions.js';
import { expectError } from '../helpers/http.js';
import { buildZip } from '../helpers/zip.js';
import { waitBrowser } from '../kit/browser.js';
import { scratchDirs, tempDir } from '../kit/cleanup.js';
import { agentDirOf, startDaemon, type Daemon } from '../kit/daemon.js';
import { processesNaming } from '../kit/procs.js';

const stateDir = tempDir();
const scratch = scratchDirs('browserd-reliability-');
let d: Daemon;

before(async () => {
  // A temp of an atomic write a killed daemon left (extensions/installed.json, proxies.json) must be gone after the start.
  mkdirSync(path.join(stateDir, 'extensions'), { recursive: true });
  writeFileSync(path.join(stateDir, 'extensions', '.installed.json.0b0e4e0e-8a4b-4a8e-9d8e-2f4b5e6a7c8d.tmp'), '{"half":');
  writeFileSync(path.join(stateDir, '.proxies.json.5f1c2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f.tmp'), '{"half":');
  d = await startDaemon({ autostart: true, stateDir });
  await waitBrowser(d, (s) => s.state === 'ready', 'ready');
});
after(async () => {
  await d.cleanup();
  rmSync(stateDir, { recursive: true, force: true });
});

test('the temps of unfinished store writes are removed at start', () => {
  assert.deepEqual(readdirSync(path.join(stateDir, 'extensions')).filter((n) => n.endsWith('.tmp')), []);
  assert.deepEqual(readdirSync(stateDir).filter((n) => n.endsWith('.tmp')), []);
  assert.equal(d.logs.filter((l) => l.event === 'store_temp_removed').length, 2);
});

test('a second daemon on the same state dir exits at once naming the holder, and touches nothing', async () => {
  const created = await d.fetch('/proxies', { method: 'POST', json: { type: 'custom', protocol: 'http', config: { host: '127.0.0.1', port: 9 } } });
  assert.equal(created.status, 201);
  const proxy = (await created.json()) as { id: string };
  const before = (await (await d.fetch('/browsers/local')).json()) as { chromium: { pid: number } };
  const second = await startDaemon({ autostart: true, stateDir, waitListening: false });
  const exit = await second.waitExit();
  assert.equal(exit.code, 1, 'restartable: the holder may be a previous instance still stopping');
  const line = second.logs.find((l) => l.event === 'state_dir_locked');
  assert.ok(line, JSON.stringify(second.logs));
  assert.equal(line.holder_pid, d.pid);
  assert.equal(second.logs.filter((l) => l.event === 'listening' || l.event === 'chromium_launched' || l.event === 'chromium_leftover').length, 0);
  const after = (await (await d.fetch('/browsers/local')).json()) as { state: string; chromium: { pid: number } };
  assert.equal(after.state, 'ready');
  assert.equal(after.chromium.pid, before.chromium.pid, 'the first daemon\'s Chromium was not touched');
  assert.equal((await d.fetch(`/proxies/${proxy.id}`)).status, 200, 'the acknowledged proxy is still there');
});

test('DevTools listens on no TCP port: no listening socket belongs to a Chromium process', async () => {
  const chromium = processesNaming(path.join(agentDirOf(stateDir), 'chromium-profile'));
  assert.ok(chromium.length >= 3);
  const inodes = new Set<string>();
  for (const pid of chromium) {
    try {
      for (const fd of readdirSync(`/proc/${pid}/fd`)) {
        const m = /^socket:\[(\d+)\]$/.exec(readlinkOr(`/proc/${pid}/fd/${fd}`));
        if (m) inodes.add(m[1] as string);
      }
    } catch {
      // gone meanwhile
    }
  }
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f[3] === '0A' /* LISTEN */) assert.ok(!inodes.has(f[9] as string), `Chromium listens on ${f[1]}`);
    }
  }
  // And CDP still works, through the daemon only.
  const v = await d.fetch('/browsers/local/cdp/json/version');
  assert.equal(v.status, 200);
  assert.match(((await v.json()) as { Browser: string }).Browser, /Chrome\//);
});

test("Chromium's TMPDIR is in the agent dir, and emptied once it stops", async () => {
  const pid = ((await (await d.fetch('/browsers/local')).json()) as { chromium: { pid: number } }).chromium.pid;
  const env = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
  const tmp = path.join(agentDirOf(stateDir), 'tmp');
  assert.ok(env.includes(`TMPDIR=${tmp}`), env.filter((e) => e.startsWith('TMP')).join());
  writeFileSync(path.join(tmp, 'org.chromium.Chromium.test'), 'x'); // as Chromium leaves them
  assert.equal((await d.fetch('/browsers/local/restart', { method: 'POST' })).status, 200);
  assert.ok(!existsSync(path.join(tmp, 'org.chromium.Chromium.test')), 'emptied after the stop');
});

test('invalid UTF-8 in a JSON body is 400, never replaced with U+FFFD', async () => {
  const body = Buffer.concat([Buffer.from('{"command":"echo","args":["a'), Buffer.from([0xff, 0xfe]), Buffer.from('"]}')]);
  const res = await d.fetch('/browsers/local/process/exec', { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  const err = await expectError(res, 400, 'invalid_request');
  assert.match(String(err.message), /not valid UTF-8 \(at or before byte 28\)/);
});

test('/metrics: a key of another project gets 404, like every other route of this browser', async () => {
  const other = await startDaemon({
    env: {
      BROWSERD_PROJECT_ID: 'proj-a',
      BROWSERD_KEYS_FILE: keysFile([{ id: 'b', sha256: sha('project-b-token-0123456789'), scopes: ['browser:read'], project: 'proj-b' }, { id: 'a', sha256: sha('project-a-token-0123456789'), scopes: ['browser:read'], project: 'proj-a' }]),
    },
    token: null,
  });
  try {
    await expectError(await other.fetch('/metrics', { headers: { authorization: 'Bearer project-b-token-0123456789' } }), 404, 'not_found');
    await expectError(await other.fetch('/browsers/local', { headers: { authorization: 'Bearer project-b-token-0123456789' } }), 404, 'not_found');
    assert.equal((await other.fetch('/metrics', { headers: { authorization: 'Bearer project-a-token-0123456789' } })).status, 200);
  } finally {
    await other.cleanup();
  }
});

test('a manifest with comments is installed (Chromium accepts them); an entry name past NAME_MAX is named so, without internal paths', async () => {
  const manifest = '// comment\n{ /* block */ "manifest_version": 3, "name": "commented", "version": "1.0" }\n';
  const ok = await upload(d, indexed([['commented', buildZip([{ name: 'manifest.json', data: manifest }])]]));
  assert.equal(ok.status, 200, await ok.clone().text());
  assert.equal(((await ok.json()) as { extensions: { activation: string }[] }).extensions[0]?.activation, 'live');
  const long = await upload(d, indexed([['long', buildZip([{ name: 'manifest.json', data: manifest }, { name: `${'a'.repeat(300)}.js`, data: 'x' }])]]));
  const err = await expectError(long, 422, 'extension_rejected');
  assert.equal((err.inner_error as { code: string }).code, 'bad_entry_name');
  assert.match(String(err.message), /path segment of 303 bytes; at most 255/);
  assert.ok(!JSON.stringify(err).includes(stateDir), 'no internal path');
  assert.ok(JSON.stringify(err).length < 1000, `a short message: ${JSON.stringify(err)}`);
});

function readlinkOr(p: string): string {
  try {
    return readlinkSync(p);
  } catch {
    return '';
  }
}

function sha(t: string): string {
  return createHash('sha256').update(t).digest('hex');
}

function keysFile(keys: unknown[]): string {
  const f = path.join(scratch(), 'keys.json');
  writeFileSync(f, JSON.stringify(keys));
  return f;
}

