// The examples of README.md and docs/*.md, found and run (test/docs/examples.test.ts): every fenced
// block whose info string is sh/bash/shell (run with bash, `set -euo pipefail`) or js/javascript/mjs/
// ts/typescript (run as an ES module by the test's own Node, TypeScript by Node's type stripping).
// A block meant for reading only carries `<!-- example: read-only -->` on the line before its fence;
// it is found and counted, never run. Other blocks (json, ini, text, no info string) are not examples.
//
// Each block runs on its own, in a fresh folder that links `node_modules` and `fixtures` to the
// checkout's (so `import Kernel from '@onkernel/sdk'` and `fixtures/extensions/…` resolve as they do
// in the checkout), with BROWSERD_URL and BROWSERD_TOKEN in its environment (the docs' convention),
// `node` on PATH being the test's Node, and a curlrc that makes curl fail on an HTTP error status.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { tempDir } from './cleanup.js';

export const READ_ONLY_MARK = '<!-- example: read-only -->';

export type ExampleLang = 'sh' | 'js' | 'ts';

export interface Example {
  /** `README.md` or `docs/x.md`, relative to the checkout. */
  file: string;
  /** 1-based line of the opening fence. */
  line: number;
  lang: ExampleLang;
  body: string;
  readOnly: boolean;
}

const LANGS: Record<string, ExampleLang> = { sh: 'sh', bash: 'sh', shell: 'sh', js: 'js', javascript: 'js', mjs: 'js', ts: 'ts', typescript: 'ts' };

/** The example blocks of one markdown text (`file` only names them). */
export function extractExamples(file: string, text: string): Example[] {
  const lines = text.split('\n');
  const out: Example[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*([^\s`]*)/.exec(lines[i]);
    if (!open) continue;
    const [, indent, fence, info] = open;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length; i++) {
      const l = lines[i];
      if (l.trimStart().startsWith(fence) && l.trim().replace(/[`~]/g, '') === '') break;
      body.push(l.startsWith(indent) ? l.slice(indent.length) : l);
    }
    if (i >= lines.length) throw new Error(`${file}:${start + 1}: a fenced block is never closed`);
    const lang = LANGS[info.toLowerCase()];
    if (lang === undefined) continue;
    let prev = start - 1;
    while (prev >= 0 && lines[prev].trim() === '') prev--;
    out.push({ file, line: start + 1, lang, body: body.join('\n') + '\n', readOnly: prev >= 0 && lines[prev].trim() === READ_ONLY_MARK });
  }
  return out;
}

/** The markdown files the examples come from: README.md and every docs/*.md, in name order. */
export function docFiles(repoRoot: string): string[] {
  const docs = readdirSync(path.join(repoRoot, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`);
  return ['README.md', ...docs];
}

export function allExamples(repoRoot: string): Example[] {
  return docFiles(repoRoot).flatMap((f) => extractExamples(f, readFileSync(path.join(repoRoot, f), 'utf8')));
}

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  output: string;
  timedOut: boolean;
}

export interface RunOptions {
  repoRoot: string;
  url: string;
  token: string;
  timeoutMs: number;
}

/** Runs one example in a fresh folder; resolves with its exit and its output (stdout and stderr, interleaved). */
export function runExample(ex: Pick<Example, 'lang' | 'body'>, opts: RunOptions): Promise<RunResult> {
  const dir = tempDir('browserd-example-');
  symlinkSync(path.join(opts.repoRoot, 'node_modules'), path.join(dir, 'node_modules'));
  symlinkSync(path.join(opts.repoRoot, 'fixtures'), path.join(dir, 'fixtures'));
  const home = path.join(dir, '.home');
  mkdirSync(home);
  // curl: an HTTP error status (4xx, 5xx) is a failed command, as a thrown error is for the SDK.
  writeFileSync(path.join(home, '.curlrc'), 'fail-with-body\nshow-error\n');
  let cmd: string;
  let args: string[];
  if (ex.lang === 'sh') {
    writeFileSync(path.join(dir, 'example.sh'), ex.body);
    cmd = 'bash';
    args = ['-euo', 'pipefail', 'example.sh'];
  } else {
    const file = ex.lang === 'ts' ? 'example.mts' : 'example.mjs';
    writeFileSync(path.join(dir, file), ex.body);
    cmd = process.execPath;
    args = [file];
  }
  const env: NodeJS.ProcessEnv = {
    PATH: `${path.dirname(process.execPath)}:${process.env.PATH ?? '/usr/bin:/bin'}`,
    HOME: home,
    CURL_HOME: home,
    LANG: 'C.UTF-8',
    TMPDIR: dir,
    BROWSERD_URL: opts.url,
    BROWSERD_TOKEN: opts.token,
  };
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let output = '';
    const take = (b: Buffer): void => {
      output += b.toString();
    };
    child.stdout.on('data', take);
    child.stderr.on('data', take);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    }, opts.timeoutMs);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      // Whatever the example left in its group (a background job) goes with it.
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // the group is gone
      }
      resolve({ code, signal, output, timedOut });
    });
  });
}

/**
 * Relative links of README.md and docs/*.md whose file does not exist (`file -> link`), but for the
 * targets named in `pending` (pages another change writes). Anchors are not checked.
 */
export function brokenLinks(repoRoot: string, pending: readonly string[] = []): string[] {
  const out: string[] = [];
  for (const f of docFiles(repoRoot)) {
    const text = readFileSync(path.join(repoRoot, f), 'utf8');
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const link = m[1];
      if (/^[a-z]+:/i.test(link) || link.startsWith('#')) continue;
      const target = path.normalize(path.join(path.dirname(f), link.split('#')[0]));
      if (pending.includes(target)) continue;
      if (!existsSync(path.join(repoRoot, target))) out.push(`${f} -> ${link}`);
    }
  }
  return out;
}
