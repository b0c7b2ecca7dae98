// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// Unit tests of the extension pieces that need no Chromium: safe unzip, manifest checks, the
// multipart pairing, policy files. (CRX packing: extensions/packing; the store: extensions/store.)
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { pairListParts, parseListField } from '../../daemon/core/multipart/pairs.js';
import type { ReceivedPart } from '../../daemon/core/multipart/receive.js';
import { ArchiveError, safeUnzip } from '../../daemon/core/zip/unzip.js';
import { isChromiumVersion, readManifest } from '../../daemon/extensions/intake/manifest.js';
import { extensionRoot } from '../../daemon/extensions/intake/prepare.js';
import { Rejection } from '../../daemon/extensions/intake/rejection.js';
import { uploadSpec } from '../../daemon/extensions/intake/upload.js';
import { POLICY_FILE, unpackedBlockedReason, writeForcelist } from '../../daemon/extensions/policy/policy.js';
import { BadRequestError, PayloadTooLargeError } from '../../daemon/core/errors.js';
import { buildZip, fixtureDir, fixtureZip, treeEntries, type ZipEntry } from '../helpers/zip.js';
import { tempDir } from '../kit/cleanup.js';

const root = tempDir('browserd-ext-units-');
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const fresh = (): string => {
  const d = path.join(root, `case-${n++}`);
  mkdirSync(d, { recursive: true });
  return d;
};
const LIMITS = { maxEntries: 100, maxUnpackedBytes: 1024 * 1024 };

/** Unzips `entries` into a fresh folder; returns the folder (inside `case-N/out`). */
async function unzip(entries: ZipEntry[] | Buffer, limits = LIMITS): Promise<string> {
  const dir = fresh();
  const zip = path.join(dir, 'in.zip');
  writeFileSync(zip, Buffer.isBuffer(entries) ? entries : buildZip(entries));
  const out = path.join(dir, 'out');
  mkdirSync(out);
  await safeUnzip(zip, out, limits);
  return out;
}

async function rejects(entries: ZipEntry[] | Buffer, cause: string, limits = LIMITS): Promise<void> {
  await assert.rejects(unzip(entries, limits), (err: unknown) => {
    assert.ok(err instanceof ArchiveError, `expected an ArchiveError, got ${String(err)}`);
    assert.equal(err.causeCode, cause, err.message);
    return true;
  });
}

