// @long: runs every example of the docs, one after the other, against one real daemon and Chromium.
// Examples that cannot rot: every fenced sh/bash and js/ts block of README.md and docs/*.md runs
// (test/kit/examples.ts says how) against a real daemon with BROWSERD_URL and BROWSERD_TOKEN set, and
// fails the test when it exits non-zero, throws or outlives its deadline. Blocks marked
// `<!-- example: read-only -->` are counted, not run. The runner itself is checked first: a failing
// shell command, a thrown error and an HTTP error answer to curl each fail.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { waitBrowser } from '../kit/browser.js';
import { TEST_TOKEN, repoRoot, startDaemon, type Daemon } from '../kit/daemon.js';
import { READ_ONLY_MARK, allExamples, brokenLinks, docFiles, extractExamples, runExample, type Example, type RunResult } from '../kit/examples.js';

/** One example's deadline: examples are meant to be quick; a stream left following is a broken example. */
const EXAMPLE_TIMEOUT_MS = 60_000;

const examples = allExamples(repoRoot);
const toRun = examples.filter((e) => !e.readOnly);
const readOnly = examples.filter((e) => e.readOnly);

let d: Daemon;
before(async () => {
  d = await startDaemon({ autostart: true, logLevel: 'info' });
  await waitBrowser(d, (s) => s.state === 'ready', 'ready');
});
after(async () => {
  await d.cleanup();
});

const run = (ex: Pick<Example, 'lang' | 'body'>): Promise<RunResult> => runExample(ex, { repoRoot, url: d.url, token: TEST_TOKEN, timeoutMs: EXAMPLE_TIMEOUT_MS });

describe('the extractor', () => {
  test('finds sh/bash/js/ts blocks, their lines and read-only marks, and skips other blocks', () => {
    const md = ['# t', '```sh', 'echo a', '```', '', READ_ONLY_MARK, '```bash', 'rm -rf /', '```', '```json', '{}', '```', '````ts', 'const x = 1;', '```', '````', '```', 'plain', '```', '```javascript', 'x()', '```'].join('\n');
    const found = extractExamples('t.md', md);
    assert.deepEqual(
      found.map((e) => [e.line, e.lang, e.readOnly, e.body]),
      [
        [2, 'sh', false, 'echo a\n'],
        [7, 'sh', true, 'rm -rf /\n'],
        [13, 'ts', false, 'const x = 1;\n```\n'],
        [20, 'js', false, 'x()\n'],
      ],
    );
  });

  test('an unclosed fence is an error naming its line', () => {
    assert.throws(() => extractExamples('t.md', 'a\n```sh\necho\n'), /t\.md:2: a fenced block is never closed/);
  });

  test('the docs have examples to run, and every docs page is read', (t) => {
    assert.ok(docFiles(repoRoot).includes('README.md'));
    assert.ok(toRun.length >= 10, `only ${toRun.length} runnable examples found`);
    const perFile = new Map<string, { run: number; readOnly: number }>();
    for (const e of examples) {
      const c = perFile.get(e.file) ?? { run: 0, readOnly: 0 };
      c[e.readOnly ? 'readOnly' : 'run']++;
      perFile.set(e.file, c);
    }
    for (const [f, c] of perFile) t.diagnostic(`${f}: ${c.run} run, ${c.readOnly} read-only`);
    t.diagnostic(`examples: ${toRun.length} run, ${readOnly.length} read-only, ${examples.length} in all`);
  });
});

test('every relative link of the docs leads to a file', () => {
  // routes.md and fleet.md are written by the other half of issue 31 (the routes index, the fleet page).
  assert.deepEqual(brokenLinks(repoRoot, ['docs/routes.md', 'docs/fleet.md']), []);
});

describe('the runner fails a broken example', () => {
  test('a shell command that fails', async () => {
    const r = await run({ lang: 'sh', body: 'echo before\nfalse\necho after\n' });
    assert.equal(r.code, 1);
    assert.equal(r.output, 'before\n');
  });

  test('a shell pipeline whose first command fails', async () => {
    const r = await run({ lang: 'sh', body: 'false | cat\n' });
    assert.notEqual(r.code, 0);
  });

  test('curl answered with an HTTP error status', async () => {
    const r = await run({ lang: 'sh', body: 'curl -s "$BROWSERD_URL/browsers/local"\n' });
    assert.equal(r.code, 22, r.output);
    assert.match(r.output, /401/);
  });

  test('a module that throws', async () => {
    const r = await run({ lang: 'js', body: "throw new Error('broken example');\n" });
    assert.equal(r.code, 1);
    assert.match(r.output, /broken example/);
  });

  test('a TypeScript module reaches the daemon with the SDK, and a failed call throws', async () => {
    const body = [
      "import Kernel from '@onkernel/sdk';",
      'const k: Kernel = new Kernel({ apiKey: process.env.BROWSERD_TOKEN, baseURL: process.env.BROWSERD_URL, maxRetries: 0 });',
      "console.log((await k.browsers.retrieve('local')).session_id);",
      "await k.browsers.retrieve('not-this-session');",
    ].join('\n');
    const r = await run({ lang: 'ts', body });
    assert.equal(r.code, 1, r.output);
    assert.match(r.output, /^local\n/);
    assert.match(r.output, /404/);
  });
});

describe('the examples of the docs', () => {
  for (const ex of toRun) {
    test(`${ex.file}:${ex.line} (${ex.lang})`, async () => {
      // Each example starts from a ready browser, whatever the one before did to it (a restart, a profile).
      await waitBrowser(d, (s) => s.state === 'ready', 'ready');
      const r = await run(ex);
      assert.ok(!r.timedOut, `${ex.file}:${ex.line} still ran after ${EXAMPLE_TIMEOUT_MS} ms; output:\n${r.output}`);
      assert.equal(r.code, 0, `${ex.file}:${ex.line} exited ${r.code ?? r.signal}; output:\n${r.output}`);
    });
  }
});
