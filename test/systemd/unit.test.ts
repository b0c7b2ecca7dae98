// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The shipped unit and its companions: `systemd-analyze verify` is silent, the hardening keeps its
// measured exposure, the stop timeout stays above the daemon's own shutdown deadline, the env
// example lists every setting with its default, install.sh parses. No running systemd needed:
// verify and `security --offline=yes` read the unit file itself (the very file that is shipped,
// not a rewritten copy: its ExecStart binary, /usr/bin/perl, exists on every Debian machine).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { loadConfig } from '../../daemon/core/config.js';
import { repoRoot } from '../kit/daemon.js';

const unitPath = path.join(repoRoot, 'systemd', 'browserd.service');
const unit = readFileSync(unitPath, 'utf8');
/**
 * Highest accepted `systemd-analyze security` exposure: measured 3.1 with systemd 252 (1.9 before the
 * agent user: the capabilities to switch to it, no PrivateUsers=, ProtectProc=default; docs/security.md).
 */
const MAX_EXPOSURE = 3.1;

function directives(section: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  let current = '';
  for (const raw of unit.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const sec = /^\[(\w+)\]$/.exec(line);
    if (sec) {
      current = sec[1] as string;
      continue;
    }
    if (current !== section) continue;
    const eq = line.indexOf('=');
    const key = line.slice(0, eq);
    out.set(key, [...(out.get(key) ?? []), line.slice(eq + 1)]);
  }
  return out;
}

function seconds(v: string | undefined): number {
  const m = /^(\d+)s$/.exec(v ?? '');
  assert.ok(m, `expected a value like 30s, got ${v}`);
  return Number(m[1]);
}

test('systemd-analyze verify prints nothing for the shipped unit', () => {
  const res = spawnSync('systemd-analyze', ['verify', unitPath], { encoding: 'utf8' });
  assert.equal(res.error, undefined, 'systemd-analyze is installed (Debian package systemd)');
  assert.equal(res.stdout + res.stderr, '');
  assert.equal(res.status, 0);
});

test(`systemd-analyze security --offline=yes: exposure at most ${MAX_EXPOSURE}`, () => {
  const res = spawnSync('systemd-analyze', ['security', '--offline=yes', '--no-pager', unitPath], { encoding: 'utf8' });
  const m = /Overall exposure level for browserd\.service: (\d+\.\d)/.exec(res.stdout);
  assert.ok(m, res.stdout + res.stderr);
  assert.ok(Number(m[1]) <= MAX_EXPOSURE, `exposure ${m[1]}`);
});

test('the unit: Type=notify with NotifyAccess=main, the watchdog, restarts, and stop timeout above the daemon deadline', () => {
  const s = directives('Service');
  const one = (k: string): string | undefined => {
    const v = s.get(k);
    assert.equal(v?.length, 1, `${k} once`);
    return v?.[0];
  };
  assert.equal(one('Type'), 'notify');
  assert.equal(one('NotifyAccess'), 'main');
  // Node runs with V8's young generation capped at 2 x 4 MiB (docs/memory.md: the daemon's RSS under load).
  assert.match(one('ExecStart') ?? '', /^\/usr\/bin\/perl \/opt\/browserd\/systemd\/notify-exec\.pl \/opt\/browserd\/bin\/node --max-semi-space-size=4 \/opt\/browserd\/dist\/daemon\/browserd\.js$/);
  // glibc malloc returns large freed blocks to the kernel: a fixed mmap threshold (docs/memory.md).
  assert.equal(one('Environment'), 'MALLOC_MMAP_THRESHOLD_=65536 MALLOC_TRIM_THRESHOLD_=131072');
  assert.equal(one('Restart'), 'always');
  assert.equal(one('KillMode'), 'mixed');
  assert.equal(one('User'), 'browserd');
  assert.equal(one('StateDirectory'), 'browserd');
  // Exactly the capabilities the two sides need (docs/security.md), kept by the daemon, never by its children.
  const caps = ['CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_FOWNER', 'CAP_KILL', 'CAP_SETGID', 'CAP_SETUID'];
  assert.deepEqual(one('CapabilityBoundingSet')?.split(' ').sort(), caps);
  assert.deepEqual(one('AmbientCapabilities')?.split(' ').sort(), caps);
  assert.equal(one('NoNewPrivileges'), 'yes');
  for (const dir of ['/var/lib/browserd-agent', '/var/lib/browserd-downloads']) assert.ok(s.get('ReadWritePaths')?.join(' ').split(' ').includes(`-${dir}`), dir);
  assert.equal(one('EnvironmentFile'), '-/etc/browserd/env');
  assert.equal(one('RestartPreventExitStatus'), '2');
  assert.ok(seconds(one('WatchdogSec')) >= 10);
  const defaults = loadConfig({ PATH: process.env.PATH });
  const daemonStopS = (defaults.http.shutdownTimeoutMs + defaults.chromium.stopGraceMs) / 1000;
  assert.ok(seconds(one('TimeoutStopSec')) > daemonStopS + 5, `TimeoutStopSec must exceed ${daemonStopS} s with a margin`);
  assert.ok(seconds(one('TimeoutStartSec')) > defaults.chromium.readyTimeoutMs / 1000);
  assert.ok(s.get('ReadWritePaths')?.join(' ').split(' ').some((p) => p.replace(/^-/, '') === defaults.chromium.policyDir));
  // V8's JIT (node and Chromium) needs writable+executable pages.
  assert.ok(!(s.get('MemoryDenyWriteExecute') ?? []).includes('yes'));
});