describe('safe unzip', () => {
  test('unpacks stored and deflated entries with fixed modes', async () => {
    const out = await unzip([
      { name: 'dir/' , mode: 0o040777 },
      { name: 'dir/a.txt', data: 'hello', method: 'store', mode: 0o100777 },
      { name: 'b.txt', data: 'x'.repeat(5000), method: 'deflate' },
      { name: 'deep/er/c.txt', data: 'c' },
    ]);
    assert.equal(readFileSync(path.join(out, 'dir/a.txt'), 'utf8'), 'hello');
    assert.equal(readFileSync(path.join(out, 'b.txt'), 'utf8'), 'x'.repeat(5000));
    assert.equal(statSync(path.join(out, 'dir/a.txt')).mode & 0o777, 0o644);
    assert.equal(statSync(path.join(out, 'dir')).mode & 0o777, 0o755);
    assert.equal(statSync(path.join(out, 'deep/er')).mode & 0o777, 0o755);
  });

  test('zip slip: ".." segments and absolute paths are refused, nothing lands outside', async () => {
    const dir = fresh();
    for (const name of ['../evil.txt', 'a/../../evil.txt', 'ok/../../../evil.txt']) {
      await rejects([{ name: 'manifest.json', data: '{}' }, { name, data: 'pwned' }], 'zip_slip');
    }
    await rejects([{ name: '/tmp/browserd-evil.txt', data: 'pwned' }], 'zip_slip');
    await rejects([{ name: 'C:/evil.txt', data: 'pwned' }], 'zip_slip');
    assert.equal(existsSync(path.join(root, 'evil.txt')), false);
    assert.equal(existsSync(path.join(dir, '..', 'evil.txt')), false);
    assert.equal(existsSync('/tmp/browserd-evil.txt'), false);
  });

  test('backslashes, NUL and empty segments are refused', async () => {
    await rejects([{ name: '..\\evil.txt', data: 'x' }], 'bad_entry_name');
    await rejects([{ name: Buffer.from('a\0b.txt', 'latin1'), data: 'x' }], 'bad_entry_name');
    await rejects([{ name: 'a//b.txt', data: 'x' }], 'bad_entry_name');
  });

  test('symlinks, devices and fifos are refused', async () => {
    await rejects([{ name: 'link', data: '/etc/passwd', mode: 0o120777 }], 'symlink');
    await rejects([{ name: 'dev', data: '', mode: 0o020644 }], 'special_file');
    await rejects([{ name: 'fifo', data: '', mode: 0o010644 }], 'special_file');
  });

  test('encrypted entries are refused', async () => {
    await rejects([{ name: 'a.txt', data: 'secret', method: 'store', encrypted: true, declaredCompressedSize: 6 + 12 }], 'encrypted');
  });

  test('more entries than allowed', async () => {
    const entries = Array.from({ length: 11 }, (_, i) => ({ name: `f${i}.txt`, data: 'x' }));
    await rejects(entries, 'too_many_entries', { maxEntries: 10, maxUnpackedBytes: 1024 * 1024 });
  });

  test('a bomb over the unpacked limit: 413 before it is written', async () => {
    const out = path.join(root, `case-${n}`, 'out');
    await assert.rejects(unzip([{ name: 'bomb.bin', data: Buffer.alloc(4 * 1024 * 1024), method: 'deflate' }]), PayloadTooLargeError);
    assert.equal(existsSync(path.join(out, 'bomb.bin')), false);
  });

  test('a bomb that lies about its size is caught while inflating', async () => {
    const out = path.join(root, `case-${n}`, 'out');
    await rejects([{ name: 'bomb.bin', data: Buffer.alloc(4 * 1024 * 1024), method: 'deflate', declaredSize: 100 }], 'size_mismatch');
    const written = path.join(out, 'bomb.bin');
    assert.ok(!existsSync(written) || statSync(written).size <= 100, 'never more than the declared bytes on disk');
  });

  test('declared sizes that differ from the data are refused', async () => {
    await rejects([{ name: 'a.txt', data: 'x'.repeat(1000), method: 'deflate', declaredSize: 5000 }], 'size_mismatch');
    await rejects([{ name: 'a.txt', data: 'hello', method: 'store', declaredSize: 3 }], 'size_mismatch');
  });

  test('a wrong CRC, a duplicate entry, not a zip', async () => {
    await rejects([{ name: 'a.txt', data: 'hello', crc: 1234 }], 'bad_zip');
    await rejects([{ name: 'a.txt', data: 'a' }, { name: 'a.txt', data: 'b' }], 'duplicate_entry');
    await rejects(Buffer.from('this is not a zip archive at all, just text'), 'bad_zip');
    const whole = buildZip([{ name: 'a.txt', data: 'x'.repeat(500) }]);
    await rejects(whole.subarray(0, whole.length - 10), 'bad_zip');
  });

  test('the extension root: the archive root or its single top folder', async () => {
    const top = await unzip(fixtureZip('mv3-worker', { topFolder: 'my-ext' }));
    assert.equal(await extensionRoot(top), path.join(top, 'my-ext'));
    const flat = await unzip(fixtureZip('mv3-worker'));
    assert.equal(await extensionRoot(flat), flat);
    const macos = await unzip([...(await (async () => [{ name: '__MACOSX/' }, { name: '__MACOSX/x', data: 'x' }])()), { name: 'e/manifest.json', data: '{}' }]);
    assert.equal(await extensionRoot(macos), path.join(macos, 'e'));
    const two = await unzip([{ name: 'a/manifest.json', data: '{}' }, { name: 'b/x', data: 'x' }]);
    await assert.rejects(extensionRoot(two), (e: unknown) => e instanceof Rejection && e.causeCode === 'manifest_missing');
  });

  test('"./" is the root: archives made with `bsdtar -C dir .`', async () => {
    const entries = [{ name: './' }, ...treeEntries(fixtureDir('mv3-worker'), './'), { name: './sub/' }, { name: './sub/a.txt', data: 'a' }, { name: '././b.txt', data: 'b' }];
    const out = await unzip(entries);
    assert.equal(await extensionRoot(out), out);
    assert.deepEqual(readdirSync(out).sort(), ['b.txt', 'manifest.json', 'sub', 'worker.js']);
    assert.equal(readFileSync(path.join(out, 'sub/a.txt'), 'utf8'), 'a');
    assert.equal((await readManifest(out, { allowV2: false })).serviceWorker, 'worker.js');
    const top = await unzip([{ name: './' }, { name: './my-ext/' }, ...treeEntries(fixtureDir('mv3-worker'), './my-ext/')]);
    assert.equal(await extensionRoot(top), path.join(top, 'my-ext'));
    await rejects([{ name: './manifest.json', data: '{}' }, { name: 'manifest.json', data: '{}' }], 'duplicate_entry');
    await rejects([{ name: './../evil.txt', data: 'x' }], 'zip_slip');
    await rejects([{ name: '.', data: 'x' }], 'bad_entry_name');
  });
});

