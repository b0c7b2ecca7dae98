// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The files API never reaches the daemon's state directory, its secret files, /proc, /sys or
// /dev, whatever the spelling of the path: symlinks (in the path, last, relative, chained), `..`,
// `//`, /proc/self/root/…, /proc/<daemon pid>/cwd, hard links (made by the test and by a command
// run through exec). Every route is tried; nothing is read, written, listed or changed there.
// Also the scopes: fs:read and fs:write.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, linkSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { expectError } from '../helpers/http.js';
import { buildZip } from '../helpers/zip.js';
import { agentScratchDirs } from '../kit/agent.js';
import { keysFile, TEST_TOKEN, startDaemon, type Daemon } from '../kit/daemon.js';

const scratch = agentScratchDirs('browserd-fs-guard-');
const F = '/browsers/local/fs';
const q = (p: string): string => `?path=${encodeURIComponent(p)}`;

async function forbidden(res: Response, rule: string): Promise<void> {
  const body = await expectError(res, 403, 'path_forbidden');
  assert.equal((body.inner_error as { code: string }).code, rule, JSON.stringify(body));
}

function multipart(fields: [string, string | { data: Buffer; filename: string }][]): FormData {
  const form = new FormData();
  for (const [k, v] of fields) {
    if (typeof v === 'string') form.append(k, v);
    else form.append(k, new Blob([v.data]), v.filename);
  }
  return form;
}

