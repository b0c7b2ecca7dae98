// Waiting for a state rather than for a time: one polling helper (until), a bounded wait on a
// promise (within), a child's exit, and a file once it is written.
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Polls `check` (every `everyMs`) until it returns something other than undefined or false, and
 * resolves with that; throws after `timeoutMs` naming `what` (a function: read at that moment).
 */
export async function until<T>(
  what: string | (() => string),
  check: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 30_000,
  everyMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${typeof what === 'string' ? what : what()}`);
    await sleep(everyMs);
  }
}

/** true when `p` settled within `ms`, false when the time ran out first (the timer never outlives the wait). */
export async function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([p.then(() => true, () => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Resolves with the child's exit (at once when it already exited). */
export function exitOf(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
}

/** Reads a file once it exists and `ready` says its content is complete. */
export function waitFile(file: string, ready: (text: string) => boolean = (t) => t.endsWith('\n'), timeoutMs = 15_000): Promise<string> {
  return until(`${file} to be written`, () => {
    try {
      const text = readFileSync(file, 'utf8');
      return ready(text) ? text : undefined;
    } catch {
      return undefined;
    }
  }, timeoutMs);
}
