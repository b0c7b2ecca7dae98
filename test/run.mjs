// Runs every test file: the list is read from test/ and its sub-folders, one per family (a glob,
// fs.globSync), mapped to the compiled files (test/fs/units.test.ts →
// dist/test/fs/units.test.js), and each must exist, so no test file can be left out silently.
// `node test/run.mjs fs proxies` runs the files whose path under test/ contains `fs` or `proxies`;
// `--list` prints the chosen files and runs nothing; `--lint` runs eslint beside the tests (it
// waits on the disk and one core while most test files wait on Chromium and their children) and
// fails the run when it fails.
//
// Files run in parallel (each test file starts its own daemons with their own state dir, port and
// Chromium profile), BROWSERD_TEST_CONCURRENCY at a time (default: the cores, at least 2). Files
// that touch machine-global state say so with a `// @serial` line near their top (the managed-policy
// folder that every Chromium reads) and run alone, after the others. Files marked `// @long` (the
// ones that take 10 s or more) start first, so that none of them is left running alone at the end.
//
// The run has a temp folder of its own (TMPDIR for every test process, and through them for the
// daemons, Chromium and the clients): whatever is left in it afterwards (browserd-*,
// org.chromium.Chromium.*, puppeteer_dev_profile-*, …) fails the run. Other work on the machine
// (a benchmark, another checkout's tests) writes to /tmp, not there. Its name is short (btr-XXXXXX):
// a state dir's path must leave room for the Unix socket Chromium makes under it (core/state-dir.ts).
import { Buffer } from 'node:buffer';
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, globSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';

const root = path.dirname(path.dirname(new URL(import.meta.url).pathname));
/** The *.test.ts files under test/, as paths relative to it (`fs/units.test.ts`). */
const sources = globSync('**/*.test.ts', { cwd: path.join(root, 'test'), exclude: (p) => path.basename(p) === 'node_modules' }).sort();
const args = process.argv.slice(2);
const list = args.includes('--list');
const lint = args.includes('--lint');
const only = args.filter((a) => a !== '--list' && a !== '--lint');
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
for (const bundle of ['browserd.js', 'browserd-test.js'].map((f) => path.join(root, 'dist', 'daemon', f))) {
  if (!existsSync(bundle) || statSync(bundle).mtimeMs < newestSource(path.join(root, 'daemon'))) {
    console.error(`${bundle} is missing or older than daemon/: run the build (npm run build) first`);
    process.exit(1);
  }
}
/** Whether the file says `// @<mark>` in its first 15 lines. */
const marked = (f, mark) => new RegExp(`^// @${mark}\\b`, 'm').test(readFileSync(path.join(root, 'test', f), 'utf8').split('\n').slice(0, 15).join('\n'));
const serial = chosen.filter((f) => marked(f, 'serial'));
const rest = chosen.filter((f) => !serial.includes(f));
const parallel = [...rest.filter((f) => marked(f, 'long')), ...rest.filter((f) => !marked(f, 'long'))];
const concurrency = Number(process.env.BROWSERD_TEST_CONCURRENCY) || Math.max(2, availableParallelism());

const tmp = mkdtempSync(path.join(tmpdir(), 'btr-'));
chmodSync(tmp, 0o1777); // as /tmp: a test runs a daemon as another user, which makes its state dir here

/** eslint on the whole tree, in the background; resolves to its exit status once its output is printed. */
function startLint() {
  const child = spawn(process.execPath, [path.join(root, 'node_modules', 'eslint', 'bin', 'eslint.js'), '.'], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
  const out = [];
  child.stdout.on('data', (b) => out.push(b));
  child.stderr.on('data', (b) => out.push(b));
  return new Promise((resolve) => {
    child.on('error', (err) => resolve((console.error(`✖ eslint did not start: ${err.message}`), 1)));
    child.on('close', (code, signal) => {
      const text = Buffer.concat(out).toString();
      if (code !== 0) console.error(`\n✖ eslint failed (${signal ?? code}):\n${text}`);
      else console.log(`\neslint: clean${text.trim() ? `\n${text}` : ''}`);
      resolve(code === 0 ? 0 : 1);
    });
  });
}

function run(files, n) {
  if (files.length === 0) return 0;
  const res = spawnSync(process.execPath, ['--test', `--test-concurrency=${n}`, '--test-timeout=300000', '--test-reporter=spec', ...files.map(compiled)], { stdio: 'inherit', cwd: root, env: { ...process.env, TMPDIR: tmp } });
  return res.status ?? 1;
}

const t0 = Date.now();
const linting = lint ? startLint() : null;
let status = run(parallel, concurrency);
status = run(serial, 1) || status;
const left = readdirSync(tmp);
if (left.length > 0) {
  console.error(`\n✖ the tests left ${left.length} entries in their temp folder: ${left.slice(0, 10).join(', ')}`);
  status = status || 1;
}
rmSync(tmp, { recursive: true, force: true });
if (linting !== null) status = (await linting) || status;
console.log(`\n${chosen.length} files (${parallel.length} in parallel, ${concurrency} at a time; ${serial.length} alone) in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
process.exit(status);