describe('escapes into the state directory', () => {
  let d: Daemon;
  let dir: string;
  let state: string;
  let token: string;
  const snapshot = (): string => createHash('sha256').update(JSON.stringify(readdirSync(state, { recursive: true }).sort())).digest('hex');
  let before0: string;

  before(async () => {
    dir = scratch();
    state = path.join(dir, 'state');
    mkdirSync(state);
    d = await startDaemon({ stateDir: state, token: null });
    token = readFileSync(path.join(state, 'token'), 'utf8').trim();
    mkdirSync(path.join(state, 'extensions', 'keys'), { recursive: true });
    writeFileSync(path.join(state, 'extensions', 'keys', 'x.pem'), 'PRIVATE KEY');
    mkdirSync(path.join(dir, 'sub'));
    symlinkSync(state, path.join(dir, 'link-dir'));
    symlinkSync(path.join(state, 'token'), path.join(dir, 'link-token'));
    symlinkSync(`../${path.basename(dir)}/state/token`, path.join(dir, 'rel-link'));
    symlinkSync(path.join(dir, 'link-dir'), path.join(dir, 'chain'));
    linkSync(path.join(state, 'token'), path.join(dir, 'hard-token'));
    linkSync(path.join(state, 'extensions', 'keys', 'x.pem'), path.join(dir, 'hard-key'));
    before0 = snapshot();
  });
  after(() => d.cleanup());

  const f = (route: string, init: RequestInit & { json?: unknown } = {}): Promise<Response> =>
    d.fetch(route, { ...init, headers: { authorization: `Bearer ${token}`, ...(init.headers as Record<string, string>) } });

  const tokenSpellings = (): [string, string][] => {
    const base = path.basename(dir);
    return [
      [path.join(state, 'token'), 'state_dir'],
      [`/${state}//token`, 'state_dir'],
      [`${dir}/sub/../state/./token`, 'state_dir'],
      [`${dir}/link-dir/../state/token`, 'state_dir'],
      [`${dir}/../${base}/state/token`, 'state_dir'],
      [path.join(dir, 'link-dir', 'token'), 'state_dir'],
      [path.join(dir, 'chain', 'token'), 'state_dir'],
      [path.join(dir, 'link-token'), 'state_dir'],
      [path.join(dir, 'rel-link'), 'state_dir'],
      [`/proc/self/root${state}/token`, 'special_filesystem'],
      [`/proc/${d.pid}/root${state}/token`, 'special_filesystem'],
      [`/proc/${d.pid}/cwd`, 'special_filesystem'],
      ['/proc/self/environ', 'special_filesystem'],
      [`/proc/${d.pid}/environ`, 'special_filesystem'],
      ['/dev/null', 'special_filesystem'],
      ['/sys/kernel/mm/transparent_hugepage/enabled', 'special_filesystem'],
      [path.join(dir, 'hard-token'), 'protected_file'],
      [path.join(dir, 'hard-key'), 'protected_file'],
    ];
  };

  test('read_file and file_info refuse every spelling', async () => {
    for (const [p, rule] of tokenSpellings()) {
      await forbidden(await f(`${F}/read_file${q(p)}`), rule);
      await forbidden(await f(`${F}/file_info${q(p)}`), rule);
    }
  });

  test('a hard link made by a command run through exec is refused too', async () => {
    const link = path.join(dir, 'exec-link');
    // The agent user cannot even reach the token (test/security/sides.test.ts): only a root command (processes:root) can link it.
    const agent = await f('/browsers/local/process/exec', { method: 'POST', json: { command: 'ln', args: [path.join(state, 'token'), link] } });
    const refused = (await agent.json()) as { exit_code: number; stderr_b64: string };
    assert.equal(refused.exit_code, 1);
    assert.match(Buffer.from(refused.stderr_b64, 'base64').toString(), /Permission denied/);
    const res = await f('/browsers/local/process/exec', { method: 'POST', json: { command: 'ln', args: [path.join(state, 'token'), link], as_root: true } });
    assert.equal(((await res.json()) as { exit_code: number }).exit_code, 0);
    await forbidden(await f(`${F}/read_file${q(link)}`), 'protected_file');
    await forbidden(await f('/browsers/local/fs/set_file_permissions', { method: 'PUT', json: { path: link, mode: '644' } }), 'protected_file');
    assert.equal(statSync(path.join(state, 'token')).mode & 0o777, 0o600);
  });

  test('listings, archives and folder routes of the state dir are refused', async () => {
    for (const p of [state, path.join(dir, 'link-dir'), `${dir}/sub/../state`, `/proc/self/root${state}`]) {
      await forbidden(await f(`${F}/list_files${q(p)}`), p.startsWith('/proc') ? 'special_filesystem' : 'state_dir');
      await forbidden(await f(`${F}/download_dir_zip${q(p)}`), p.startsWith('/proc') ? 'special_filesystem' : 'state_dir');
      await forbidden(await f(`${F}/watch`, { method: 'POST', json: { path: p, recursive: true } }), p.startsWith('/proc') ? 'special_filesystem' : 'state_dir');
    }
  });

  test('a listing or an archive of the parent leaves out the state dir and the hard links', async () => {
    const list = (await (await f(`${F}/list_files${q(dir)}`)).json()) as { name: string }[];
    const names = list.map((e) => e.name);
    assert.ok(!names.includes('state') && !names.includes('hard-token') && !names.includes('hard-key'), names.join(','));
    assert.ok(names.includes('link-dir'), 'a symlink is listed as a link (never followed)');
    const zip = Buffer.from(await (await f(`${F}/download_dir_zip${q(dir)}`)).arrayBuffer());
    assert.ok(!zip.includes('state/') && !zip.includes(token) && !zip.includes('PRIVATE KEY') && !zip.includes('hard-'), 'nothing of the state dir in the archive');
  });

  test('no write reaches the state dir: write, upload, upload_zip, create, move, chmod, delete', async () => {
    const into = [path.join(state, 'new.txt'), path.join(dir, 'link-dir', 'new.txt'), `${dir}/sub/../state/new.txt`];
    for (const p of into) {
      await forbidden(await f(`${F}/write_file${q(p)}`, { method: 'PUT', body: 'pwned' }), 'state_dir');
      await forbidden(await f(`${F}/create_directory`, { method: 'PUT', json: { path: p } }), 'state_dir');
      await forbidden(await f(`${F}/upload`, { method: 'POST', body: multipart([['files[0][dest_path]', p], ['files[0][file]', { data: Buffer.from('x'), filename: 'x' }]]) }), 'state_dir');
      await forbidden(await f(`${F}/upload_zip`, { method: 'POST', body: multipart([['dest_path', p], ['zip_file', { data: buildZip([{ name: 'a', data: 'x' }]), filename: 'a.zip' }]]) }), 'state_dir');
    }
    // A file sent before its destination waits in the spool; it is refused all the same.
    await forbidden(await f(`${F}/upload`, { method: 'POST', body: multipart([['files[0][file]', { data: Buffer.from('x'), filename: 'x' }], ['files[0][dest_path]', into[0] as string]]) }), 'state_dir');
    writeFileSync(path.join(dir, 'mine.txt'), 'mine');
    await forbidden(await f(`${F}/move`, { method: 'PUT', json: { src_path: path.join(dir, 'mine.txt'), dest_path: path.join(state, 'token') } }), 'state_dir');
    await forbidden(await f(`${F}/move`, { method: 'PUT', json: { src_path: path.join(state, 'token'), dest_path: path.join(dir, 'stolen') } }), 'state_dir');
    await forbidden(await f(`${F}/move`, { method: 'PUT', json: { src_path: dir, dest_path: `${dir}-moved` } }), 'state_dir');
    await forbidden(await f(`${F}/set_file_permissions`, { method: 'PUT', json: { path: path.join(dir, 'link-token'), mode: '666' } }), 'state_dir');
    await forbidden(await f(`${F}/delete_file`, { method: 'PUT', json: { path: path.join(state, 'token') } }), 'state_dir');
    await forbidden(await f(`${F}/delete_file`, { method: 'PUT', json: { path: path.join(dir, 'hard-token') } }), 'protected_file');
    await forbidden(await f(`${F}/delete_directory`, { method: 'PUT', json: { path: dir } }), 'state_dir');
    await forbidden(await f(`${F}/delete_directory`, { method: 'PUT', json: { path: state } }), 'state_dir');
    await forbidden(await f(`${F}/write_file${q(path.join(dir, 'hard-token'))}`, { method: 'PUT', body: 'x' }), 'protected_file');
    assert.equal(snapshot(), before0, 'the state dir is as it was');
    assert.equal(readFileSync(path.join(state, 'token'), 'utf8').trim(), token);
    assert.equal(statSync(path.join(state, 'token')).mode & 0o777, 0o600);
    assert.ok(existsSync(path.join(dir, 'mine.txt')) && existsSync(path.join(dir, 'hard-token')));
  });

  test('a recursive watch of the parent reports nothing from inside the state dir', async () => {
    const res = await f(`${F}/watch`, { method: 'POST', json: { path: dir, recursive: true } });
    const { watch_id } = (await res.json()) as { watch_id: string };
    const events = await f(`${F}/watch/${watch_id}/events`);
    writeFileSync(path.join(state, 'secret-change.txt'), 'x');
    writeFileSync(path.join(dir, 'after.txt'), 'y');
    const reader = (events.body as ReadableStream<Uint8Array>).getReader();
    let text = '';
    while (!text.includes('after.txt')) text += new TextDecoder().decode((await reader.read()).value);
    assert.ok(!text.includes('secret-change'), text);
    await reader.cancel();
    assert.equal((await f(`${F}/watch/${watch_id}`, { method: 'DELETE' })).status, 204);
  });
});

