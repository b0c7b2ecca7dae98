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
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
    },
  },
  { files: ['daemon/**/*.ts'], rules: { 'no-console': 'error' } },
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
