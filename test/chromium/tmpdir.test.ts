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

/** Folders × files of the TMPDIR made here: what a Chromium session can leave (caches, crash dumps). */
const FOLDERS = 100;
const FILES = 100;

test('a request made while a large TMPDIR is removed is answered before the removal ends', async () => {
  const dir = tempDir('browserd-chromium-tmp-');
  for (let i = 0; i < FOLDERS; i++) {
    const sub = path.join(dir, `d${i}`);
    mkdirSync(sub);
    for (let j = 0; j < FILES; j++) writeFileSync(path.join(sub, `f${j}`), 'x');
  }
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