describe('protected files outside the state dir, and special files', () => {
  let d: Daemon;
  let dir: string;
  before(async () => {
    dir = scratch();
    keysFile([{ id: 'all', token: TEST_TOKEN, scopes: ['fs:read', 'fs:write'] }], path.join(dir, 'keys.json'));
    writeFileSync(path.join(dir, 'providers.json'), JSON.stringify({ residential: { host: '127.0.0.1', port: 9, username: 'u', password: 'secret-pw' } }));
    d = await startDaemon({ env: { BROWSERD_KEYS_FILE: path.join(dir, 'keys.json'), BROWSERD_PROXY_PROVIDERS_FILE: path.join(dir, 'providers.json') } });
  });
  after(() => d.cleanup());

  test('BROWSERD_KEYS_FILE and BROWSERD_PROXY_PROVIDERS_FILE are never read or replaced', async () => {
    for (const name of ['keys.json', 'providers.json']) {
      await forbidden(await d.fetch(`${F}/read_file${q(path.join(dir, name))}`), 'protected_file');
      await forbidden(await d.fetch(`${F}/write_file${q(path.join(dir, name))}`, { method: 'PUT', body: '[]' }), 'protected_file');
    }
    assert.ok(readFileSync(path.join(dir, 'providers.json'), 'utf8').includes('secret-pw'));
  });

  test('a fifo is not read (no thread waits on it), a symlink loop is 400', async () => {
    const { execFileSync } = await import('node:child_process');
    execFileSync('mkfifo', [path.join(dir, 'fifo')]);
    await forbidden(await d.fetch(`${F}/read_file${q(path.join(dir, 'fifo'))}`), 'special_file');
    symlinkSync('loop-b', path.join(dir, 'loop-a'));
    symlinkSync('loop-a', path.join(dir, 'loop-b'));
    await expectError(await d.fetch(`${F}/read_file${q(path.join(dir, 'loop-a'))}`), 400, 'bad_request');
  });

  test('paths must be absolute, without NUL, not empty', async () => {
    for (const p of ['relative/path', '', 'a\0b', `/${'x'.repeat(5000)}`]) {
      const body = await expectError(await d.fetch(`${F}/file_info${q(p)}`), 400, 'bad_request');
      assert.match(String(body.message), /^path: /);
    }
    await expectError(await d.fetch(`${F}/file_info`), 400, 'bad_request');
    await expectError(await d.fetch(`${F}/move`, { method: 'PUT', json: { src_path: 'rel', dest_path: '/tmp/x' } }), 400, 'bad_request');
  });
});

