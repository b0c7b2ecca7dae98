// Chromium's flags through every route that takes them, with a key that holds only browser:configure
// and browser:read (no process:exec): every switch that launches a process, loads code, writes a file
// or takes over what the daemon owns is refused with 400 bad_request naming it, and nothing runs.
//
// The switches, from Chromium's own switch lists (https://source.chromium.org/chromium/chromium/src/+/main:):
//   content/public/common/content_switches.cc: kRendererCmdPrefix, kUtilityCmdPrefix, kGpuLauncher,
//     kBrowserSubprocessPath, kPpapiPluginLauncher, kZygoteCmdPrefix, kRegisterPepperPlugins,
//     kEnableLogging (with kLogFile from base/base_switches.cc), kNoSandbox, kDisableSetuidSandbox,
//     kSingleProcess, kNoZygote, kInProcessGPU, kRemoteDebuggingPort, kRemoteDebuggingPipe,
//     kRemoteAllowOrigins, kJavaScriptFlags (--js-flags=--logfile), kUseFileForFakeVideoCapture,
//     kUseFileForFakeAudioCapture, kUserDataDir (also chrome_switches.cc);
//   chrome/common/chrome_switches.cc: kRemoteDebuggingAddress, kDiskCacheDir, kCustomDevtoolsFrontend,
//     kApp, kProxyServer, kProxyBypassList, kNoProxyServer, kProxyPacUrl, kLogNetLog;
//   extensions/common/switches.cc: kLoadExtension, kDisableExtensionsExcept;
//   services/network/public/cpp/network_switches.cc: kHostResolverRules, kHostRules, kSSLKeyLogFile;
//   the old plugin switches (content_switches.cc before their removal): kPluginLauncher.
// The same list is in docs/security.md.
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { SETTINGS_FILE } from '../../daemon/chromium/settings/store.js';
import { expectError } from '../helpers/http.js';
import { browser, waitBrowser } from '../kit/browser.js';
import { tempDir } from '../kit/cleanup.js';
import { keysFile, startDaemon, type Daemon } from '../kit/daemon.js';

const CONFIGURE = 'configure-read-only-0123456789';
const stateDir = tempDir('browserd-flagallow-');
const dir = tempDir('browserd-flagallow-x-');
const marker = path.join(dir, 'ran');
const script = path.join(dir, 'run.sh');
const extDir = path.join(dir, 'ext');
let d: Daemon;

/** Every switch that launches a process, loads code, writes a file or takes over what the daemon owns. */
const HOSTILE: readonly string[] = [
  `--renderer-cmd-prefix=/bin/sh -c 'touch ${marker}'`,
  `--renderer-cmd-prefix=${script}`,
  `--utility-cmd-prefix=${script}`,
  `--gpu-launcher=${script}`,
  `--browser-subprocess-path=${script}`,
  `--ppapi-plugin-launcher=${script}`,
  `--plugin-launcher=${script}`,
  `--zygote-cmd-prefix=${script}`,
  `--register-pepper-plugins=${script};application/x-browserd`,
  `--load-extension=${extDir}`,
  `--disable-extensions-except=${extDir}`,
  `--user-data-dir=${dir}`,
  '--remote-debugging-port=9222',
  '--remote-debugging-address=0.0.0.0',
  '--remote-debugging-pipe',
  '--remote-allow-origins=*',
  `--enable-logging=${marker}`,
  '--enable-logging=stderr',
  `--log-file=${marker}`,
  `--log-net-log=${marker}`,
  `--ssl-key-log-file=${marker}`,
  `--js-flags=--prof --logfile=${marker}`,
  `--use-file-for-fake-video-capture=${marker}`,
  `--use-file-for-fake-audio-capture=${marker}`,
  `--disk-cache-dir=${dir}`,
  `--custom-devtools-frontend=file://${dir}/`,
  `--app=file://${dir}/x.html`,
  '--no-sandbox',
  '--disable-setuid-sandbox',
  '--single-process',
  '--no-zygote',
  '--in-process-gpu',
  '--proxy-server=http://127.0.0.1:9',
  '--proxy-bypass-list=*',
  '--no-proxy-server',
  '--proxy-pac-url=data:,x',
  '--host-resolver-rules=MAP * 127.0.0.1',
  '--host-rules=MAP * 127.0.0.1',
  // A name the allowlist has, with a value outside its grammar.
  `--user-agent=x\u0007${marker}`,
  `--lang=de --renderer-cmd-prefix=${script}`,
];
const nameOf = (flag: string): string => flag.split('=')[0] as string;

