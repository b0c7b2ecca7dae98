// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// upload_zip with every hostile archive the safe unzip knows (each refused with nothing written:
// no destination, no temp folder, no spool file), merging into an existing folder, and multipart
// upload requests that fail leaving nothing behind.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { expectError } from '../helpers/http.js';
import { buildZip, type ZipEntry } from '../helpers/zip.js';
import { agentScratchDirs, giveToAgent } from '../kit/agent.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';

const scratch = agentScratchDirs('browserd-fs-upload-');
const F = '/browsers/local/fs';

let d: Daemon;
before(async () => {
  d = await startDaemon({ env: { BROWSERD_FS_MAX_ZIP_ENTRIES: '20', BROWSERD_FS_MAX_UNPACKED_BYTES: String(1024 * 1024) } });
});
after(() => d.cleanup());

function zipForm(dest: string, zip: Buffer, order: 'dest-first' | 'zip-first' = 'dest-first'): FormData {
  const form = new FormData();
  if (order === 'dest-first') form.append('dest_path', dest);
  form.append('zip_file', new Blob([zip]), 'a.zip');
  if (order === 'zip-first') form.append('dest_path', dest);
  return form;
}

const spoolEmpty = (): void => assert.deepEqual(readdirSync(path.join(d.stateDir, 'fs-spool')), [], 'nothing left in the spool');

describe('upload_zip refuses hostile archives and writes nothing', () => {
  const big = Buffer.alloc(4 * 1024 * 1024);
  const hostile: [string, ZipEntry[] | Buffer, number, string][] = [
    ['zip slip ..', [{ name: 'ok.txt', data: 'ok' }, { name: '../evil.txt', data: 'pwned' }], 422, 'zip_slip'],
    ['zip slip deep ..', [{ name: 'a/../../evil.txt', data: 'pwned' }], 422, 'zip_slip'],
    ['absolute path', [{ name: '/tmp/browserd-fs-evil.txt', data: 'pwned' }], 422, 'zip_slip'],
    ['drive letter', [{ name: 'C:/evil.txt', data: 'pwned' }], 422, 'zip_slip'],
    ['backslash', [{ name: '..\\evil.txt', data: 'x' }], 422, 'bad_entry_name'],
    ['NUL in a name', [{ name: Buffer.from('a\0b.txt', 'latin1'), data: 'x' }], 422, 'bad_entry_name'],
    ['symlink entry', [{ name: 'link', data: '/etc/passwd', mode: 0o120777 }], 422, 'symlink'],
    ['device entry', [{ name: 'dev', data: '', mode: 0o020644 }], 422, 'special_file'],
    ['fifo entry', [{ name: 'fifo', data: '', mode: 0o010644 }], 422, 'special_file'],
    ['encrypted entry', [{ name: 'a.txt', data: 'secret', method: 'store', encrypted: true, declaredCompressedSize: 18 }], 422, 'encrypted'],
    ['too many entries', Array.from({ length: 21 }, (_, i) => ({ name: `f${i}.txt`, data: 'x' })), 422, 'too_many_entries'],
    ['a bomb over the unpacked limit', [{ name: 'bomb.bin', data: big, method: 'deflate' }], 413, ''],
    ['a bomb that lies about its size', [{ name: 'bomb.bin', data: big, method: 'deflate', declaredSize: 100 }], 422, 'size_mismatch'],
    ['sizes that lie', [{ name: 'a.txt', data: 'hello', method: 'store', declaredSize: 3 }], 422, 'size_mismatch'],
    ['a wrong CRC', [{ name: 'a.txt', data: 'hello', crc: 1234 }], 422, 'bad_zip'],
    // Names made of the words an error text was once matched on: classified by type, never by message.
    ['a path out named ../size mismatch', [{ name: '../size mismatch', data: 'x' }], 422, 'zip_slip'],
    ['a symlink named bytes in the stream', [{ name: 'bytes in the stream', data: '/etc/passwd', mode: 0o120777 }], 422, 'symlink'],
    ['a duplicate entry', [{ name: 'a.txt', data: 'a' }, { name: 'a.txt', data: 'b' }], 422, 'duplicate_entry'],
    ['not a zip', Buffer.from('this is not a zip archive at all'), 422, 'bad_zip'],
    ['a truncated zip', ((z: Buffer) => z.subarray(0, z.length - 10))(buildZip([{ name: 'a.txt', data: 'x'.repeat(500) }])), 422, 'bad_zip'],
  ];

  for (const [name, entries, status, cause] of hostile) {
    test(name, async () => {
      const dir = scratch();
      const zip = Buffer.isBuffer(entries) ? entries : buildZip(entries);
      for (const [dest, order] of [
        [path.join(dir, 'new'), 'dest-first'],
        [path.join(dir, 'missing', 'parents', 'new'), 'dest-first'],
        [path.join(dir, 'new'), 'zip-first'],
      ] as const) {
        const res = await d.fetch(`${F}/upload_zip`, { method: 'POST', body: zipForm(dest, zip, order) });
        if (status === 413) await expectError(res, 413, 'payload_too_large');
        else {
          const body = await expectError(res, 422, 'archive_rejected');
          assert.equal((body.inner_error as { code: string }).code, cause, JSON.stringify(body));
        }
        assert.deepEqual(readdirSync(dir), [], `nothing written for ${dest} (${order})`);
      }
      assert.equal(existsSync(path.join(path.dirname(dir), 'evil.txt')), false);
      assert.equal(existsSync('/tmp/browserd-fs-evil.txt'), false);
      spoolEmpty();
    });
  }

  test('into an existing folder: a refused archive changes nothing there', async () => {
    const dir = scratch();
    writeFileSync(path.join(dir, 'keep.txt'), 'keep');
    const res = await d.fetch(`${F}/upload_zip`, { method: 'POST', body: zipForm(dir, buildZip([{ name: 'keep.txt', data: 'replaced' }, { name: '../x', data: 'x' }])) });
    await expectError(res, 422, 'archive_rejected');
    assert.deepEqual(readdirSync(dir), ['keep.txt']);
    assert.equal(readFileSync(path.join(dir, 'keep.txt'), 'utf8'), 'keep');
  });
});

