// BROWSERD_TEST_HOOKS of the extensions module (for the test suite only): `name` (every subject)
// or `name=<subject>` (e.g. `my-ext` or `my-ext@2.0`).
//   fail-live-activation=<name>   live activation of <name> fails as if it timed out (the restart path)
//   fail-activation=<name[@ver]>  the verification of <name> never succeeds
//   hold-activation=<name>        an install of <name> holds the lifecycle lock until <extensions>/release-<name> exists
import { readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Config } from '../core/config.js';
import type { Logger } from '../core/log.js';

/** The test hook hold-activation lets go by itself after this long. */
const HOLD_MAX_MS = 120_000;

export function testHook(config: Config, name: string, ...subjects: string[]): boolean {
  const v = config.testHooks.get(name);
  return v !== undefined && (v === '' || subjects.includes(v));
}

/** Test hook `hold-activation=<name>`: holds the lock until <extensions>/release-<name> exists. */
export async function holdForTests(config: Config, extensionsDir: string, names: string[], log: Logger): Promise<void> {
  const held = names.find((n) => testHook(config, 'hold-activation', n));
  if (held === undefined) return;
  const file = path.join(extensionsDir, `release-${held}`);
  log.info({ event: 'extension_activation_held', name: held, release_file: file }, 'held by the test hook hold-activation');
  const until = Date.now() + HOLD_MAX_MS;
  while (!(await readdir(extensionsDir)).includes(path.basename(file)) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
  await rm(file, { force: true });
}
