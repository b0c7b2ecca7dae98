// @long: one of the slowest files (10 s or more alone), started first by test/run.mjs.
// Playwright execution through the SDK, against the real daemon, the real Chromium and real runner
// processes: page.title() of a loopback page, console capture, TypeScript, errors (thrown, syntax,
// a result that is not JSON, over the limit), output caps, the timeout that kills the runner and the
// call after it, a runner killed from outside and replaced, a Chromium restart between two calls,
// the pool's 429, the runner's environment (no token) and the scope.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, test } from 'node:test';
import Kernel from '@onkernel/sdk';
import { execFileSync, spawn } from 'node:child_process';
import { expectError } from '../helpers/http.js';
import { waitBrowser } from '../kit/browser.js';
import { agentTempDir } from '../kit/agent.js';
import { tempDir } from '../kit/cleanup.js';
import { keysFile, TEST_TOKEN, repoRoot, startDaemon, type Daemon } from '../kit/daemon.js';
import { isAlive } from '../kit/procs.js';
import { until } from '../kit/wait.js';

const OUTPUT_LIMIT = 4096;
const RESULT_LIMIT = 65_536;
const READER = 'pw-reader-token-0123456789abcdef';
const dir = agentTempDir('browserd-pw-'); // the runners (the agent user) write there
let d: Daemon;
let client: Kernel;
let site: Server;
let siteUrl = '';

const execute = (code: string, timeout_sec?: number) => client.browsers.playwright.execute('local', timeout_sec === undefined ? { code } : { code, timeout_sec });
/** The pid of the runner that answers (it runs one execution at a time). */
const runnerPid = async (): Promise<number> => {
  const r = await execute('return process.pid');
  assert.equal(r.success, true, r.error);
  return r.result as number;
};

before(async () => {
  site = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' }).end(`<!doctype html><title>Hello browserd ${req.url}</title><p>hi</p>`);
  });
  await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
  siteUrl = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
  d = await startDaemon({
    autostart: true,
    env: {
      BROWSERD_KEYS_FILE: keysFile([{ id: 'reader', token: READER, scopes: ['browser:read', 'cdp'] }]),
      BROWSERD_PLAYWRIGHT_OUTPUT_LIMIT_BYTES: String(OUTPUT_LIMIT),
      BROWSERD_PLAYWRIGHT_RESULT_LIMIT_BYTES: String(RESULT_LIMIT),
      BROWSERD_PLAYWRIGHT_MAX_HEAP_MB: '128',
    },
  });
  await waitBrowser(d, (s) => s.state === 'ready', 'ready');
  client = new Kernel({ apiKey: TEST_TOKEN, baseURL: d.url, maxRetries: 0, timeout: 120_000 });
});
after(async () => {
  await d.cleanup();
  await new Promise<void>((resolve) => site.close(() => resolve()));
});

test('execute: page.goto of a loopback page and `return await page.title()`', async () => {
  const r = await execute(`await page.goto('${siteUrl}/one'); return await page.title();`);
  const { tab, ...rest } = r as typeof r & { tab: { target_id: string; created: boolean } | null };
  assert.deepEqual(rest, { success: true, result: 'Hello browserd /one', stdout: '', stderr: '', stdout_truncated_bytes: 0, stderr_truncated_bytes: 0, executor: 'default' });
  assert.match(tab?.target_id ?? '', /^[0-9A-F]{32}$/, 'the tab it ran in');
  // The same page stays: the next execution sees where the last one went.
  const again = await execute('return [page.url(), context.pages().length > 0, browser.isConnected()]');
  assert.deepEqual(again.result, [`${siteUrl}/one`, true, true]);
});

test('console.* goes to stdout and stderr of the answer, not to the daemon log', async () => {
  const r = await execute('console.log("to stdout", 1); console.info("info"); console.error("to stderr"); console.warn("warn"); process.stdout.write("raw\\n"); return 7');
  assert.equal(r.success, true);
  assert.equal(r.result, 7);
  assert.equal(r.stdout, 'to stdout 1\ninfo\nraw\n');
  assert.equal(r.stderr, 'to stderr\nwarn\n');
  assert.ok(!d.logs.some((l) => JSON.stringify(l).includes('to stdout 1')), 'the output is not in the daemon log');
});

test('TypeScript syntax is accepted (types stripped); undefined leaves result out, null is kept', async () => {
  const ts = await execute('interface P { n: number }\nconst p: P = { n: 41 };\nconst f = (x: number): number => x + 1;\nreturn f(p.n) as number;');
  assert.equal(ts.success, true, ts.error);
  assert.equal(ts.result, 42);
  const none = await execute('const x = 1;');
  assert.equal(none.success, true);
  assert.ok(!('result' in none), JSON.stringify(none));
  const nil = await execute('return null');
  assert.equal(nil.result, null);
});

