// @long: one of the slowest files (10 s or more alone), started first by test/run.mjs.
// Chromium's TMPDIR is emptied at every launch and stop (daemon/chromium/run.ts emptyDir). A large
// one takes a while to remove: the event loop must keep answering meanwhile (a blocked loop also
// starves systemd's watchdog), so a request made while the removal runs is answered before it ends.
import assert from 'node:assert/strict';
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { test } from 'node:test';
import { emptyDir } from '../../daemon/chromium/run.js';
import { tempDir } from '../kit/cleanup.js';
import { startDaemon } from '../kit/daemon.js';
import { until } from '../kit/wait.js';

/** Folders × files of the TMPDIR made here: what a Chromium session can leave (caches, crash dumps). */
const FOLDERS = 100;
const FILES = 100;

/** Fills `dir` with `folders` × `files` one-byte files. */
function fill(dir: string, folders: number, files: number): void {
  mkdirSync(dir, { recursive: true });
  for (let i = 0; i < folders; i++) {
    const sub = path.join(dir, `d${i}`);
    mkdirSync(sub);
    for (let j = 0; j < files; j++) writeFileSync(path.join(sub, `f${j}`), 'x');
  }
}

test('a request made while a large TMPDIR is removed is answered before the removal ends', async () => {
  const dir = tempDir('browserd-chromium-tmp-');
  fill(dir, FOLDERS, FILES);
  const events: string[] = [];
  const server = createServer((_req, res) => {
    events.push('request answered');
    res.end('ok');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const removal = Promise.resolve(emptyDir(dir)).then(() => events.push('removal ended'));
    const { port } = server.address() as AddressInfo;
    const answer = fetch(`http://127.0.0.1:${port}/`).then(async (r) => {
      await r.text();
      events.push('response read');
    });
    await Promise.all([removal, answer]);
    assert.deepEqual(events, ['request answered', 'response read', 'removal ended']);
    assert.deepEqual(readdirSync(dir), [], 'the folder is emptied');
  } finally {
    server.close();
  }
});

test('through the API: a request made while a launch empties a large TMPDIR is answered while entries remain', async () => {
  const d = await startDaemon();
  try {
    const tmp = path.join(d.agentDir, 'tmp'); // core/state-dir.ts chromiumTmpDir (in the agent dir)
    const folders = 400;
    fill(tmp, folders, 50);
    const launch = d.fetch('/browsers/local/restart', { method: 'POST' });
    // The launch has begun emptying it: a folder is gone.
    await until('the TMPDIR removal to begin', () => readdirSync(tmp).length < folders || undefined, 60_000, 5);
    assert.equal((await d.fetch('/healthz')).status, 200);
    // Answered before the removal ended (a removal that blocks the event loop answers only after).
    assert.ok(readdirSync(tmp).length > 0, 'the TMPDIR was already empty when the answer came');
    assert.equal((await launch).status, 200);
    assert.deepEqual(readdirSync(tmp).filter((n) => /^d\d+$/.test(n)), [], 'every entry of the old run is removed');
  } finally {
    await d.cleanup();
  }
});
