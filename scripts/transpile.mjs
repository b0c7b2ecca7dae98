// `npm test`'s build: every .ts of daemon/, test/ and bench/ to dist/ as tsc would write it (one .js
// and its .js.map per file, the same tree), but by esbuild, file by file, without checking the types:
// ~1 s where tsc takes ~25 s of CPU on a fresh clone (~40 s wall on a loaded 2-core machine), all of it
// before the first test could start. The types are still checked in the same run: test/run.mjs
// --typecheck runs the type check beside the tests (scripts/check.mjs, with --lint eslint over the
// same program), and fails the run when it fails. `npm run build` stays tsc's (it checks before it writes); both write the same modules.
// tsconfig.json is esbuild's too (target, class fields, verbatimModuleSyntax).
import { build } from 'esbuild';
import { globSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const entryPoints = globSync('{daemon,test,bench}/**/*.ts', { cwd: root, exclude: (p) => path.basename(p) === 'node_modules' })
  .filter((f) => !f.endsWith('.d.ts'))
  .map((f) => path.join(root, f));

await build({
  entryPoints,
  outdir: path.join(root, 'dist'),
  outbase: root,
  bundle: false,
  platform: 'node',
  format: 'esm',
  target: 'node24',
  sourcemap: true,
  tsconfig: path.join(root, 'tsconfig.json'),
  logLevel: 'warning',
});
