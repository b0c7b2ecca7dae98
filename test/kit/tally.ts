// What the kit counts for the test runner (test/run.mjs): when BROWSERD_TEST_TALLY names a file, one
// JSON line per daemon started (ms to `listening`), Chromium launch (any binary the daemon runs as its
// Chromium), Chromium the daemon reported ready (its own ms to ready) and daemon stop (ms from SIGTERM
// to exit). The runner sums them per test file, to show
// where the suite's time goes. Without the variable (benchmarks, a file run by hand) nothing is written.
import { appendFileSync } from 'node:fs';

export type TallyKind = 'daemon' | 'launch' | 'chromium' | 'stop';

const file = process.env.BROWSERD_TEST_TALLY;

export function tally(kind: TallyKind, ms: number): void {
  if (file === undefined || file === '') return;
  appendFileSync(file, `${JSON.stringify({ kind, ms: Math.round(ms) })}\n`);
}
