// Runs every test file: the list is read from test/ and its sub-folders, one per family (a glob,
// fs.globSync), mapped to the compiled files (test/fs/units.test.ts →
// dist/test/fs/units.test.js), and each must exist, so no test file can be left out silently.
// `node test/run.mjs fs proxies` runs the files whose path under test/ contains `fs` or `proxies`;
// `--list` prints the chosen files and runs nothing; `--lint` runs eslint beside the tests (it
// waits on the disk and one core while most test files wait on Chromium and their children) and
// fails the run when it fails; `--typecheck` runs `tsc --noEmit` beside them the same way (npm test
// builds with scripts/transpile.mjs, which does not check types); both together are one process,
// scripts/check.mjs, which builds the TypeScript program once for both; `--times` prints every file's timing (below) instead of the slowest ten.
//
// The runner is its own pool: one `node --test` process per file (node's test runner inside it,
// --test-isolation=none: the file runs in that process, no second one). How many at a time: the
// cores' count (at least 2) always; up to twice that while the machine has CPU to spare — most files
// spend much of their time waiting (on Chromium, children, sockets), so as many files as cores leave
// the cores idle a third of the run. A file beyond the cores' count starts only when at least a
// quarter of the machine's CPU was idle over the last half second (/proc/stat, so a busy process
// beside the run counts), and at most one such start per second (a file's own start must show up in
// the next sample before another is let in). BROWSERD_TEST_CONCURRENCY=n runs exactly n at a time.
// A file's output is printed whole when it ends, so that files running side by side do not
// interleave their lines (a run of one file prints it as it comes).
//
// Marks, a `// @<mark>` line in a file's first 15 lines:
//   @serial      touches machine-global state (the managed-policy folder that every Chromium on the
//                machine reads): runs with no other serial file and no file that may start Chromium
//                beside it. The serial files come first, beside the @no-chromium files.
//   @no-chromium starts no Chromium, neither itself nor through its daemons: may run beside a serial
//                file. Checked: a marked file whose daemons launch a Chromium (the kit's tally, below)
//                fails the run.
//   @long        one of the files that take 10 s or more: started before the unmarked ones, the
//                longest of the last run first (its times in node_modules/.cache/browserd-test-times.json;
//                on a fresh clone, in path order), so that none is left running alone at the end.
//
// Where the time goes: every file's wall time, its start and end in the run, and what the kit
// (test/kit/tally.ts, loaded first in every file) counted in it through BROWSERD_TEST_TALLY: its CPU
// time with its children's, daemons started (and their time to `listening`), Chromium launches
// (their time to ready), daemon stops; then the sums, the longest file (no schedule beats it) and
// the sum over the concurrency (nor that).
//
// The run has a temp folder of its own (TMPDIR for every test process, and through them for the
// daemons, Chromium and the clients): whatever is left in it afterwards (browserd-*,
// org.chromium.Chromium.*, puppeteer_dev_profile-*, …) fails the run. Other work on the machine
// (a benchmark, another checkout's tests) writes to /tmp, not there. Its name is short (btr-XXXXXX):
// a state dir's path must leave room for the Unix socket Chromium makes under it (core/state-dir.ts).
import { Buffer } from 'node:buffer';
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, globSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { clearInterval, setInterval } from 'node:timers';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const root = path.dirname(path.dirname(new URL(import.meta.url).pathname));
/** The *.test.ts files under test/, as paths relative to it (`fs/units.test.ts`). */
const sources = globSync('**/*.test.ts', { cwd: path.join(root, 'test'), exclude: (p) => path.basename(p) === 'node_modules' }).sort();
const args = process.argv.slice(2);
const list = args.includes('--list');
const lint = args.includes('--lint');
const typecheck = args.includes('--typecheck');
const allTimes = args.includes('--times');
const only = args.filter((a) => !a.startsWith('--'));
const chosen = sources.filter((f) => only.length === 0 || only.some((o) => f.includes(o)));
if (chosen.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}
if (list) {
  for (const f of chosen) console.log(f);
  console.log(`${chosen.length} files`);
  process.exit(0);
}
/** The kit's tally, loaded first in every test process (so that a file without a daemon reports its CPU too). */
const tallyModule = pathToFileURL(path.join(root, 'dist', 'test', 'kit', 'tally.js')).href;
const compiled = (f) => path.join(root, 'dist', 'test', f.replace(/\.ts$/, '.js'));
for (const f of chosen) {
  if (!existsSync(compiled(f))) {
    console.error(`${compiled(f)} is missing: run the build (npm run build) first`);
    process.exit(1);
  }
}
// The daemons the tests start are the one-file builds (scripts/bundle.mjs): they must be newer than every source.
const newestSource = (dir) =>
  readdirSync(dir, { withFileTypes: true }).reduce((m, e) => {
    const p = path.join(dir, e.name);
    return Math.max(m, e.isDirectory() ? newestSource(p) : e.name.endsWith('.ts') ? statSync(p).mtimeMs : 0);
  }, 0);
