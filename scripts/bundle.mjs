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
//
// Two builds of the same code: dist/daemon/browserd.js, the one shipped, whose
// daemon/core/test-hooks.ts has no hooks and refuses BROWSERD_TEST_HOOKS; and
// dist/daemon/browserd-test.js, the one the test kit and the benchmarks start, where that module
// is test/kit/test-hooks.ts (the hooks). systemd/install.sh does not install the test build.
// Each is two files: the entry (daemon/start.ts: Node's compile cache, a few hundred bytes) and the
// daemon's code it imports (browserd-main.js, browserd-test-main.js).
import { build } from 'esbuild';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
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

/**
 * Node's own modules imported through require(), not as ES modules. Why: importing a built-in as an
 * ES module makes Node build its "facade", which reads every export once — and node:http's
 * `WebSocket`, `MessageEvent` and `CloseEvent` are getters that load all of undici (~45 ms of the
 * start in a --cpu-prof profile, plus fs's streams); require() hands the module object over and
 * those getters stay unread. Each built-in becomes one small ES module of the bundle, shared by
 * every importer, whose named exports are the built-in's plain data properties (listed here, from
 * the Node that builds: the same major as the one that runs, engines in package.json); a getter is
 * never read at start, and importing one by name fails the build ("No matching export"), where it
 * would show. Not esbuild's CommonJS interop: it copies every property of the module once per
 * importing file (~200 files × ~100 properties at start).
 */
const builtinsViaRequire = {
  name: 'builtins-via-require',
  setup(b) {
    b.onResolve({ filter: /^node:/ }, (args) => (args.kind === 'import-statement' ? { path: args.path, namespace: 'builtin-cjs' } : undefined));
    b.onLoad({ filter: /.*/, namespace: 'builtin-cjs' }, (args) => {
      const mod = require(args.path);
      const names = Object.keys(Object.getOwnPropertyDescriptors(mod)).filter(
        (n) => n !== 'default' && /^[A-Za-z_$][\w$]*$/.test(n) && 'value' in Object.getOwnPropertyDescriptor(mod, n),
      );
      const named = names.length === 0 ? '' : `export const { ${names.join(', ')} } = m;\n`;
      return { contents: `const m = require(${JSON.stringify(args.path)});\nexport default m;\n${named}`, loader: 'js' };
    });
  },
};

/**
 * node:tls and node:https, loaded when first used rather than at import. Why: no part of the start
 * uses them — ws requires both at its import for its client's wss:// (the daemon's WebSocket clients
 * are ws:// on loopback), the proxies module for upstream TLS — and loading them costs ~5 MiB of
 * the idle daemon's resident memory (tls's cipher lists, OpenSSL's contexts) and ~10 ms of the start
 * (bench/ANALYSIS.md §7). Each becomes a proxy object whose first property read requires the real
 * module: `tls.connect(...)` reads `connect` first, so the module is there when it is called. Only
 * whole-module imports can be deferred: a named import of these fails the build (no such export).
 */
const ON_USE = /^(?:node:)?(tls|https)$/;
const builtinsOnUse = {
  name: 'builtins-on-use',
  setup(b) {
    b.onResolve({ filter: ON_USE }, (args) => {
      if (args.namespace === 'builtin-on-use') return undefined; // the real module, from inside the proxy
      const name = ON_USE.exec(args.path)[1];
      if (args.kind === 'import-statement') return { path: name, namespace: 'builtin-on-use', pluginData: 'esm' };
      if (args.kind === 'require-call') return { path: `${name}.cjs`, namespace: 'builtin-on-use', pluginData: 'cjs' };
      return undefined;
    });
    b.onLoad({ filter: /.*/, namespace: 'builtin-on-use' }, (args) => {
      const name = args.path.replace(/\.cjs$/, '');
      const proxy = [
        'let real;',
        `const load = () => (real ??= require(${JSON.stringify(`node:${name}`)}));`,
        'const onUse = new Proxy({}, {',
        '  get: (_t, k) => load()[k],',
        '  has: (_t, k) => k in load(),',
        '  ownKeys: () => Reflect.ownKeys(load()),',
        '  getOwnPropertyDescriptor: (_t, k) => { const d = Reflect.getOwnPropertyDescriptor(load(), k); return d && { ...d, configurable: true }; },',
        '});',
      ];
      return { contents: proxy.concat(args.pluginData === 'esm' ? 'export default onUse;' : 'module.exports = onUse;').join('\n'), resolveDir: root, loader: 'js' };
    });
  },
};

