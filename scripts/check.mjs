// The type check and the lint over one TypeScript program: `tsc --noEmit -p .` and `eslint .` each
// build the whole program and type-check it (typescript-eslint's promise rules need the types), so
// run apart they do that work twice (~19 s and ~38 s of CPU on a fresh clone). Here the program is
// built once: its diagnostics are tsc's, and eslint's type-aware rules read its checker
// (typescript-eslint's `programs` option, in place of the project service of eslint.config.js).
// Prints what tsc and eslint would print; exits 1 when either finds a problem.
// `node scripts/check.mjs [--types-only | --lint-only]`.
import path from 'node:path';
import { ESLint } from 'eslint';
import ts from 'typescript';

const root = path.dirname(path.dirname(new URL(import.meta.url).pathname));
const args = process.argv.slice(2);
const types = !args.includes('--lint-only');
const lint = !args.includes('--types-only');

const configFile = path.join(root, 'tsconfig.json');
const read = ts.readConfigFile(configFile, ts.sys.readFile);
if (read.error) throw new Error(ts.flattenDiagnosticMessageText(read.error.messageText, '\n'));
const parsed = ts.parseJsonConfigFileContent(read.config, ts.sys, root, undefined, configFile);
const program = ts.createProgram({ rootNames: parsed.fileNames, options: { ...parsed.options, noEmit: true }, projectReferences: parsed.projectReferences });

let failed = false;
if (types) {
  const diagnostics = ts.getPreEmitDiagnostics(program);
  if (diagnostics.length > 0) {
    failed = true;
    const host = { getCanonicalFileName: (f) => f, getCurrentDirectory: () => root, getNewLine: () => '\n' };
    process.stdout.write(process.stdout.isTTY ? ts.formatDiagnosticsWithColorAndContext(diagnostics, host) : ts.formatDiagnostics(diagnostics, host));
    process.stdout.write(`\ntsc: ${diagnostics.length} error(s)\n`);
  }
}
if (lint) {
  const eslint = new ESLint({
    cwd: root,
    overrideConfig: [{ files: ['**/*.ts'], languageOptions: { parserOptions: { projectService: false, programs: [program] } } }],
  });
  const results = await eslint.lintFiles(['.']);
  const text = await (await eslint.loadFormatter('stylish')).format(results);
  if (results.some((r) => r.errorCount > 0 || r.warningCount > 0)) failed = true;
  if (text) process.stdout.write(text);
}
process.exit(failed ? 1 : 0);