before(async () => {
  mkdirSync(extDir, { recursive: true });
  writeFileSync(path.join(extDir, 'manifest.json'), JSON.stringify({ manifest_version: 3, name: 'planted', version: '1.0', background: { service_worker: 'sw.js' } }));
  writeFileSync(path.join(extDir, 'sw.js'), '');
  writeFileSync(script, `#!/bin/sh\ntouch '${marker}'\nexec "$@"\n`);
  chmodSync(script, 0o755);
  chmodSync(dir, 0o777); // the agent user may write here (the case of the issue)
  // A settings file kept by an older daemon that accepted any flag: the launch drops them.
  writeFileSync(path.join(stateDir, SETTINGS_FILE), JSON.stringify({ version: 1, viewport: null, policies: {}, flags: [`--renderer-cmd-prefix=${script}`, `--load-extension=${extDir}`, '--lang=de'] }));
  d = await startDaemon({
    autostart: true,
    stateDir,
    bearer: CONFIGURE,
    env: { BROWSERD_KEYS_FILE: keysFile([{ id: 'c', token: CONFIGURE, scopes: ['browser:configure', 'browser:read'] }]) },
  });
  await waitBrowser(d, (s) => s.state === 'ready');
});
after(async () => {
  await d.cleanup();
});

const cmdline = (pid: number): string[] => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
/** The first launch's command line: the daemon's own flags (--remote-debugging-pipe, its --no-sandbox in a test VM) are in it. */
let daemonArgs: string[] = [];

test('a flag kept from before the allowlist is not passed to Chromium', async () => {
  const pid = (await browser(d)).chromium.pid as number;
  const args = cmdline(pid);
  daemonArgs = args;
  assert.ok(args.includes('--lang=de'), 'the allowed one is passed');
  assert.ok(!args.some((a) => a.startsWith('--renderer-cmd-prefix')), args.join(' '));
  assert.ok(args.filter((a) => a.startsWith('--load-extension')).every((a) => !a.includes(extDir)));
  assert.ok(d.logs.some((l) => l.event === 'browser_flags_dropped'));
});

test('every switch that runs a command or loads code: 400 bad_request naming it, through PATCH flags and configure', async () => {
  const pid = (await browser(d)).chromium.pid;
  for (const flag of HOSTILE) {
    const viaPatch = await expectError(await d.fetch('/browsers/local/chromium/flags', { method: 'PATCH', json: { flags: [flag] } }), 400, 'bad_request');
    assert.match(String(viaPatch.message), new RegExp(`^flags\\[0\\]: ${nameOf(flag)} `), flag);
    const viaConfigure = await expectError(await d.fetch('/browsers/local/configure', { method: 'POST', json: { flags: ['--lang=fr', flag] } }), 400, 'bad_request');
    assert.match(String(viaConfigure.message), new RegExp(`^flags\\[1\\]: ${nameOf(flag)} `), flag);
  }
  // All at once: each is named.
  const all = await expectError(await d.fetch('/browsers/local/chromium/flags', { method: 'PATCH', json: { flags: HOSTILE } }), 400, 'bad_request');
  assert.equal((all.details as unknown[]).length, HOSTILE.length);
  assert.equal((await browser(d)).chromium.pid, pid, 'no restart');
});

test('nothing ran: after a restart with an allowed flag, Chromium has none of them and the marker never appears', async () => {
  const res = await d.fetch('/browsers/local/chromium/flags', { method: 'PATCH', json: { flags: ['--lang=fr', '--force-dark-mode'] } });
  assert.equal(res.status, 200);
  const answer = (await res.json()) as { flags: string[]; chromium: { restarted: boolean; pid: number } };
  assert.deepEqual(answer.flags, ['--lang=fr', '--force-dark-mode'], 'the stored hostile flags are gone from the set once it is written');
  assert.equal(answer.chromium.restarted, true);
  const args = cmdline(answer.chromium.pid);
  for (const flag of HOSTILE.filter((f) => !daemonArgs.includes(f))) assert.ok(!args.includes(flag), flag);
  assert.ok(!args.some((a) => a.includes(script) || a.includes(marker)));
  assert.equal(existsSync(marker), false, 'no command ran');
});

test('policies: a name outside the table is refused, __proto__ included (it was 200 with nothing done)', async () => {
  const patch = (text: string): Promise<Response> =>
    d.fetch('/browsers/local/chromium/policies', { method: 'PATCH', body: text, headers: { 'content-type': 'application/json' } });
  const proto = await expectError(await patch('{"policies": {"__proto__": {"URLBlocklist": ["*"]}}}'), 400, 'bad_request');
  assert.match(String(proto.message), /__proto__/);
  await expectError(await patch('{"policies": {"\\u005f_proto__": {"URLBlocklist": ["*"]}}}'), 400, 'bad_request');
  await expectError(await patch('{"policies": {"constructor": true, "toString": "x"}}'), 400, 'bad_request');
  await expectError(await d.fetch('/browsers/local/configure', { method: 'POST', body: '{"policies": {"__proto__": {}}}', headers: { 'content-type': 'application/json' } }), 400, 'bad_request');
  assert.deepEqual((await d.call<{ policies: unknown }>('/browsers/local/chromium/policies')).policies, {});
});
