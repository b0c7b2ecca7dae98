// BROWSERD_TEST_HOOKS of the test build (dist/daemon/browserd-test.js): scripts/bundle.mjs puts this
// module where the daemon imports daemon/core/test-hooks.ts, whose build refuses the setting.
// `name` or `name=value`, comma separated:
//   resolve=<host>:<addr>[/<addr>...][;<host>:...]  those host names resolve to those addresses at
//                                   once (a test makes a name "public" while every byte stays on loopback)
//   dns=<ip>:<port>                 every other lookup of a url check goes to that DNS server
//   direct-to=<port>                direct url checks go to 127.0.0.1:<port>
//   pty_package=<module>            the module loaded as the terminal implementation
//   fail-live-activation[=<name>]   live activation of <name> fails as if it timed out (the restart path)
//   fail-activation[=<name[@ver]>]  the verification of <name> never succeeds
//   hold-activation[=<name>]        an install of <name> holds the lifecycle lock until <extensions>/release-<name> exists
//   forwarder-uid=<uid>             the forwarding proxy serves that uid, not the agent user's
//   hold-ready=<file>               every launch's last ready hook waits until <file> exists (a test kills
//                                   Chromium inside that window at a known moment)
//   stray-rejection                 once listening: a promise rejected with no handler (the crash policy)
//   uncaught-exception              once listening: an exception thrown outside every handler
// Without `=<subject>`, an extension hook applies to every extension.
import { existsSync } from 'node:fs';
import { readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TestHooks } from '../../daemon/core/test-hooks.js';

/** The hook hold-activation lets go by itself after this long. */
const HOLD_MAX_MS = 120_000;
/** How often the release file is looked for. */
const HOLD_POLL_MS = 50;

export type { TestHooks };

export function parseTestHooks(raw: string | undefined): TestHooks {
  const hooks = new Map<string, string>();
  for (const item of (raw ?? '').split(',').filter(Boolean)) {
    const eq = item.indexOf('=');
    hooks.set(eq < 0 ? item : item.slice(0, eq), eq < 0 ? '' : item.slice(eq + 1));
  }
  const applies = (name: string, subjects: string[]): boolean => {
    const v = hooks.get(name);
    return v !== undefined && (v === '' || subjects.includes(v));
  };
  const resolveTable = new Map<string, string[]>();
  for (const entry of (hooks.get('resolve') ?? '').split(';').filter(Boolean)) {
    const colon = entry.indexOf(':');
    if (colon <= 0) continue;
    resolveTable.set(entry.slice(0, colon).toLowerCase(), entry.slice(colon + 1).split('/').filter(Boolean));
  }
  const dns = hooks.get('dns');
  const directTo = hooks.get('direct-to');
  return {
    names: [...hooks.keys()],
    resolveTable,
    dnsServer: dns === '' ? undefined : dns,
    directToPort: directTo !== undefined && /^\d{1,5}$/.test(directTo) ? Number(directTo) : undefined,
    ptyPackage: hooks.get('pty_package'),
    failLiveActivation: (name) => applies('fail-live-activation', [name]),
    failActivation: (...subjects) => applies('fail-activation', subjects),
    async holdActivation(extensionsDir, names, log) {
      const held = names.find((n) => applies('hold-activation', [n]));
      if (held === undefined) return;
      const file = path.join(extensionsDir, `release-${held}`);
      log.info({ event: 'extension_activation_held', name: held, release_file: file }, 'held by the test hook hold-activation');
      const until = Date.now() + HOLD_MAX_MS;
      while (!(await readdir(extensionsDir)).includes(path.basename(file)) && Date.now() < until) await sleep(HOLD_POLL_MS);
      await rm(file, { force: true });
    },
    forwarderUid: /^\d+$/.test(hooks.get('forwarder-uid') ?? '') ? Number(hooks.get('forwarder-uid')) : undefined,
    holdReady: hooks.get('hold-ready')
      ? async (pid, log) => {
          const file = hooks.get('hold-ready') as string;
          log.info({ event: 'chromium_ready_held', chromium_pid: pid, release_file: file }, 'ready hooks held by the test hook hold-ready');
          const until = Date.now() + HOLD_MAX_MS;
          while (!existsSync(file) && Date.now() < until) await sleep(HOLD_POLL_MS);
        }
      : undefined,
    // Not a hook one sets: the test build checks every JSON answer against its route's document.
    checkAnswers: true,
    afterListening() {
      if (hooks.has('stray-rejection')) void Promise.reject(new Error('a stray rejection (test hook stray-rejection)'));
      if (hooks.has('uncaught-exception')) {
        setImmediate(() => {
          throw new Error('an uncaught exception (test hook uncaught-exception)');
        });
      }
    },
  };
}