test('a thrown error is success: false with its message, and its stack on stderr', async () => {
  const r = await execute('console.log("before");\nthrow new TypeError("boom " + 40 + 2)');
  assert.equal(r.success, false);
  assert.equal(r.error, 'TypeError: boom 402');
  assert.equal(r.stdout, 'before\n');
  assert.match(r.stderr ?? '', /^TypeError: boom 402\n\s+at code:2:\d+/);
  assert.doesNotMatch(r.stderr ?? '', /runner\/main\.js|node:internal/);
  const odd = await execute('throw { reason: 42 }');
  assert.equal(odd.error, 'thrown value: {"reason":42}');
});

test('a syntax error is success: false with Node\'s message and the line of the code', async () => {
  const r = await execute('const ok: number = 1;\nconst x = ;\nreturn x');
  assert.equal(r.success, false);
  assert.match(r.error ?? '', /^SyntaxError: Expression expected \(line 2, column 11: const x = ;\)/);
  const cast = await execute('const y = <number>1;\nreturn y');
  assert.equal(cast.success, false);
  assert.match(cast.error ?? '', /^SyntaxError: The angle-bracket syntax for type assertions.*\(line 1, column \d+: const y = <number>1;\)/);
  const open = await execute('if (true) {\nreturn 1');
  assert.equal(open.success, false);
  assert.match(open.error ?? '', /SyntaxError/);
});

test('a result that is not JSON is success: false naming why; one over the result limit too', async () => {
  const fn = await execute('return { a: 1, f: () => 2 }');
  assert.equal(fn.success, false);
  assert.match(fn.error ?? '', /function \(at key "f"\)/);
  const cycle = await execute('const a: any = { b: 1 }; a.self = a; return a');
  assert.equal(cycle.success, false);
  assert.match(cycle.error ?? '', /not JSON-serialisable: Converting circular structure/);
  const big = await execute(`return 'x'.repeat(${RESULT_LIMIT + 10})`);
  assert.equal(big.success, false);
  assert.match(big.error ?? '', new RegExp(`over the limit of ${RESULT_LIMIT}`));
  const date = await execute('return { when: new Date(0), n: 1n.toString() }');
  assert.deepEqual(date.result, { when: '1970-01-01T00:00:00.000Z', n: '1' });
});

test('stdout and stderr are kept up to BROWSERD_PLAYWRIGHT_OUTPUT_LIMIT_BYTES each; the rest is counted', async () => {
  const r = (await execute(`console.log('a'.repeat(${OUTPUT_LIMIT - 100})); console.log('b'.repeat(1000)); console.log('c'.repeat(5000)); console.error('e'); return 1`)) as unknown as Record<string, unknown>;
  assert.equal(r.success, true);
  const stdout = String(r.stdout);
  const written = OUTPUT_LIMIT - 100 + 1 + 1001 + 5001;
  assert.equal(Buffer.byteLength(stdout), OUTPUT_LIMIT, 'kept up to the limit');
  assert.ok(stdout.startsWith(`${'a'.repeat(OUTPUT_LIMIT - 100)}\nbbb`) && !stdout.includes('c'), 'the first bytes are kept');
  assert.equal(r.stdout_truncated_bytes, written - OUTPUT_LIMIT);
  assert.equal(r.stderr, 'e\n');
  assert.equal(r.stderr_truncated_bytes, 0);
});

test('an infinite loop is killed at timeout_sec (the runner\'s group gets SIGKILL) and the next call works', async () => {
  const pid = await runnerPid();
  const r = await execute('console.log("spinning"); while (true) {}', 1);
  assert.equal(r.success, false);
  assert.match(r.error ?? '', /^timed out: the code did not finish within 1 s \(timeout_sec\)/);
  assert.equal(r.stdout, 'spinning\n', 'output written before the timeout is kept');
  await until('the runner gone', () => !isAlive(pid));
  const next = await execute('return 1 + 1');
  assert.deepEqual([next.success, next.result], [true, 2]);
  assert.notEqual(await runnerPid(), pid);
});

test('a runner killed from outside is replaced at the next call', async () => {
  const pid = await runnerPid();
  process.kill(pid, 'SIGKILL');
  await d.waitLog((l) => l.event === 'playwright_runner_exited' && l.child_pid === pid, 30_000);
  const r = await execute('return "alive"');
  assert.deepEqual([r.success, r.result], [true, 'alive']);
  assert.notEqual(await runnerPid(), pid);
});

