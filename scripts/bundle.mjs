// `npm run build`'s second step: the daemon as one ES module, dist/daemon/browserd.js, beside the
// files tsc wrote. Why: Node 20 resolves, reads and compiles each of the ~600 modules of the
// daemon and its dependencies one by one at start (zod alone is ~100 files); one file halves the
// start (see bench/RESULTS.md, "daemon start"). Both forms run the same code: `node
// dist/daemon/main.js` (tsc's output) works too, only slower to start.
//
// Left outside: the PTY addon (native, loaded by createRequire) and what only the Playwright runner
// loads (it is its own process, dist/daemon/playwright/runner/main.js, started from tsc's output).
// Whitespace and syntax are minified, names are not: error classes and stack frames read as in the
// source, without esbuild's keepNames, which wraps every function the code makes in a
// defineProperty call for its name — per request too (~3% of the CPU of a small stdin write,
// most of it in pino's redaction). Names two modules share get a digit (zod's internals, a few
// helpers; no class of the daemon). No source map (Node would parse it at every start).
//
// zod's translations of its messages (`z.locales`, ~260 KB of what was a 1.1 MB minified file) are
// left out but English, the one the daemon answers in: Node parses the whole file at every start,
// the largest single part of the start (compileSourceTextModule, 50-90 ms in --cpu-prof profiles).
import { build } from 'esbuild';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

/** zod's `../locales/index.js` (all its translations) as a module of English alone. */
const zodEnglishOnly = {
  name: 'zod-english-only',
  setup(b) {
    b.onResolve({ filter: /^\.\.\/locales\/index\.js$/ }, (args) =>
      args.importer.includes(`${path.sep}zod${path.sep}`) ? { path: path.join(path.dirname(args.importer), '..', 'locales', 'index.js'), namespace: 'zod-en' } : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: 'zod-en' }, (args) => ({
      contents: `export { default as en } from ${JSON.stringify(path.join(path.dirname(args.path), 'en.js'))};`,
      resolveDir: path.dirname(args.path),
      loader: 'js',
    }));
  },
};

await build({
  entryPoints: [path.join(root, 'daemon', 'main.ts')],
  outfile: path.join(root, 'dist', 'daemon', 'browserd.js'),
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node24',
  external: ['@lydell/node-pty', 'playwright-core'],
  // CommonJS dependencies bundled into an ES module still call require() for Node's own modules.
  banner: { js: "import { createRequire as browserdCreateRequire } from 'node:module'; const require = browserdCreateRequire(import.meta.url);" },
  minifyWhitespace: process.env.BROWSERD_BUNDLE_MINIFY !== '0',
  minifySyntax: process.env.BROWSERD_BUNDLE_MINIFY !== '0',
  minifyIdentifiers: false,
  keepNames: false,
  legalComments: 'none',
  plugins: [zodEnglishOnly],
  logLevel: 'warning',
});
