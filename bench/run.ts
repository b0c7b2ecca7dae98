// `npm run bench [name…] [--write]`: runs every benchmark (or those named), prints the table of
// medians and ratios, and — for a full run, or with --write — writes it with the machine's
// description to bench/RESULTS.md. Every process a benchmark starts is ended, even on Ctrl-C.
// `npm run bench -- --quick name…` (or BROWSERD_BENCH_QUICK=1) is a smoke run: the cases that take
// their sample counts from lib.ts's samples() (first-screenshot, tools, webdriver, computer, configure,
// curl, unzip, telemetry, replay, fs) take two or so, the others their full counts; a quick run never
// writes RESULTS.md. To smoke one case without the tsc build:
// `node scripts/transpile.mjs && node scripts/bundle.mjs && node dist/bench/run.js --quick NAME`.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { interrupt, runCleanups } from '../test/kit/cleanup.js';
import { repoRoot } from '../test/kit/daemon.js';
import { activationBench, liveBench } from './cases/activation.js';
import { cdpBench } from './cases/cdp.js';
import { curlBench } from './cases/curl.js';
import { computerBench } from './cases/computer.js';
import { configureBench } from './cases/configure.js';
import { liveViewBench } from './cases/live-view.js';
import { daemonBench } from './cases/daemon-cost.js';
import { forwarderChromiumBench } from './cases/forwarder-chromium.js';
import { forwarderBench } from './cases/forwarder.js';
import { firstScreenshotBench } from './cases/first-screenshot.js';
import { fsBench } from './cases/fs.js';
import { jwtBench } from './cases/jwt.js';
import { QUICK, guard, progress, type Bench, type Row } from './lib.js';
import { playwrightBench } from './cases/playwright.js';
import { toolsBench } from './cases/tools.js';
import { proxyBench } from './cases/proxy-check.js';
import { ptyBench } from './cases/pty.js';
import { describeMachine, markdown, table } from './report.js';
import { replayBench } from './cases/replay.js';
import { restartBench } from './cases/restart.js';
import { stdinBench } from './cases/stdin.js';
import { telemetryBench } from './cases/telemetry.js';
import { unzipBench } from './cases/unzip.js';
import { profilesBench } from './cases/profiles.js';
import { webdriverBench } from './cases/webdriver.js';

const BENCHES: Bench[] = [
  restartBench, liveBench, activationBench, stdinBench, unzipBench, proxyBench,
  daemonBench, forwarderBench, forwarderChromiumBench, computerBench, playwrightBench, toolsBench, ptyBench, fsBench, cdpBench, curlBench, replayBench, telemetryBench, liveViewBench, profilesBench, jwtBench, webdriverBench, firstScreenshotBench, configureBench,
];

function usage(): string {
  return [
    'usage: npm run bench [--] [name…] [--write] [--quick]',
    ...BENCHES.map((b) => `  ${b.name.padEnd(18)} ${b.what}`),
    '  --write            write bench/RESULTS.md also for a partial run',
    '  --quick            a smoke run: few samples where a case allows it, nothing written',
  ].join('\n');
}

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(`${usage()}\n`);
    return 0;
  }
  const write = args.includes('--write');
  const names = args.filter((a) => a !== '--write' && a !== '--quick');
  const unknown = names.filter((n) => !BENCHES.some((b) => b.name === n));
  if (unknown.length > 0) {
    process.stderr.write(`unknown benchmark ${unknown.join(', ')}\n${usage()}\n`);
    return 2;
  }
  const chosen = names.length === 0 ? BENCHES : BENCHES.filter((b) => names.includes(b.name));
  const machine = describeMachine();
  if (machine.chromiumProcesses > 0) progress(`note: ${machine.chromiumProcesses} Chromium processes already run on this machine; figures may be noisy`);
  const t0 = performance.now();
  const rows: Row[] = [];
  for (const b of chosen) {
    progress(`${b.what}`);
    rows.push(...(await guard(b.name, b.run)));
    await runCleanups(); // anything a benchmark left registered
  }
  const seconds = (performance.now() - t0) / 1000; // the benchmarks alone, without the build
  process.stdout.write(`\n${table(rows)}\n\n`);
  if (QUICK) process.stdout.write('a quick run (--quick): few samples, nothing written\n');
  else if (names.length === 0 || write) {
    const file = path.join(repoRoot, 'bench', 'RESULTS.md');
    writeFileSync(file, markdown(rows, machine, chosen.map((b) => b.name), seconds, path.join(repoRoot, 'bench', 'ANALYSIS.md')));
    process.stdout.write(`written to ${path.relative(process.cwd(), file)} (${Math.round(seconds)} s)\n`);
  }
  return 0;
}

let interrupted = false;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    if (interrupted) process.exit(130);
    interrupted = true;
    interrupt();
    progress(`${sig}: ending every process the benchmarks started`);
    void runCleanups().finally(() => process.exit(130));
  });
}

try {
  process.exitCode = await main();
} finally {
  await runCleanups();
}