test('a runner that exits during an execution is success: false with the cause', async () => {
  const r = await execute('console.error("bye"); process.exit(3)');
  assert.equal(r.success, false);
  assert.match(r.error ?? '', /^the runner exited with code 3 during the execution/);
  const next = await execute('return 3');
  assert.equal(next.result, 3);
});

test('a client that goes away before the answer kills the runner (as exec does)', async () => {
  const pid = await runnerPid();
  const mark = path.join(dir, 'abandoned-running');
  const gone = new AbortController();
  const pending = d.fetch('/browsers/local/playwright/execute', {
    method: 'POST',
    json: { code: `(await import('node:fs')).writeFileSync('${mark}', ''); await new Promise(() => {})` },
    signal: gone.signal,
  });
  await until('the execution running', () => existsSync(mark));
  gone.abort();
  await assert.rejects(pending);
  const line = await d.waitLog((l) => l.event === 'playwright_executed' && l.outcome === 'abandoned', 30_000);
  assert.equal(line.child_pid, pid);
  await until('the runner gone', () => !isAlive(pid));
  assert.equal((await execute('return 5')).result, 5);
});

test('a runner that runs out of heap (BROWSERD_PLAYWRIGHT_MAX_HEAP_MB) is success: false with Node\'s report; the API is untouched', async () => {
  const r = await execute('const keep = []; while (true) keep.push(new Array(100_000).fill(Math.random()));');
  assert.equal(r.success, false);
  assert.match(r.error ?? '', /^the runner was killed by SIGABRT during the execution \(its stderr: FATAL ERROR: .*heap out of memory\)/);
  assert.equal((await d.fetch('/healthz')).status, 200);
  assert.equal((await execute('return 4')).result, 4);
});

test('a Chromium restart between two calls: the second succeeds on the same runner, reconnected', async () => {
  const first = await execute(`await page.goto('${siteUrl}/before'); return await page.title()`);
  assert.equal(first.result, 'Hello browserd /before');
  const pid = await runnerPid();
  const before = await waitBrowser(d, (s) => s.state === 'ready', 'ready');
  const res = await d.fetch('/browsers/local/restart', { method: 'POST' });
  assert.equal(res.status, 200, await res.text());
  const after = await waitBrowser(d, (s) => s.state === 'ready', 'ready');
  assert.notEqual(after.chromium.pid, before.chromium.pid);
  const second = await execute(`await page.goto('${siteUrl}/after'); return await page.title()`);
  assert.equal(second.success, true, second.error);
  assert.equal(second.result, 'Hello browserd /after');
  assert.equal(await runnerPid(), pid, 'the runner reconnected instead of being replaced');
});

test("the runner's environment is the minimal one: no token, no BROWSERD_* (in /proc/<runner>/environ too)", async () => {
  const env = await execute('return process.env');
  const vars = env.result as Record<string, string>;
  assert.deepEqual(Object.keys(vars).filter((k) => k.startsWith('BROWSERD_')), []);
  assert.ok(!JSON.stringify(vars).includes(TEST_TOKEN));
  const pid = await runnerPid();
  const environ = readFileSync(`/proc/${pid}/environ`, 'utf8');
  assert.ok(environ.length > 0);
  assert.ok(!environ.includes(TEST_TOKEN), 'the daemon token is not in the runner environment');
  assert.doesNotMatch(environ, /BROWSERD_|token/i);
  const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  assert.doesNotMatch(cmdline, /token|Bearer/i);
  // The runner's CDP connection uses a key of its own.
  assert.ok(d.logs.some((l) => l.event === 'upgrade' && typeof l.key_id === 'string' && l.key_id.startsWith('playwright-runner-')));
});

test('one execution per runner, BROWSERD_PLAYWRIGHT_RUNNERS (2) at most: the third at once is 429 with Retry-After', async () => {
  const marks = path.join(dir, 'marks');
  const release = path.join(dir, 'release');
  const code = `const fs = await import('node:fs'); fs.mkdirSync('${marks}', { recursive: true }); fs.writeFileSync('${marks}/' + process.pid, '');
    while (!fs.existsSync('${release}')) await new Promise((r) => setTimeout(r, 20)); return process.pid`;
  const running = [execute(code, 60), execute(code, 60)];
  await until('two executions running', () => existsSync(marks) && readdirSync(marks).length === 2);
  const third = await d.fetch('/browsers/local/playwright/execute', { method: 'POST', json: { code: 'return 1' } });
  const body = await expectError(third, 429, 'limit_exceeded');
  assert.match(String(body.message), /BROWSERD_PLAYWRIGHT_RUNNERS=2/);
  assert.equal(third.headers.get('x-should-retry'), 'true');
  assert.ok(Number(third.headers.get('retry-after')) >= 1);
  writeFileSync(release, '');
  const done = await Promise.all(running);
  assert.ok(done.every((r) => r.success));
  assert.notEqual(done[0]?.result, done[1]?.result, 'two runners');
});