/**
 * prom-client's entry (index.js) as the five parts the daemon imports (daemon/core/metrics.ts), and
 * its optional `@opentelemetry/api` read on first use. Why: index.js requires all of prom-client at
 * import — the Pushgateway (node:https, so node:tls and its cipher lists), the cluster aggregator
 * (node:cluster), Summary — and the default metrics require OpenTelemetry's API (~40 files), read
 * only for exemplars, which the daemon never enables. Loaded at every start, ~35 ms of CPU to
 * `listening` (see bench/ANALYSIS.md §7). The same modules of the same package run; only what the
 * daemon does not use is no longer loaded. tsc's output (dist/daemon/main.js) imports the full entry.
 */
const promClientParts = {
  name: 'prom-client-parts',
  setup(b) {
    b.onResolve({ filter: /^prom-client$/ }, (args) =>
      args.importer.startsWith(path.join(root, 'daemon') + path.sep) ? { path: 'prom-client', namespace: 'prom-client-parts' } : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: 'prom-client-parts' }, () => ({
      contents: ['Registry', 'Counter', 'Gauge', 'Histogram']
        .map((n) => `exports.${n} = require('prom-client/lib/${n.toLowerCase()}');`)
        .concat("exports.collectDefaultMetrics = require('prom-client/lib/defaultMetrics');")
        .join('\n'),
      resolveDir: root,
      loader: 'js',
    }));
    // prom-client's `require('@opentelemetry/api')`: the real module, evaluated when a property is first read.
    b.onResolve({ filter: /^@opentelemetry\/api$/ }, (args) =>
      args.namespace === 'otel-on-use' ? undefined : { path: '@opentelemetry/api', namespace: 'otel-on-use' },
    );
    b.onLoad({ filter: /.*/, namespace: 'otel-on-use' }, () => ({
      contents: [
        'let api;',
        "const real = () => (api ??= require('@opentelemetry/api'));",
        "module.exports = new Proxy({}, { get: (_t, k) => real()[k], has: (_t, k) => k in real(), ownKeys: () => Reflect.ownKeys(real()), getOwnPropertyDescriptor: (_t, k) => { const d = Reflect.getOwnPropertyDescriptor(real(), k); return d && { ...d, configurable: true }; } });",
      ].join('\n'),
      resolveDir: root,
      loader: 'js',
    }));
  },
};

const productionHooks = path.join(root, 'daemon', 'core', 'test-hooks.js');

/** The test build: daemon/core/test-hooks.ts is test/kit/test-hooks.ts. */
const withTestHooks = {
  name: 'with-test-hooks',
  setup(b) {
    b.onResolve({ filter: /test-hooks\.js$/ }, (args) =>
      path.resolve(path.dirname(args.importer), args.path) === productionHooks ? { path: path.join(root, 'test', 'kit', 'test-hooks.ts') } : undefined,
    );
  },
};

/** What both builds share: one ES module for Node 24, whitespace and syntax minified (names kept readable for stack traces). */
const common = {
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node24',
  // CommonJS dependencies bundled into an ES module still call require() for Node's own modules.
  banner: { js: "import { createRequire as browserdCreateRequire } from 'node:module'; const require = browserdCreateRequire(import.meta.url);" },
  minifyWhitespace: process.env.BROWSERD_BUNDLE_MINIFY !== '0',
  minifySyntax: process.env.BROWSERD_BUNDLE_MINIFY !== '0',
  legalComments: 'none',
  logLevel: 'warning',
};

const bundle = (outName, plugins) => build({
  ...common,
  entryPoints: [path.join(root, 'daemon', 'main.ts')],
  outfile: path.join(root, 'dist', 'daemon', outName),
  external: ['@lydell/node-pty', 'playwright-core'],
  minifyIdentifiers: false,
  keepNames: false,
  plugins: [zodEnglishOnly, builtinsOnUse, builtinsViaRequire, promClientParts, ...plugins],
});

/**
 * The entry (daemon/start.ts) as a file of its own, whose `import('./main.js')` is the daemon's
 * bundle beside it: Node's compile cache only covers modules loaded after it is turned on, so the
 * daemon's code must be a second module.
 */
const entry = (outName, mainName) => build({
  ...common,
  entryPoints: [path.join(root, 'daemon', 'start.ts')],
  outfile: path.join(root, 'dist', 'daemon', outName),
  plugins: [
    builtinsViaRequire,
    {
      name: 'main-beside',
      setup(b) {
        b.onResolve({ filter: /^\.\/main\.js$/ }, () => ({ path: `./${mainName}`, external: true }));
      },
    },
  ],
});

await Promise.all([
  bundle('browserd-main.js', []),
  bundle('browserd-test-main.js', [withTestHooks]),
  entry('browserd.js', 'browserd-main.js'),
  entry('browserd-test.js', 'browserd-test-main.js'),
]);