for (const bundle of ['browserd.js', 'browserd-test.js', 'browserd-main.js', 'browserd-test-main.js'].map((f) => path.join(root, 'dist', 'daemon', f))) {
  if (!existsSync(bundle) || statSync(bundle).mtimeMs < newestSource(path.join(root, 'daemon'))) {
    console.error(`${bundle} is missing or older than daemon/: run the build (npm run build) first`);
    process.exit(1);
  }
}
/** Whether the file says `// @<mark>` in its first 15 lines. */
const marked = (f, mark) => new RegExp(`^// @${mark}\\b`, 'm').test(readFileSync(path.join(root, 'test', f), 'utf8').split('\n').slice(0, 15).join('\n'));
const serial = chosen.filter((f) => marked(f, 'serial'));
const noChromium = new Set(chosen.filter((f) => marked(f, 'no-chromium')));
/** The last run's wall time of each file (node_modules/.cache, absent on a fresh clone): the order of the @long files. */
const timesFile = path.join(root, 'node_modules', '.cache', 'browserd-test-times.json');
const lastTimes = (() => {
  try {
    return JSON.parse(readFileSync(timesFile, 'utf8'));
  } catch {
    return {};
  }
})();
const longest = (a, b) => (lastTimes[b] ?? 0) - (lastTimes[a] ?? 0);
const rest = chosen.filter((f) => !serial.includes(f));
const long = rest.filter((f) => marked(f, 'long')).sort(longest);
/** The order files are taken in: the serial ones, then the long ones (the longest of the last run first), then the others. */
const queue = [...serial, ...long, ...rest.filter((f) => !long.includes(f))];
const fixedConcurrency = Number(process.env.BROWSERD_TEST_CONCURRENCY) || undefined;
/** Files that always run side by side (the cores), and the most that may while CPU is to spare. */
const concurrency = fixedConcurrency ?? Math.max(2, availableParallelism());
const maxConcurrency = fixedConcurrency ?? 2 * concurrency;
/** The share of the machine's CPU that must have been idle over the last sample for a file beyond `concurrency` to start. */
const SPARE_IDLE = 0.25;
const SAMPLE_MS = 500;
/** The least time between two starts beyond `concurrency`. */
const SPARE_START_GAP_MS = 1000;

const tmp = mkdtempSync(path.join(tmpdir(), 'btr-'));
chmodSync(tmp, 0o1777); // as /tmp: a test runs a daemon as another user, which makes its state dir here
// The kit's tally of each file (one JSON line per daemon start, Chromium launch, daemon stop), outside
// the test temp folder so that it does not count as something the tests left behind.
const tallies = mkdtempSync(path.join(tmpdir(), 'btr-tally-'));

