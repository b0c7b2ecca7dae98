// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// Units of Playwright execution: the key ring's ephemeral keys (a runner's token: scope cdp only,
// revoked), the runner's result serialisation, its output capture, and its compiler (esbuild).
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { stop as stopEsbuild } from 'esbuild';
import { loadConfig } from '../../daemon/core/config.js';
import { createLogger } from '../../daemon/core/log.js';
import { KeyRing } from '../../daemon/http/auth.js';
import { Capture, ResultError, resultJson } from '../../daemon/playwright/runner/capture.js';
import { CompileError, compile } from '../../daemon/playwright/runner/compile.js';
import { scratchDirs } from '../kit/cleanup.js';

const scratch = scratchDirs('browserd-pw-units-');
after(() => stopEsbuild());

test('an ephemeral key authenticates with its own scopes only, until revoked; ids are unique', () => {
  const config = loadConfig({ PATH: process.env.PATH, BROWSERD_STATE_DIR: scratch(), BROWSERD_TOKEN: 'main-token-0123456789abcdef' });
  const ring = KeyRing.create(config, createLogger('silent'));
  const revoke = ring.addEphemeral('playwright-runner-1', 'runner-token-abcdefghijklmnop', ['cdp']);
  const id = ring.authenticate('Bearer runner-token-abcdefghijklmnop');
  assert.equal(id.keyId, 'playwright-runner-1');
  assert.deepEqual([...id.scopes], ['cdp']);
  assert.equal(id.project, null);
  assert.equal(ring.authenticate('Bearer main-token-0123456789abcdef').keyId, 'env-token');
  assert.throws(() => ring.addEphemeral('playwright-runner-1', 'other-token-abcdefghijklmnop', ['cdp']));
  revoke();
  revoke();
  assert.throws(() => ring.authenticate('Bearer runner-token-abcdefghijklmnop'), { code: 'unauthorized' });
  const again = ring.addEphemeral('playwright-runner-1', 'new-token-abcdefghijklmnopq', ['cdp']);
  revoke(); // an old revoke does not remove the new key of the same id
  assert.equal(ring.authenticate('Bearer new-token-abcdefghijklmnopq').keyId, 'playwright-runner-1');
  again();
});

test('the result: JSON, undefined left out; functions, symbols, BigInts and cycles named; the size limit', () => {
  assert.equal(resultJson({ a: [1, 'x', null], d: new Date(0) }, 1000), '{"a":[1,"x",null],"d":"1970-01-01T00:00:00.000Z"}');
  assert.equal(resultJson(undefined, 10), undefined);
  assert.equal(resultJson({ u: undefined }, 10), '{}');
  assert.throws(() => resultJson({ nested: { go: () => 1 } }, 1000), (e: Error) => e instanceof ResultError && /function \(at key "go"\)/.test(e.message));
  assert.throws(() => resultJson(() => 1, 1000), /holds a function, which JSON cannot carry/);
  assert.throws(() => resultJson({ s: Symbol('x') }, 1000), /symbol/);
  assert.throws(() => resultJson({ n: 10n }, 1000), /BigInt \(at key "n"\)/);
  const cycle: Record<string, unknown> = {};
  cycle.self = cycle;
  assert.throws(() => resultJson(cycle, 1000), /not JSON-serialisable: Converting circular structure/);
  assert.throws(() => resultJson('x'.repeat(20), 10), /22 bytes of JSON, over the limit of 10/);
});

test('output capture: forwarded up to the limit per stream (whole characters), the rest counted', () => {
  const sent: [string, string][] = [];
  const c = new Capture(10, { forward: (stream, data) => void sent.push([stream, data]) });
  c.write('stdout', 'hello ');
  c.write('stdout', 'wörld!'); // ö is 2 bytes: 6 + 4 bytes fit ("wör"), "ld!" is counted
  c.write('stdout', 'more');
  c.write('stderr', Buffer.from('err'));
  assert.deepEqual(sent, [
    ['stdout', 'hello '],
    ['stdout', 'wör'],
    ['stderr', 'err'],
  ]);
  assert.deepEqual(c.truncated, { stdout: 3 + 4, stderr: 0 });
});

test('compile: TypeScript to a function of (page, context, browser); a syntax error names the line of the code; the same source compiles once', async () => {
  const fn = compile('const n: number = page as number;\nreturn [n, context, browser];');
  assert.deepEqual(await fn(1, 2, 3), [1, 2, 3]);
  assert.equal(compile('const n: number = page as number;\nreturn [n, context, browser];'), fn);
  assert.throws(() => compile('let a = 1;\nlet b = ;'), (e: Error) => e instanceof CompileError && /^SyntaxError: Expression expected \(line 2, column 9: let b = ;\)$/.test(e.message));
  assert.throws(() => compile('let a = 1;\nif (a) {'), (e: Error) => e instanceof CompileError && /\(at the end of the code: is a bracket or brace left open\?\)$/.test(e.message));
  assert.throws(() => compile('enum E { A }'), (e: Error) => e instanceof CompileError && /enum is not supported in strip-only mode \(line 1, column 1: enum E \{ A \}\)$/.test(e.message));
  assert.throws(() => compile('import fs from "node:fs";'), CompileError);
  // Types are blanked out in place: a runtime error's line is the caller's (+1, the wrapper's first line).
  const at = compile('const a: number = 1;\nconst b: { c: number } = page as any;\nreturn b.c.d.e;');
  await assert.rejects(at(undefined, null, null), (e: Error) => e instanceof TypeError && /<anonymous>:4:10\)/.test(e.stack ?? ''));
});
