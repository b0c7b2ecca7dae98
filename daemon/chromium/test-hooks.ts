// BROWSERD_TEST_HOOKS of the Chromium module (for the test suite only):
//   hold-ready=<file>   every launch's last ready hook (main.ts adds it after every other) waits until
//                       <file> exists: a test can act on Chromium inside that window (kill it) at a
//                       known moment.
import { existsSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Config } from '../core/config.js';
import type { Logger } from '../core/log.js';

/** The hold lets go by itself after this long (a test that forgot its file still ends). */
const HOLD_MAX_MS = 120_000;
const POLL_MS = 50;

/** The ready hook of `hold-ready`, or null without it. */
export function holdReadyHook(config: Config, log: Logger): ((cdp: unknown, pid: number) => Promise<void>) | null {
  const file = config.testHooks.get('hold-ready');
  if (file === undefined || file === '') return null;
  return async (_cdp, pid) => {
    log.info({ event: 'chromium_ready_held', chromium_pid: pid, release_file: file }, 'ready hooks held by the test hook hold-ready');
    const until = Date.now() + HOLD_MAX_MS;
    while (!existsSync(file) && Date.now() < until) await sleep(POLL_MS);
  };
}