describe('scopes', () => {
  let d: Daemon;
  const READ = 'fs-reader-token-0123456789';
  const WRITE = 'fs-writer-token-0123456789';
  const NONE = 'no-fs-token-0123456789abc';
  before(async () => {
    const keys = keysFile([
      { id: 'r', token: READ, scopes: ['fs:read'] },
      { id: 'w', token: WRITE, scopes: ['fs:write'] },
      { id: 'n', token: NONE, scopes: ['browser:read', 'processes:exec'] },
    ]);
    d = await startDaemon({ token: null, env: { BROWSERD_KEYS_FILE: keys } });
  });
  after(() => d.cleanup());

  test('fs:read reads, fs:write writes, neither gives the other', async () => {
    const dir = scratch();
    const file = path.join(dir, 'a.txt');
    const as = (t: string, route: string, init: RequestInit & { json?: unknown } = {}): Promise<Response> => d.fetch(route, { ...init, headers: { authorization: `Bearer ${t}` } });
    const writes: [string, RequestInit & { json?: unknown }][] = [
      [`${F}/write_file${q(file)}`, { method: 'PUT', body: 'x' }],
      [`${F}/create_directory`, { method: 'PUT', json: { path: path.join(dir, 'd') } }],
      [`${F}/delete_file`, { method: 'PUT', json: { path: file } }],
      [`${F}/delete_directory`, { method: 'PUT', json: { path: path.join(dir, 'd') } }],
      [`${F}/move`, { method: 'PUT', json: { src_path: file, dest_path: `${file}.2` } }],
      [`${F}/set_file_permissions`, { method: 'PUT', json: { path: file, mode: '600' } }],
      [`${F}/upload`, { method: 'POST', body: new FormData() }],
      [`${F}/upload_zip`, { method: 'POST', body: new FormData() }],
    ];
    const reads: [string, RequestInit & { json?: unknown }][] = [
      [`${F}/read_file${q(file)}`, {}],
      [`${F}/list_files${q(dir)}`, {}],
      [`${F}/file_info${q(file)}`, {}],
      [`${F}/download_dir_zip${q(dir)}`, {}],
      [`${F}/watch`, { method: 'POST', json: { path: dir } }],
      [`${F}/watch/x/events`, {}],
      [`${F}/watch/x`, { method: 'DELETE' }],
      [`${F}/downloads`, {}],
    ];
    for (const [route, init] of writes) {
      for (const t of [READ, NONE]) {
        const body = await expectError(await as(t, route, init), 403, 'forbidden');
        assert.deepEqual(body.details, [{ code: 'missing_scope', message: 'fs:write' }]);
      }
    }
    for (const [route, init] of reads) {
      for (const t of [WRITE, NONE]) {
        const body = await expectError(await as(t, route, init), 403, 'forbidden');
        assert.deepEqual(body.details, [{ code: 'missing_scope', message: 'fs:read' }]);
      }
    }
    assert.equal((await as(WRITE, `${F}/write_file${q(file)}`, { method: 'PUT', body: 'ok' })).status, 204);
    const read = await as(READ, `${F}/read_file${q(file)}`);
    assert.equal(await read.text(), 'ok');
  });
});

test('BROWSERD_DOWNLOADS_DIR inside the state dir (or a symlink into it) stops the start: exit 2, the setting named', async () => {
  const dir = scratch();
  const state = path.join(dir, 'state');
  mkdirSync(state);
  symlinkSync(state, path.join(dir, 'sneaky'));
  for (const downloads of [path.join(state, 'downloads'), path.join(dir, 'sneaky', 'downloads')]) {
    const d = await startDaemon({ stateDir: state, waitListening: false, env: { BROWSERD_DOWNLOADS_DIR: downloads } });
    const line = await d.waitLog((l) => l.event === 'bad_setting');
    assert.equal(line.setting, 'BROWSERD_DOWNLOADS_DIR');
    assert.equal((await d.waitExit()).code, 2);
  }
  assert.equal(existsSync(path.join(state, 'downloads')), false, 'nothing was created in the state dir');
});
