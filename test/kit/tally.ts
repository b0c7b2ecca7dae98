// What the kit counts for the test runner (test/run.mjs): when BROWSERD_TEST_TALLY names a file, one
// JSON line per daemon started (ms to `listening`), Chromium launch (any binary the daemon runs as its
// Chromium), Chromium the daemon reported ready (its own ms to ready) and daemon stop (ms from SIGTERM
// to exit); and at the process's exit, the CPU time of it and of its children it waited for (the
// daemons, and through them their Chromium and children: /proc/self/stat's utime, stime, cutime and
// cstime). The runner sums them per test file, to show
// where the suite's time goes. Without the variable (benchmarks, a file run by hand) nothing is written.
import { appendFileSync, readFileSync } from 'node:fs';

export type TallyKind = 'daemon' | 'launch' | 'chromium' | 'stop' | 'cpu';

const file = process.env.BROWSERD_TEST_TALLY;

export function tally(kind: TallyKind, ms: number): void {
  if (file === undefined || file === '') return;
  appendFileSync(file, `${JSON.stringify({ kind, ms: Math.round(ms) })}\n`);
}

/** Clock ticks per second of /proc/<pid>/stat's times (USER_HZ: 100 on Linux). */
const TICKS_PER_SECOND = 100;

if (file !== undefined && file !== '') {
  process.on('exit', () => {
    // The fields after the command's closing parenthesis: state is the 1st, utime the 12th … cstime the 15th.
    const stat = readFileSync('/proc/self/stat', 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = fields.slice(11, 15).reduce((a, f) => a + Number(f), 0);
    tally('cpu', (ticks * 1000) / TICKS_PER_SECOND);
  });
}