test('the unit bounds the memory of its cgroup (the daemon, Chromium, commands): MemoryHigh below MemoryMax, both shares of the RAM with room left', () => {
  const s = directives('Service');
  const percent = (k: string): number => {
    const v = s.get(k);
    assert.equal(v?.length, 1, `${k} once`);
    const m = /^(\d+)%$/.exec(v?.[0] ?? '');
    assert.ok(m, `${k} is a share of the RAM, got ${v?.[0]}`);
    return Number(m[1]);
  };
  const high = percent('MemoryHigh');
  const max = percent('MemoryMax');
  assert.ok(high < max, 'throttling starts before the OOM killer');
  assert.ok(max < 100, 'the kernel and the system keep some memory');
  assert.match(unit, /Chromium[\s\S]{0,200}cgroup|cgroup[\s\S]{0,200}Chromium/, 'the comment says Chromium shares the cgroup');
});

test('browserd.env.example names every setting of config.ts, each with its default', () => {
  const example = readFileSync(path.join(repoRoot, 'systemd', 'browserd.env.example'), 'utf8');
  const source = readFileSync(path.join(repoRoot, 'daemon', 'core', 'config.ts'), 'utf8');
  const settings = new Set([...source.matchAll(/'(BROWSERD_[A-Z_]+)'/g)].map((m) => m[1] as string));
  assert.ok(settings.size > 30);
  settings.delete('BROWSERD_TEST_HOOKS'); // the test suite's own, named there as not to be set
  for (const name of settings) {
    assert.match(example, new RegExp(`^#?${name}=`, 'm'), `${name} is missing`);
  }
  // Each commented default loads as a valid setting and equals the daemon's default.
  const env: Record<string, string> = { PATH: process.env.PATH ?? '' };
  for (const m of example.matchAll(/^#(BROWSERD_[A-Z_]+)=(.*)$/gm)) {
    const [, name, value] = m as unknown as [string, string, string];
    if (value !== '' && !['BROWSERD_KEYS_FILE', 'BROWSERD_PROXY_PROVIDERS_FILE'].includes(name)) env[name] = value;
  }
  const withExample = loadConfig(env, repoRoot);
  const defaults = loadConfig({ PATH: process.env.PATH, STATE_DIRECTORY: '/var/lib/browserd' }, repoRoot);
  assert.deepEqual(withExample, defaults);
});

test('install.sh is bash with set -euo pipefail, and parses', () => {
  const file = path.join(repoRoot, 'systemd', 'install.sh');
  assert.match(readFileSync(file, 'utf8'), /^#!\/usr\/bin\/env bash\n[\s\S]*^set -euo pipefail$/m);
  const res = spawnSync('bash', ['-n', file], { encoding: 'utf8' });
  assert.equal(res.status, 0, res.stderr);
  const perl = spawnSync('perl', ['-c', path.join(repoRoot, 'systemd', 'notify-exec.pl')], { encoding: 'utf8' });
  assert.equal(perl.status, 0, perl.stderr);
});
