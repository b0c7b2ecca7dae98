// Runs every test file: the list is read from test/ (Node 20's `node --test` takes no glob),
// mapped to the compiled files, and each must exist, so no test file can be left out silently.
// Chromium tests share 2 cores: one file at a time.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';

const root = path.dirname(path.dirname(new URL(import.meta.url).pathname));
const sources = readdirSync(path.join(root, 'test')).filter((f) => f.endsWith('.test.ts')).sort();
const only = process.argv.slice(2);
const files = sources
  .filter((f) => only.length === 0 || only.some((o) => f.includes(o)))
  .map((f) => path.join(root, 'dist', 'test', f.replace(/\.ts$/, '.js')));
if (files.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}
for (const f of files) {
  if (!existsSync(f)) {
    console.error(`${f} is missing: run the build (tsc -p .) first`);
    process.exit(1);
  }
}
const res = spawnSync(
  process.execPath,
  ['--test', '--test-concurrency=1', '--test-timeout=300000', '--test-reporter=spec', ...files],
  { stdio: 'inherit', cwd: root },
);
process.exit(res.status ?? 1);
