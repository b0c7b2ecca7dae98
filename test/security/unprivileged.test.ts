// The daemon as systemd/browserd.service runs it: not root, user `browserd` (made by .ci/setup
// --test), holding only the unit's capabilities as ambient ones (setpriv stands in for systemd's
// AmbientCapabilities=). Spawn, as_user, kill and a Chromium launch work; no child keeps a
// capability (a setuid() between two non-root uids keeps the ambient set: setpriv clears it).
import assert from 'node:assert/strict';
import { chownSync, readFileSync, statSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { expectError } from '../helpers/http.js';
import { execProcess, kill, PROC, spawnProcess, waitExited } from '../helpers/processes.js';
import { agentIds } from '../kit/agent.js';
import { tempDir } from '../kit/cleanup.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';
import { waitBrowser } from '../kit/browser.js';

/** The unit's CapabilityBoundingSet= / AmbientCapabilities= (test/systemd/unit.test.ts checks the unit). */
const UNIT_CAPS = '+setuid,+setgid,+kill,+chown,+dac_override,+fowner';
const line = readFileSync('/etc/passwd', 'utf8')
  .split('\n')
  .find((l) => l.startsWith('browserd:'));
if (line === undefined) throw new Error('no user browserd: run .ci/setup --test');
const daemonUid = Number(line.split(':')[2]);
const daemonGid = Number(line.split(':')[3]);
let d: Daemon;

before(async () => {
  const stateDir = tempDir('browserd-unpriv-');
  chownSync(stateDir, daemonUid, daemonGid);
  const policyDir = tempDir('browserd-unpriv-policy-');
  chownSync(policyDir, daemonUid, daemonGid);
  d = await startDaemon({
    stateDir,
    autostart: true,
    env: { BROWSERD_POLICY_DIR: policyDir },
    wrapper: ['setpriv', '--reuid=browserd', '--regid=browserd', '--init-groups', `--inh-caps=${UNIT_CAPS}`, `--ambient-caps=${UNIT_CAPS}`],
  });
});
after(() => d.cleanup());

const text = (s: string): string => Buffer.from(s, 'base64').toString();
const CAPS = 'grep -E "^Cap(Prm|Eff|Amb)" /proc/self/status';

test('the daemon runs as browserd with the ambient capabilities, non-dumpable', () => {
  const status = readFileSync(`/proc/${d.pid}/status`, 'utf8');
  assert.equal(Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]), daemonUid);
  assert.notEqual(/^CapAmb:\s+([0-9a-f]+)/m.exec(status)?.[1], '0000000000000000');
  assert.equal(statSync(`/proc/${d.pid}/environ`).uid, 0, 'a non-dumpable process\'s /proc files are root\'s');
});

test('spawn runs as the agent user, as_user as that user, neither with a capability; root needs processes:root', async () => {
  const agent = await execProcess(d, { command: 'sh', args: ['-c', `id -u; ${CAPS}`] });
  const [uid, ...caps] = text(agent.stdout_b64).trim().split('\n');
  assert.equal(Number(uid), agentIds().uid);
  assert.equal(caps.length, 3);
  for (const c of caps) assert.match(c, /:\s+0{16}$/, c);
  const nobody = await execProcess(d, { command: 'sh', args: ['-c', `id -un; ${CAPS}`], as_user: 'nobody' });
  const [name, ...nobodyCaps] = text(nobody.stdout_b64).trim().split('\n');
  assert.equal(name, 'nobody');
  for (const c of nobodyCaps) assert.match(c, /:\s+0{16}$/, c);
  // The test token holds processes:root: root works; the daemon's own user is privileged too.
  const root = await execProcess(d, { command: 'id', args: ['-u'], as_root: true });
  assert.equal(text(root.stdout_b64), '0\n');
  const own = await execProcess(d, { command: 'id', args: ['-un'], as_user: 'browserd' });
  assert.equal(text(own.stdout_b64), 'browserd\n');
  const terminal = await spawnProcess(d, { command: 'sh', args: ['-c', 'id -u'], allocate_tty: true });
  assert.equal((await waitExited(d, terminal.process_id)).exit_code, 0);
  await expectError(await d.fetch(`${PROC}/exec`, { method: 'POST', json: { command: 'id', as_user: 'no-such-user' } }), 400, 'bad_request');
});

test('kill reaches a process of the agent user (CAP_KILL)', async () => {
  const { process_id } = await spawnProcess(d, { command: 'sleep', args: ['300'] });
  assert.equal((await kill(d, process_id, 'TERM')).status, 200);
  assert.equal((await waitExited(d, process_id)).signal, 'SIGTERM');
});

test("Chromium launches as the agent user, sandboxed", async () => {
  const snap = await waitBrowser(d, (b) => b.state === 'ready');
  const pid = snap.chromium.pid as number;
  assert.equal(Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]), agentIds().uid);
  assert.ok(!readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes('--no-sandbox'));
  assert.match(readFileSync(`/proc/${pid}/status`, 'utf8'), /^CapEff:\s+0{16}$/m);
  const v = await d.fetch('/browsers/local/cdp/json/version');
  assert.equal(v.status, 200);
});
