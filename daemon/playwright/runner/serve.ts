// How a runner process of the daemon (the Playwright runner, the REPL worker) lives: messages from the
// daemon, one JSON line each on stdin; stdin's end is the daemon's word to exit; the kernel's
// out-of-memory killer picks the runner first, never the daemon or Chromium; and the orphan watchdog
// ends it if the daemon is gone. One place for both programs.
import { writeFileSync } from 'node:fs';
import type { ToRunner } from '../protocol.js';
import { startOrphanWatchdog } from './watchdog.js';

export function serveRunner(onMessage: (msg: ToRunner) => void): void {
  let pending = '';
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (chunk: string) => {
    pending += chunk;
    let nl: number;
    while ((nl = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      onMessage(JSON.parse(line) as ToRunner);
    }
  });
  process.stdin.on('end', () => process.exit(0));
  process.stdin.on('error', () => process.exit(0));
  try {
    writeFileSync('/proc/self/oom_score_adj', '1000');
  } catch {
    // not Linux, or /proc is not mounted: the heap limit alone stays
  }
  startOrphanWatchdog();
}