describe('manifest', () => {
  const dirWith = (manifest: string | object, files: Record<string, string> = {}): string => {
    const d = fresh();
    writeFileSync(path.join(d, 'manifest.json'), typeof manifest === 'string' ? manifest : JSON.stringify(manifest));
    for (const [f, c] of Object.entries(files)) {
      mkdirSync(path.dirname(path.join(d, f)), { recursive: true });
      writeFileSync(path.join(d, f), c);
    }
    return d;
  };
  const invalid = async (dir: string, pattern: RegExp, opts = { allowV2: false }): Promise<void> => {
    await assert.rejects(readManifest(dir, opts), (e: unknown) => {
      assert.ok(e instanceof Rejection);
      assert.equal(e.causeCode, 'manifest_invalid');
      assert.match(e.message, pattern);
      return true;
    });
  };

  test('comments are accepted as Chromium accepts them; trailing commas and raw control characters are not', async () => {
    const commented = dirWith(
      '// first line\n{\n  /* block\n comment */ "manifest_version": 3, // line\n  "name": "with // in a string /* too */",\n  "homepage_url": "http://example.test/a//b",\n  "version": "1.2"\n}\n',
    );
    const facts = await readManifest(commented, { allowV2: false });
    assert.equal(facts.name, 'with // in a string /* too */');
    assert.equal(facts.version, '1.2');
    await invalid(dirWith('{"manifest_version": 3, "name": "x", "version": "1.0",}'), /not JSON/);
    await invalid(dirWith('{"manifest_version": 3, "name": "a\tb", "version": "1.0"}'), /not JSON/);
    await invalid(dirWith('{"manifest_version": 3, /* never closed'), /not JSON/);
  });

  test('the fixtures', async () => {
    const w = await readManifest(fixtureDir('mv3-worker'), { allowV2: false });
    assert.deepEqual(w, { manifestVersion: 3, name: 'browserd fixture: service worker', version: '1.0.0', serviceWorker: 'worker.js', needsPolicy: false, key: null });
    assert.equal((await readManifest(fixtureDir('content-script'), { allowV2: false })).serviceWorker, null);
    assert.equal((await readManifest(fixtureDir('webrequest-blocking'), { allowV2: false })).needsPolicy, true);
    await invalid(fixtureDir('broken-not-json'), /^manifest\.json: not JSON/);
    await invalid(fixtureDir('broken-bad-version'), /^manifest\.json: version: "1\.02\.x"/);
    await invalid(fixtureDir('broken-missing-worker'), /^manifest\.json: background\.service_worker: names "gone\.js"/);
    await invalid(fixtureDir('broken-manifest-v1'), /^manifest\.json: manifest_version: must be 2 or 3, got 1/);
    await invalid(fixtureDir('manifest-v2'), /manifest_version: Manifest V2 is no longer supported/);
    assert.equal((await readManifest(fixtureDir('manifest-v2'), { allowV2: true })).manifestVersion, 2);
  });

  test('a BOM is tolerated', async () => {
    const d = dirWith(`\ufeff${JSON.stringify({ manifest_version: 3, name: 'bom', version: '1' })}`);
    assert.equal((await readManifest(d, { allowV2: false })).name, 'bom');
  });

  test('fields are named', async () => {
    await invalid(dirWith({ manifest_version: 3, version: '1' }), /^manifest\.json: name:/);
    await invalid(dirWith({ manifest_version: 3, name: 'x', version: 1 }), /^manifest\.json: version: must be a string/);
    await invalid(dirWith({ manifest_version: 3, name: 'x' }), /^manifest\.json: version:/);
    await invalid(dirWith('[1,2]'), /^manifest\.json: \(root\)/);
    await invalid(dirWith({ manifest_version: 3, name: 'x', version: '1', background: { service_worker: 'sub' } }, { 'sub/a.js': '' }), /background\.service_worker: names "sub"/);
    await invalid(dirWith({ manifest_version: 3, name: 'x', version: '1', background: { service_worker: '../x.js' } }), /points outside/);
    await invalid(dirWith({ manifest_version: 3, name: 'x', version: '1', content_scripts: [{ js: ['a.js', 'b.js'] }] }, { 'a.js': '' }), /content_scripts\[0\]\.js\[1\]: names "b\.js"/);
  });

  test('default_locale and _locales go together (Chromium refuses one without the other)', async () => {
    const base = { manifest_version: 3, name: 'x', version: '1' };
    await invalid(fixtureDir('broken-default-locale'), /^manifest\.json: default_locale: is "en", but the archive has no _locales folder/);
    await invalid(dirWith(base, { '_locales/en/messages.json': '{}' }), /^manifest\.json: default_locale: is missing, but the archive has a _locales folder/);
    await invalid(dirWith({ ...base, default_locale: 'de' }, { '_locales/en/messages.json': '{}' }), /default_locale: is "de", but _locales\/de\/messages\.json is missing/);
    await invalid(dirWith({ ...base, default_locale: '../en' }, { '_locales/en/messages.json': '{}' }), /default_locale: must be a locale folder name/);
    await invalid(dirWith({ ...base, default_locale: 'en' }, { '_locales/en/messages.json': '{nope' }), /^_locales\/en\/messages\.json: not JSON/);
    const ok = dirWith({ ...base, name: '__MSG_name__', default_locale: 'en_US' }, { '_locales/en_US/messages.json': '{"name": {"message": "X"}}' });
    assert.equal((await readManifest(ok, { allowV2: false })).version, '1');
  });

  test('a missing manifest', async () => {
    await assert.rejects(readManifest(fresh(), { allowV2: false }), (e: unknown) => e instanceof Rejection && e.causeCode === 'manifest_missing');
  });

  test("Chromium's version format", () => {
    for (const v of ['1', '0', '1.0', '1.2.3.4', '65535.0.0.1', '10.20']) assert.ok(isChromiumVersion(v), v);
    for (const v of ['', '1.', '.1', '1..2', '01', '1.02', '1.2.3.4.5', '65536', 'a', '1.0-beta', ' 1']) assert.ok(!isChromiumVersion(v), v);
  });
});

