// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The passwd lookup of as_user (daemon/processes/launch/user-env.ts): the file is parsed once and
// read again only when it changes (inode, size or mtime), not at every spawn.
import assert from 'node:assert/strict';
import { renameSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { userInfo } from 'node:os';
import { resolveUser } from '../../daemon/processes/launch/user-env.js';
import { tempDir } from '../kit/cleanup.js';

const me = userInfo();
/** The agent: the test's own user (nothing to switch to). */
const users = { agent: { name: me.username, uid: me.uid, gid: me.gid, home: me.homedir, shell: '/bin/sh' }, maySwitch: true };
/** A passwd line for "alice" with the test's own ids (so any daemon user may "switch" to her) and `home`. */
const line = (home: string): string => `root:x:0:0:root:/root:/bin/sh\nalice:x:${me.uid}:${me.gid}::${home}:/bin/sh\n`;
/** A fixed mtime, so that a rewrite can keep it. */
const T = 1_700_000_000;

test('a changed passwd file is read again; an unchanged one is not', async () => {
  const dir = tempDir('browserd-passwd-');
  const file = path.join(dir, 'passwd');
  writeFileSync(file, line('/home/a1'));
  utimesSync(file, T, T);
  assert.equal((await resolveUser('alice', false, users, file)).home, '/home/a1');

  // Replaced as useradd does (a new file renamed over the old one): read again.
  writeFileSync(`${file}+`, line('/home/a2'));
  renameSync(`${file}+`, file);
  utimesSync(file, T, T);
  assert.equal((await resolveUser('alice', false, users, file)).home, '/home/a2');

  // Rewritten in place to the same size, its mtime put back: the same file as far as the cache
  // can tell, so it is not read again (the old home is still the answer).
  writeFileSync(file, line('/home/a3'));
  utimesSync(file, T, T);
  assert.equal((await resolveUser('alice', false, users, file)).home, '/home/a2');

  // A new mtime: read again.
  utimesSync(file, T + 1, T + 1);
  assert.equal((await resolveUser('alice', false, users, file)).home, '/home/a3');

  await assert.rejects(resolveUser('bob', false, users, file), /no user "bob"/);
});