describe('upload_zip into an existing folder', () => {
  test('merges: files replaced, folders merged, the rest kept', async () => {
    const dir = scratch();
    mkdirSync(path.join(dir, 'sub'));
    giveToAgent(path.join(dir, 'sub')); // merged into: a folder the agent user may write in
    writeFileSync(path.join(dir, 'a.txt'), 'old a');
    writeFileSync(path.join(dir, 'sub', 'keep.txt'), 'keep');
    const zip = buildZip([{ name: 'a.txt', data: 'new a' }, { name: 'sub/' }, { name: 'sub/b.txt', data: 'b' }, { name: 'c/d.txt', data: 'd' }]);
    assert.equal((await d.fetch(`${F}/upload_zip`, { method: 'POST', body: zipForm(dir, zip) })).status, 204);
    assert.equal(readFileSync(path.join(dir, 'a.txt'), 'utf8'), 'new a');
    assert.equal(readFileSync(path.join(dir, 'sub', 'b.txt'), 'utf8'), 'b');
    assert.equal(readFileSync(path.join(dir, 'sub', 'keep.txt'), 'utf8'), 'keep');
    assert.equal(readFileSync(path.join(dir, 'c', 'd.txt'), 'utf8'), 'd');
    assert.deepEqual(readdirSync(dir).sort(), ['a.txt', 'c', 'sub'], 'no temp folder left');
  });

  test('a conflict (a file where the archive has a folder, a symlink in the way) is 409 and nothing moves', async () => {
    const dir = scratch();
    writeFileSync(path.join(dir, 'x'), 'a file');
    writeFileSync(path.join(dir, 'a.txt'), 'old');
    mkdirSync(path.join(dir, 'elsewhere'));
    symlinkSync(path.join(dir, 'elsewhere'), path.join(dir, 'link'));
    for (const [entries, code] of [
      [[{ name: 'a.txt', data: 'new' }, { name: 'x/y.txt', data: 'y' }], 'not_a_directory'],
      [[{ name: 'a.txt', data: 'new' }, { name: 'link/y.txt', data: 'y' }], 'not_a_directory'],
      [[{ name: 'a.txt/', data: undefined }], 'not_a_directory'],
    ] as [ZipEntry[], string][]) {
      await expectError(await d.fetch(`${F}/upload_zip`, { method: 'POST', body: zipForm(dir, buildZip(entries)) }), 409, code);
      assert.equal(readFileSync(path.join(dir, 'a.txt'), 'utf8'), 'old');
      assert.deepEqual(readdirSync(path.join(dir, 'elsewhere')), []);
      assert.deepEqual(readdirSync(dir).sort(), ['a.txt', 'elsewhere', 'link', 'x']);
    }
    writeFileSync(path.join(dir, 'file-dest'), 'f');
    await expectError(await d.fetch(`${F}/upload_zip`, { method: 'POST', body: zipForm(path.join(dir, 'file-dest'), buildZip([{ name: 'a', data: 'a' }])) }), 409, 'not_a_directory');
  });

  test('request problems: fields missing, unknown, given twice', async () => {
    const dir = scratch();
    const only = new FormData();
    only.append('dest_path', dir);
    const body = await expectError(await d.fetch(`${F}/upload_zip`, { method: 'POST', body: only }), 400, 'bad_request');
    assert.match(JSON.stringify(body.details), /zip_file: is required/);
    const extra = zipForm(dir, buildZip([{ name: 'a', data: 'a' }]));
    extra.append('surprise', 'x');
    await expectError(await d.fetch(`${F}/upload_zip`, { method: 'POST', body: extra }), 400, 'bad_request');
    const rel = zipForm('relative/dir', buildZip([{ name: 'a', data: 'a' }]));
    await expectError(await d.fetch(`${F}/upload_zip`, { method: 'POST', body: rel }), 400, 'bad_request');
    await expectError(await d.fetch(`${F}/upload_zip`, { method: 'POST', body: 'x', headers: { 'content-type': 'text/plain' } }), 400, 'invalid_request');
    assert.deepEqual(readdirSync(dir), []);
    spoolEmpty();
  });
});