describe('multipart pairing', () => {
  const FIELDS = { list: 'extensions', text: 'name', file: 'zip_file' };
  const parseFieldName = (name: string): { field: string; index: number | null } | null => {
    const p = parseListField(name, FIELDS);
    return p === null ? null : { field: p.field === 'text' ? 'name' : 'zip_file', index: p.index };
  };
  const pairParts = (parts: ReceivedPart[], max: number): { label: string; name: string; zipFile: string }[] =>
    pairListParts(parts, uploadSpec(max)).map((i) => ({ label: i.label, name: i.text, zipFile: i.file }));
  const f = (fieldName: string, value: string): ReceivedPart => ({ fieldName, kind: 'field', value });
  const z = (fieldName: string, file = `/tmp/${fieldName}.zip`): ReceivedPart => ({ fieldName, kind: 'file', file });
  const problems = (parts: ReceivedPart[], max = 20): string[] => {
    try {
      pairParts(parts, max);
    } catch (err) {
      assert.ok(err instanceof BadRequestError);
      return (err.details ?? []).map((d) => d.message);
    }
    assert.fail('expected a 400');
  };

  test('field names', () => {
    assert.deepEqual(parseFieldName('extensions.name'), { field: 'name', index: null });
    assert.deepEqual(parseFieldName('extensions[][zip_file]'), { field: 'zip_file', index: null });
    assert.deepEqual(parseFieldName('extensions[7][name]'), { field: 'name', index: 7 });
    assert.deepEqual(parseFieldName('extensions[3].zip_file'), { field: 'zip_file', index: 3 });
    for (const bad of ['extension.name', 'extensions', 'extensions[a][name]', 'extensions[0][other]', 'extensions[0]name']) assert.equal(parseFieldName(bad), null, bad);
  });

  test('every encoding, either order', () => {
    const expect = [
      { label: 'extensions[0]', name: 'a', zipFile: '/a.zip' },
      { label: 'extensions[1]', name: 'b', zipFile: '/b.zip' },
    ];
    const go = [f('extensions.name', 'a'), z('extensions.zip_file', '/a.zip'), z('extensions.zip_file', '/b.zip'), f('extensions.name', 'b')];
    assert.deepEqual(pairParts(go, 20), expect);
    const ts = [z('extensions[][zip_file]', '/a.zip'), f('extensions[][name]', 'a'), f('extensions[][name]', 'b'), z('extensions[][zip_file]', '/b.zip')];
    assert.deepEqual(pairParts(ts, 20), expect);
    const idx = [z('extensions[1][zip_file]', '/b.zip'), f('extensions[0][name]', 'a'), f('extensions[1][name]', 'b'), z('extensions[0][zip_file]', '/a.zip')];
    assert.deepEqual(pairParts(idx, 20), expect);
    const dot = [f('extensions[0].name', 'a'), z('extensions[0].zip_file', '/a.zip'), z('extensions[1].zip_file', '/b.zip'), f('extensions[1].name', 'b')];
    assert.deepEqual(pairParts(dot, 20), expect);
  });

  test('one detail per problem', () => {
    assert.deepEqual(problems([]), ['extensions: the list is empty; send at least one item with name and zip_file']);
    assert.deepEqual(problems([f('extensions[0][name]', 'a')]), ['extensions[0].zip_file: is missing (a name without its zip_file)']);
    assert.deepEqual(problems([z('extensions[][zip_file]')]), ['extensions[0].name: is missing (a zip_file without its name)']);
    assert.deepEqual(problems([f('extensions.name', 'a'), z('extensions.zip_file'), f('extensions.name', 'b')]), ['extensions[1].zip_file: is missing (a name without its zip_file)']);
    assert.deepEqual(
      problems([f('extensions[0][name]', 'same'), z('extensions[0][zip_file]'), f('extensions[1][name]', 'same'), z('extensions[1][zip_file]')]),
      ['extensions[1].name: "same" is already used by extensions[0] in this request'],
    );
    const bad = problems([f('extensions[0][name]', 'bad name!'), z('extensions[0][zip_file]'), f('extensions[1][name]', '..'), z('extensions[1][zip_file]')]);
    assert.equal(bad.length, 2);
    assert.match(bad[0] as string, /^extensions\[0\]\.name: "bad name!" must match/);
    assert.match(bad[1] as string, /^extensions\[1\]\.name: "\.\." must match/);
    assert.equal(problems([f('extensions[0][name]', 'a'.repeat(65)), z('extensions[0][zip_file]')]).length, 1);
    assert.equal(problems([f('extensions[0][name]', 'a'), z('extensions[0][zip_file]'), f('extensions.name', 'b'), z('extensions.zip_file')]).length, 1);
    assert.match(problems([f('other', 'x'), f('extensions[0][name]', 'a'), z('extensions[0][zip_file]')])[0] as string, /^other: is not a field/);
    assert.match(problems([f('extensions[0][name]', 'a'), f('extensions[0][zip_file]', 'PK...')])[0] as string, /zip_file\]: must be a file part/);
    const many = Array.from({ length: 3 }, (_, i) => [f(`extensions[${i}][name]`, `n${i}`), z(`extensions[${i}][zip_file]`)]).flat();
    assert.deepEqual(problems(many, 2), ['extensions: 3 items; at most 2 are allowed per request']);
  });
});

