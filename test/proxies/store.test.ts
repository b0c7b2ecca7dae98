// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// @long: one of the slowest files (10 s or more alone), started first by test/run.mjs.
// The proxy store loses nothing: atomic writes survive SIGKILL at random moments, a broken file
// at start is kept aside and reported, and what a 201 acknowledged survives kill -9 of the daemon.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createProxy } from '../helpers/proxies/servers.js';
import { RECORDS_PER_GENERATION } from '../helpers/proxies/store-writer.js';
import { tempDir } from '../kit/cleanup.js';
import { startDaemon } from '../kit/daemon.js';

const writerJs = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'helpers', 'proxies', 'store-writer.js');
const ROUNDS = 20;

type Gen = [round: number, n: number];
const parseGen = (s: string): Gen => s.split('.').map(Number) as Gen;
const fmt = (g: Gen | null): string => (g === null ? 'none' : `${g[0]}.${g[1]}`);

/** Reads the store file: it must parse and hold one whole generation. */
function readGeneration(file: string): string {
  if (!existsSync(file)) return 'none';
  const data = JSON.parse(readFileSync(file, 'utf8')) as { version: number; proxies: { name: string }[] };
  assert.equal(data.version, 1);
  assert.equal(data.proxies.length, RECORDS_PER_GENERATION);
  const names = new Set(data.proxies.map((p) => p.name));
  assert.equal(names.size, 1, `one generation in the file, got ${[...names].join(', ')}`);
  return [...names][0]?.slice(4) ?? 'none';
}

test('the store file survives SIGKILL at random moments of a write loop: always the old or the new state', async (t) => {
  const dir = tempDir();
  const file = path.join(dir, 'proxies.json');
  let onFile = 'none';
  let caughtBetween = 0;
  let writes = 0;
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      const child = spawn(process.execPath, [writerJs, dir, String(round)], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      child.stderr.on('data', (c: Buffer) => (err += c.toString()));
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      const started = new Promise<string>((resolve, reject) => {
        child.stdout.on('data', (c: Buffer) => {
          out += c.toString();
          const m = /^start (\S+)\n/.exec(out);
          if (m) resolve(m[1] as string);
        });
        void exited.then(() => reject(new Error(`the writer exited before it started: ${err}`)));
      });
      const startedWith = await started;
      assert.equal(startedWith, onFile, 'the writer opened the last state that was on file');
      // The moment of the kill is what is random here; nothing is asserted on time.
      await new Promise((r) => setTimeout(r, Math.floor(Math.random() * 150)));
      child.kill('SIGKILL');
      await exited;
      const done = [...out.matchAll(/^done (\S+)$/gm)].map((m) => m[1] as string);
      writes += done.length;
      const lastDone: Gen | null = done.length > 0 ? parseGen(done.at(-1) as string) : null;
      const allowed = lastDone === null ? [onFile, `${round}.1`] : [fmt(lastDone), fmt([round, lastDone[1] + 1])];
      const now = readGeneration(file);
      assert.ok(allowed.includes(now), `round ${round}: the file holds ${now}, expected one of ${allowed.join(', ')}`);
      if (now !== allowed[0]) caughtBetween++;
      onFile = now;
      const names = readdirSync(dir);
      assert.deepEqual(names.filter((n) => n.includes('.broken-')), [], 'never a broken file');
      assert.ok(names.filter((n) => n.includes('.tmp-')).length <= 1, `at most one unfinished temp file: ${names.join(', ')}`);
      if (existsSync(file)) assert.equal(statSync(file).mode & 0o777, 0o600);
    }
    t.diagnostic(`${ROUNDS} kills, ${writes} acknowledged writes, ${caughtBetween} kills after a rename but before its acknowledgement`);
    assert.ok(writes > 0, 'the writer wrote');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a broken store file at start is kept aside, reported, and not overwritten', async () => {
  for (const broken of ['{"version":1,"proxies":[{"id":', '{"version":1,"proxies":[{"id":1}]}', '[]']) {
    const dir = tempDir();
    const file = path.join(dir, 'proxies.json');
    writeFileSync(file, broken, { mode: 0o600 });
    const d = await startDaemon({ stateDir: dir });
    try {
      const line = await d.waitLog((l) => l.event === 'proxy_store_broken');
      const keptAs = String(line.kept_as);
      assert.equal(path.dirname(keptAs), dir);
      assert.match(path.basename(keptAs), /^proxies\.json\.broken-/);
      assert.equal(readFileSync(keptAs, 'utf8'), broken, 'the broken content is kept as it was');
      assert.equal(typeof line.reason, 'string');
      assert.equal(line.level, 50, 'logged as an error');
      assert.ok(!existsSync(file));
      const list = await d.fetch('/proxies');
      assert.deepEqual(await list.json(), []);
      await createProxy(d, { type: 'datacenter' });
      assert.equal((JSON.parse(readFileSync(file, 'utf8')) as { proxies: unknown[] }).proxies.length, 1);
      assert.equal(readFileSync(keptAs, 'utf8'), broken, 'still kept after the first write');
    } finally {
      await d.cleanup();
      rmSync(dir, { recursive: true, force: true });
    }
  }
});

test('what a 201 acknowledged survives kill -9 of the daemon and a restart', async () => {
  const dir = tempDir();
  try {
    const d1 = await startDaemon({ stateDir: dir });
    const ids = [
      await createProxy(d1, { type: 'datacenter', name: 'one' }),
      await createProxy(d1, { type: 'custom', protocol: 'http', config: { host: '127.0.0.1', port: 3128, username: 'u', password: 'secret1' } }),
      await createProxy(d1, { type: 'residential', config: { country: 'US', city: 'denver' } }),
    ];
    const del = await d1.fetch(`/proxies/${ids[0]}`, { method: 'DELETE' });
    assert.equal(del.status, 204);
    const before = await (await d1.fetch('/proxies')).json();
    d1.proc.kill('SIGKILL');
    await d1.waitExit();
    const file = path.join(dir, 'proxies.json');
    assert.equal(statSync(file).mode & 0o777, 0o600);
    const d2 = await startDaemon({ stateDir: dir });
    try {
      const line = await d2.waitLog((l) => l.event === 'proxy_store_loaded');
      assert.equal(line.proxies, 2);
      assert.deepEqual(await (await d2.fetch('/proxies')).json(), before);
      const custom = (await (await d2.fetch(`/proxies/${ids[1]}`)).json()) as { config: { has_password: boolean } };
      assert.equal(custom.config.has_password, true, 'the write-only password was kept');
    } finally {
      await d2.cleanup();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