describe('upload requests that fail leave nothing', () => {
  test('one bad item fails the whole request: no file of it is written, no folder created', async () => {
    const dir = scratch();
    const form = new FormData();
    form.append('files[0][dest_path]', path.join(dir, 'a', 'first.txt'));
    form.append('files[0][file]', new Blob(['first']), 'first.txt');
    form.append('files[1][dest_path]', path.join(d.stateDir, 'evil.txt'));
    form.append('files[1][file]', new Blob(['evil']), 'evil.txt');
    await expectError(await d.fetch(`${F}/upload`, { method: 'POST', body: form }), 403, 'path_forbidden');
    assert.deepEqual(readdirSync(dir), []);
    assert.equal(existsSync(path.join(d.stateDir, 'evil.txt')), false);

    const folder = new FormData();
    mkdirSync(path.join(dir, 'is-a-folder'));
    folder.append('files[0][dest_path]', path.join(dir, 'ok.txt'));
    folder.append('files[0][file]', new Blob(['ok']), 'ok.txt');
    folder.append('files[1][dest_path]', path.join(dir, 'is-a-folder'));
    folder.append('files[1][file]', new Blob(['x']), 'x');
    await expectError(await d.fetch(`${F}/upload`, { method: 'POST', body: folder }), 409, 'is_a_directory');
    assert.deepEqual(readdirSync(dir), ['is-a-folder']);
    spoolEmpty();
  });

  test('pairing problems are 400 with one detail each', async () => {
    const dir = scratch();
    const form = new FormData();
    form.append('files[0][dest_path]', path.join(dir, 'a.txt'));
    form.append('files[1][file]', new Blob(['b']), 'b');
    form.append('files[2][dest_path]', 'relative.txt');
    form.append('files[2][file]', new Blob(['c']), 'c');
    form.append('files[3][dest_path]', path.join(dir, 'a.txt'));
    form.append('files[3][file]', new Blob(['d']), 'd');
    const body = await expectError(await d.fetch(`${F}/upload`, { method: 'POST', body: form }), 400, 'bad_request');
    const details = (body.details as { message: string }[]).map((x) => x.message).join('\n');
    assert.match(details, /files\[0\]\.file: is missing/);
    assert.match(details, /files\[1\]\.dest_path: is missing/);
    assert.match(details, /files\[2\]\.dest_path: "relative\.txt" must be an absolute path/);
    assert.match(details, /files\[3\]\.dest_path: .* is already used by files\[0\]/);
    assert.deepEqual(readdirSync(dir), []);
    spoolEmpty();
  });
});