describe('policy files', () => {
  test('what blocks unpacked extensions', async () => {
    const dir = fresh();
    assert.equal(await unpackedBlockedReason(dir), null);
    assert.equal(await unpackedBlockedReason(path.join(dir, 'missing')), null);
    writeFileSync(path.join(dir, 'junk.json'), '{not json');
    writeFileSync(path.join(dir, 'other.json'), JSON.stringify({ ExtensionInstallBlocklist: ['abc'] }));
    writeFileSync(path.join(dir, POLICY_FILE), JSON.stringify({ ExtensionInstallBlocklist: ['*'] }));
    assert.equal(await unpackedBlockedReason(dir), null, 'its own file and unparsable files do not count');
    writeFileSync(path.join(dir, 'a.json'), JSON.stringify({ ExtensionInstallBlocklist: ['*'] }));
    assert.match((await unpackedBlockedReason(dir)) ?? '', /a\.json: ExtensionInstallBlocklist/);
    rmSync(path.join(dir, 'a.json'));
    writeFileSync(path.join(dir, 'b.json'), JSON.stringify({ ExtensionSettings: { '*': { installation_mode: 'blocked' } } }));
    assert.match((await unpackedBlockedReason(dir)) ?? '', /b\.json: ExtensionSettings/);
    rmSync(path.join(dir, 'b.json'));
    writeFileSync(path.join(dir, 'c.json'), JSON.stringify({ ExtensionAllowedTypes: ['theme'] }));
    assert.match((await unpackedBlockedReason(dir)) ?? '', /c\.json: ExtensionAllowedTypes/);
    writeFileSync(path.join(dir, 'c.json'), JSON.stringify({ ExtensionAllowedTypes: ['extension', 'theme'] }));
    assert.equal(await unpackedBlockedReason(dir), null);
  });

  test('the forcelist file is written whole, other files untouched, and removed when empty', async () => {
    const dir = path.join(fresh(), 'managed');
    await writeForcelist(dir, ['id1;http://127.0.0.1:1/id1/updates.xml']);
    writeFileSync(path.join(dir, 'admin.json'), '{"HomepageLocation": "about:blank"}');
    await writeForcelist(dir, ['id1;u1', 'id2;u2']);
    assert.deepEqual(JSON.parse(readFileSync(path.join(dir, POLICY_FILE), 'utf8')), { ExtensionInstallForcelist: ['id1;u1', 'id2;u2'] });
    assert.equal(statSync(path.join(dir, POLICY_FILE)).mode & 0o777, 0o644);
    assert.deepEqual(readdirSync(dir).sort(), ['admin.json', POLICY_FILE].sort(), 'no temp file left');
    await writeForcelist(dir, []);
    assert.deepEqual(readdirSync(dir), ['admin.json']);
    assert.equal(readFileSync(path.join(dir, 'admin.json'), 'utf8'), '{"HomepageLocation": "about:blank"}');
  });
});