test('bad bodies are 400; the scope is playwright:execute', async () => {
  await expectError(await d.fetch('/browsers/local/playwright/execute', { method: 'POST', json: { code: 'return 1', timeout_sec: 601 } }), 400, 'bad_request');
  await expectError(await d.fetch('/browsers/local/playwright/execute', { method: 'POST', json: { code: '' } }), 400, 'bad_request');
  await expectError(await d.fetch('/browsers/local/playwright/execute', { method: 'POST', json: { code: 'return 1', extra: 1 } }), 400, 'bad_request');
  const res = await d.fetch('/browsers/local/playwright/execute', { method: 'POST', json: { code: 'return 1' }, headers: { authorization: `Bearer ${READER}` } });
  const body = await expectError(res, 403, 'forbidden');
  assert.deepEqual(body.details, [{ code: 'missing_scope', message: 'playwright:execute' }]);
});

test('a runner never outlives its parent: when the daemon is gone (SIGKILL), its watchdog ends it and removes its TMPDIR', async () => {
  const runnerJs = path.join(repoRoot, 'dist', 'daemon', 'playwright', 'runner', 'main.js');
  // The TMPDIR the daemon makes for each runner (and would have removed at its end).
  const runnerTmp = mkdtempSync(path.join(tmpdir(), 'browserd-runner-'));
  writeFileSync(path.join(runnerTmp, 'left-by-the-code'), 'x');
  // A stand-in daemon starts the runner with a FIFO opened read-write as its stdin and fd 3: the
  // runner holds both ends itself, so nothing it reads ever closes when the stand-in is killed
  // (a pipe from this process would: Node closes a child's stdin at its exit). Only the watchdog
  // can end it.
  const fifo = path.join(tempDir('browserd-test-fifo-'), 'in');
  execFileSync('mkfifo', [fifo]);
  const standIn = spawn(
    process.execPath,
    [
      '-e',
      `const fd = require('node:fs').openSync(${JSON.stringify(fifo)}, 'r+'); const c = require('node:child_process').spawn(process.execPath, [${JSON.stringify(runnerJs)}], { stdio: [fd, 'ignore', 'ignore', fd], detached: true }); process.stdout.write(c.pid + '\\n'); setInterval(() => {}, 1000);`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, TMPDIR: runnerTmp } },
  );
  const pid = Number(await new Promise<string>((resolve) => standIn.stdout?.once('data', (c: Buffer) => resolve(c.toString()))));
  try {
    // Started: the runner sets its OOM score just before its watchdog.
    await until('the runner started', () => {
      try {
        return readFileSync(`/proc/${pid}/oom_score_adj`, 'utf8').trim() === '1000';
      } catch {
        return false;
      }
    });
    assert.ok(isAlive(pid));
    standIn.kill('SIGKILL');
    await until('the orphaned runner gone', () => !isAlive(pid), 10_000);
    assert.ok(!existsSync(runnerTmp), 'the runner\'s TMPDIR is removed');
  } finally {
    rmSync(runnerTmp, { recursive: true, force: true });
    standIn.kill('SIGKILL');
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone, as it should be
    }
  }
});

test('daemon shutdown (SIGTERM) ends its runners', async () => {
  const other = await startDaemon({ autostart: true });
  try {
    await waitBrowser(other, (s) => s.state === 'ready', 'ready');
    const c = new Kernel({ apiKey: TEST_TOKEN, baseURL: other.url, maxRetries: 0, timeout: 120_000 });
    const r = await c.browsers.playwright.execute('local', { code: 'return process.pid' });
    const pid = r.result as number;
    assert.ok(isAlive(pid));
    assert.deepEqual(await other.stop(), { code: 0, signal: null });
    assert.ok(!isAlive(pid), 'the runner is gone when the daemon has exited');
    assert.ok(other.logs.some((l) => l.event === 'playwright_runner_exited' && l.child_pid === pid));
  } finally {
    await other.cleanup();
  }
});
