// `npm run bench [name…] [--write]`: runs every benchmark (or those named), prints the table of
// medians and ratios, and — for a full run, or with --write — writes it with the machine's
// description to bench/RESULTS.md. Every process a benchmark starts is ended, even on Ctrl-C.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { benchActivationRestart, benchActivationLive } from './activation.js';
import { benchComputer } from './computer.js';
import { benchDaemonCost } from './daemon-cost.js';
import { benchForwarder } from './forwarder.js';
import { benchFs } from './fs.js';
import { guard, interrupt, progress, repoRoot, runCleanups, type Row } from './lib.js';
import { benchPlaywright } from './playwright.js';
import { benchProxyCheck } from './proxy-check.js';
import { benchPty } from './pty.js';
import { describeMachine, markdown, table } from './report.js';
import { benchRestart } from './restart.js';
import { benchStdin } from './stdin.js';
import { benchUnzip } from './unzip.js';

const BENCHES: { name: string; what: string; run: () => Promise<Row[]> }[] = [
  { name: 'restart', what: '1. restart to ready vs Chromium by hand', run: benchRestart },
  { name: 'live', what: '2. live extension activation vs Extensions.loadUnpacked', run: benchActivationLive },
  { name: 'activation', what: '3. restart and policy activation, end to end', run: benchActivationRestart },
  { name: 'stdin', what: '4. stdin requests/s and MB/s vs a bare node:http server and cat', run: benchStdin },
  { name: 'unzip', what: '5. unzip of a 20 MiB, 2,000-file archive vs Info-ZIP unzip', run: benchUnzip },
  { name: 'proxy', what: '6. proxy check through tinyproxy vs curl -x', run: benchProxyCheck },
  { name: 'daemon', what: "7. the daemon's start time and idle RSS vs a bare node server", run: benchDaemonCost },
  { name: 'forwarder', what: "8. the browser's forwarding proxy → tinyproxy vs straight to tinyproxy", run: benchForwarder },
  { name: 'computer', what: '8. screenshot and click through the computer API vs bare CDP on a port', run: benchComputer },
  { name: 'playwright', what: '8. Playwright execute: `return 1`, and page.goto vs an already-connected playwright-core', run: benchPlaywright },
  { name: 'pty', what: '8. terminal keystroke round trip through attach vs bare node-pty', run: benchPty },
  { name: 'fs', what: '8. files API: 1 GiB read/write vs cat/cp, download_dir_zip of 2,000 files vs zip -r', run: benchFs },
];

function usage(): string {
  return ['usage: npm run bench [--] [name…] [--write]', ...BENCHES.map((b) => `  ${b.name.padEnd(11)} ${b.what}`), '  --write     write bench/RESULTS.md also for a partial run'].join('\n');
}

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(`${usage()}\n`);
    return 0;
  }
  const write = args.includes('--write');
  const names = args.filter((a) => a !== '--write');
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
  if (names.length === 0 || write) {
    const file = path.join(repoRoot, 'bench', 'RESULTS.md');
    writeFileSync(file, markdown(rows, machine, chosen.map((b) => b.name), seconds));
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
