// Lint rules: typescript-eslint's recommended set, plus the project's own rules:
// no console in the daemon (logs go through pino to stdout for journald).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.browserd/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    // Type-aware: the promise rules need the types (tsconfig.json's program, through the project service).
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      // A promise nobody awaits or handles is a rejection nobody sees (main.ts only logs it): await it,
      // handle it, or `void` it where fire-and-forget is meant (its errors handled inside).
      // node:test's test()/describe() return promises the runner itself awaits.
      '@typescript-eslint/no-floating-promises': ['error', { allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['test', 'describe', 'it', 'suite'] }] }],
      '@typescript-eslint/no-misused-promises': 'error',
    },
  },
  { files: ['daemon/**/*.ts'], rules: { 'no-console': 'error' } },
  {
    // Domain code knows nothing of HTTP: only a concern's HTTP face (routes.ts, and its index.ts /
    // types.ts, which hand the routes to main), main.ts and module.ts (a module's shape) may import daemon/http/.
    files: ['daemon/**/*.ts'],
    ignores: ['daemon/http/**', 'daemon/main.ts', 'daemon/module.ts', 'daemon/**/routes.ts', 'daemon/**/routes/**', 'daemon/**/index.ts', 'daemon/**/types.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [{ group: ['**/http/*', '**/http/**'], message: 'domain code throws core/errors.ts classes; only routes.ts (the HTTP face) imports daemon/http/' }] }],
    },
  },
  {
    // Extension fixtures run inside Chromium, with the extension and page globals.
    files: ['fixtures/extensions/**/*.js'],
    languageOptions: { globals: { chrome: 'readonly', document: 'readonly', self: 'readonly', console: 'readonly' } },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly' } },
  },
);