/** A check of the whole tree in the background (eslint, tsc); resolves to its exit status once its output is printed. */
function startCheck(name, argv) {
  const t = Date.now();
  const child = spawn(process.execPath, argv, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
  const out = [];
  child.stdout.on('data', (b) => out.push(b));
  child.stderr.on('data', (b) => out.push(b));
  return new Promise((resolve) => {
    child.on('error', (err) => resolve((console.error(`✖ ${name} did not start: ${err.message}`), 1)));
    child.on('close', (code, signal) => {
      const text = Buffer.concat(out).toString();
      if (code !== 0) console.error(`\n✖ ${name} failed (${signal ?? code}):\n${text}`);
      else console.log(`\n${name}: clean in ${((Date.now() - t) / 1000).toFixed(1)} s${text.trim() ? `\n${text}` : ''}`);
      resolve(code === 0 ? 0 : 1);
    });
  });
}

const t0 = Date.now();
/** @type {{ file: string, status: number, start: number, end: number, tests: number, pass: number, fail: number, tally: Record<string, { n: number, ms: number }> }[]} */
const results = [];

/** A single file's output is printed as it comes (nothing runs beside it to interleave with). */
const live = chosen.length === 1;

/** One file in its own process; its output printed whole at its end (as it comes when it is the only one). */
function runFile(f, i) {
  const tally = path.join(tallies, `${i}.jsonl`);
  const start = Date.now();
  const child = spawn(process.execPath, ['--import', tallyModule, '--test', '--test-isolation=none', '--test-timeout=300000', '--test-reporter=spec', compiled(f)], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, TMPDIR: tmp, BROWSERD_TEST_TALLY: tally },
  });
  const out = [];
  const take = (b) => (out.push(b), live && process.stdout.write(b));
  if (live) process.stdout.write(`━━ ${f}\n`);
  child.stdout.on('data', take);
  child.stderr.on('data', take);
  return new Promise((resolve) => {
    child.on('error', (err) => take(Buffer.from(`✖ did not start: ${err.message}\n`)));
    child.on('close', (code, signal) => {
      const end = Date.now();
      const text = Buffer.concat(out).toString();
      const count = (name) => Number(new RegExp(`^ℹ ${name} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);
      const status = code === 0 ? 0 : 1;
      const r = { file: f, status, start: start - t0, end: end - t0, tests: count('tests'), pass: count('pass'), fail: count('fail') + count('cancelled'), tally: readTally(tally) };
      if (status !== 0) r.why = failureOf(text);
      results.push(r);
      process.stdout.write(`\n━━ ${f} (${((end - start) / 1000).toFixed(1)} s)${status === 0 ? '' : ` ✖ ${signal ?? code}`}\n${live ? '' : text}`);
      resolve(status);
    });
  });
}

/** What a failed file said of its failures (the spec reporter's closing list, else its last lines), at most 6,000 characters. */
function failureOf(text) {
  const at = text.lastIndexOf('✖ failing tests:');
  const part = at >= 0 ? text.slice(at) : text.split('\n').slice(-40).join('\n');
  return part.length > 6000 ? `${part.slice(0, 6000)}\n… (cut; the whole output is above)` : part;
}

/** The kit's lines of one file, summed by kind. */
function readTally(file) {
  const sums = {};
  if (!existsSync(file)) return sums;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (line === '') continue;
    const { kind, ms } = JSON.parse(line);
    sums[kind] ??= { n: 0, ms: 0 };
    sums[kind].n += 1;
    sums[kind].ms += ms ?? 0;
  }
  return sums;
}

/** /proc/stat's first line: the machine's idle ticks (idle + iowait) and all its ticks. */
function cpuTicks() {
  const f = readFileSync('/proc/stat', 'utf8').slice(0, 200).split('\n', 1)[0].trim().split(/\s+/).slice(1).map(Number);
  return { idle: f[3] + (f[4] ?? 0), total: f.reduce((a, b) => a + b, 0) };
}

/**
 * The queue, `concurrency` files at a time and up to `maxConcurrency` while the CPU has room (see
 * the head of this file), each slot taking the first file it may start: a serial file only when no
 * other serial file and no file that may start Chromium runs; beside a serial file, only
 * `@no-chromium` files (so the serial files, first in the queue, run beside the files that start no
 * Chromium instead of alone at the end).
 */
async function schedule(files) {
  const waiting = [...files];
  const running = new Set();
  let status = 0;
  let started = 0;
  let peak = 0;
  let idleShare = 0;
  let lastSpareStart = 0;
  let last = cpuTicks();
  const mayStart = (f) =>
    serial.includes(f) ? [...running].every((r) => noChromium.has(r)) : noChromium.has(f) || ![...running].some((r) => serial.includes(r));
  const roomBeyondCores = () => idleShare >= SPARE_IDLE && Date.now() - lastSpareStart >= SPARE_START_GAP_MS;
  return new Promise((resolve) => {
    const fill = () => {
      while (running.size < maxConcurrency) {
        const spare = running.size >= concurrency;
        if (spare && !roomBeyondCores()) break;
        const i = waiting.findIndex(mayStart);
        if (i < 0) break;
        const [f] = waiting.splice(i, 1);
        running.add(f);
        peak = Math.max(peak, running.size);
        if (spare) {
          lastSpareStart = Date.now();
          idleShare = 0; // this start shows in the next sample
        }
        void runFile(f, started++).then((st) => {
          running.delete(f);
          status = st || status;
          fill();
        });
      }
      if (running.size === 0 && waiting.length === 0) {
        clearInterval(sampler);
        resolve({ status, peak });
      }
    };
    const sampler = setInterval(() => {
      const now = cpuTicks();
      const total = now.total - last.total;
      idleShare = total > 0 ? (now.idle - last.idle) / total : 0;
      last = now;
      fill();
    }, SAMPLE_MS);
    fill();
  });
}

// One process for both: scripts/check.mjs builds the TypeScript program once for tsc's diagnostics and eslint's type-aware rules.
const checkScript = path.join(root, 'scripts', 'check.mjs');
const checks =
  lint && typecheck
    ? [startCheck('tsc --noEmit and eslint', [checkScript])]
    : lint
      ? [startCheck('eslint', [checkScript, '--lint-only'])]
      : typecheck
        ? [startCheck('tsc --noEmit', [checkScript, '--types-only'])]
        : [];
const { status: runStatus, peak } = await schedule(queue);
let status = runStatus;
const wall = Date.now() - t0;
const left = readdirSync(tmp);
if (left.length > 0) {
  console.error(`\n✖ the tests left ${left.length} entries in their temp folder: ${left.slice(0, 10).join(', ')}`);
  status = status || 1;
}
rmSync(tmp, { recursive: true, force: true });
rmSync(tallies, { recursive: true, force: true });
for (const check of checks) status = (await check) || status;

const s = (ms) => (ms / 1000).toFixed(1);
const tallyCell = (r, kind) => (r.tally[kind] ? `${r.tally[kind].n} (${s(r.tally[kind].ms)})` : '');
// A file marked @no-chromium ran beside the serial ones on that word: its daemons must not have started one.
for (const r of results.filter((r) => noChromium.has(r.file) && r.tally.launch)) {
  console.error(`\n✖ ${r.file} is marked @no-chromium but its daemons launched Chromium ${r.tally.launch.n} times: remove the mark`);
  status = status || 1;
}
mkdirSync(path.dirname(timesFile), { recursive: true });
// A new file renamed over the old one: node_modules may be hard-linked to other checkouts' (a write in place would change theirs).
writeFileSync(`${timesFile}.${process.pid}`, JSON.stringify({ ...lastTimes, ...Object.fromEntries(results.map((r) => [r.file, r.end - r.start])) }));
renameSync(`${timesFile}.${process.pid}`, timesFile);
const byTime = [...results].sort((a, b) => b.end - b.start - (a.end - a.start));
const shown = allTimes ? byTime : byTime.slice(0, 10);
console.log(
  `\n${allTimes ? 'every file' : 'the 10 slowest files'}: wall s, CPU s (the file's process and every child it waited for: daemons, Chromium), start–end s in the run, ` +
    'daemons started (s to listening), Chromium ready (s to ready), daemon stops (s)',
);
console.log('| file | wall | CPU | start–end | daemons | Chromium | stops |');
console.log('|---|---:|---:|---|---:|---:|---:|');
for (const r of shown) {
  console.log(`| ${r.file}${r.status ? ' ✖' : ''} | ${s(r.end - r.start)} | ${r.tally.cpu ? s(r.tally.cpu.ms) : ''} | ${s(r.start)}–${s(r.end)} | ${tallyCell(r, 'daemon')} | ${tallyCell(r, 'chromium')} | ${tallyCell(r, 'stop')} |`);
}
// Why each failed file failed, again at the end: a log that keeps only its tail (CI) still says it.
for (const r of results.filter((r) => r.why !== undefined)) console.log(`\n✖ ${r.file}:\n${r.why.trimEnd()}`);
const sum = (kind) => results.reduce((a, r) => ({ n: a.n + (r.tally[kind]?.n ?? 0), ms: a.ms + (r.tally[kind]?.ms ?? 0) }), { n: 0, ms: 0 });
const busy = results.reduce((a, r) => a + r.end - r.start, 0);
const slowest = byTime[0];
const serialRuns = results.filter((r) => serial.includes(r.file));
const serialSpan = () =>
  serialRuns.length === 0 ? 'none' : `${s(Math.min(...serialRuns.map((r) => r.start)))}–${s(Math.max(...serialRuns.map((r) => r.end)))} s in the run`;
const tests = results.reduce((a, r) => a + r.tests, 0);
const failed = results.filter((r) => r.status !== 0);
console.log(
  `\nfiles' time summed ${s(busy)} s (over ${concurrency}: ${s(busy / concurrency)} s; ${(busy / wall).toFixed(1)} files at a time on average); longest file ${slowest ? `${slowest.file} ${s(slowest.end - slowest.start)} s` : '-'}; ` +
    `CPU summed ${s(sum('cpu').ms)} s; serial files ${serialSpan()}; daemons ${sum('daemon').n} (${s(sum('daemon').ms)} s to listening), Chromium launches ${sum('chromium').n} (${s(sum('chromium').ms)} s to ready), stops ${sum('stop').n} (${s(sum('stop').ms)} s)`,
);
console.log(`${tests} tests, ${results.reduce((a, r) => a + r.pass, 0)} passed, ${results.reduce((a, r) => a + r.fail, 0)} failed or cancelled${failed.length ? ` (in ${failed.map((r) => r.file).join(', ')})` : ''}`);
console.log(`${chosen.length} files (${concurrency === maxConcurrency ? concurrency : `${concurrency} to ${maxConcurrency}, at most ${peak}`} at a time; ${serial.length} serial, ${noChromium.size} without Chromium) in ${s(wall)} s`);
process.exit(status);
