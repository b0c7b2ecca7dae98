// Unit tests of the extension pieces that need no Chromium: safe unzip, manifest checks, the
// multipart pairing, CRX3 packing (parsed back and verified), ids, policy files, the store.
import assert from 'node:assert/strict';
import { createHash, createPublicKey, verify } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { loadOrCreateKey, idFromPath, idFromPublicKey, packCrx3, publicKeyDer } from '../daemon/extensions/crx3.js';
import { isChromiumVersion, readManifest } from '../daemon/extensions/manifest.js';
import { pairParts, parseFieldName, type ReceivedPart } from '../daemon/extensions/multipart-pairs.js';
import { POLICY_FILE, unpackedBlockedReason, writeForcelist } from '../daemon/extensions/policy.js';
import { extensionRoot } from '../daemon/extensions/prepare.js';
import { Rejection } from '../daemon/extensions/rejection.js';
import { Store } from '../daemon/extensions/store.js';
import { safeUnzip } from '../daemon/extensions/unzip.js';
import { updateManifest } from '../daemon/extensions/update-server.js';
import { zipDirectory } from '../daemon/extensions/zip-write.js';
import { createLogger } from '../daemon/core/log.js';
import { BadRequestError, PayloadTooLargeError } from '../daemon/http/errors.js';
import { tempDir } from './helpers/daemon.js';
import { buildZip, fixtureDir, fixtureZip, type ZipEntry } from './helpers/zip.js';

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
    assert.ok(err instanceof Rejection, `expected a Rejection, got ${String(err)}`);
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

  test("the daemon's zip writer round-trips through the unzip", async () => {
    const zip = await zipDirectory(fixtureDir('content-script'));
    const out = await unzip(zip);
    assert.deepEqual(readdirSync(out).sort(), ['content.js', 'manifest.json']);
    assert.deepEqual(readFileSync(path.join(out, 'manifest.json')), readFileSync(path.join(fixtureDir('content-script'), 'manifest.json')));
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

  test('a missing manifest', async () => {
    await assert.rejects(readManifest(fresh(), { allowV2: false }), (e: unknown) => e instanceof Rejection && e.causeCode === 'manifest_missing');
  });

  test("Chromium's version format", () => {
    for (const v of ['1', '0', '1.0', '1.2.3.4', '65535.0.0.1', '10.20']) assert.ok(isChromiumVersion(v), v);
    for (const v of ['', '1.', '.1', '1..2', '01', '1.02', '1.2.3.4.5', '65536', 'a', '1.0-beta', ' 1']) assert.ok(!isChromiumVersion(v), v);
  });
});

describe('multipart pairing', () => {
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
    assert.deepEqual(problems([f('extensions[0][name]', 'a')]), ['extensions[0].zip_file: is missing (a name without its archive)']);
    assert.deepEqual(problems([z('extensions[][zip_file]')]), ['extensions[0].name: is missing (an archive without its name)']);
    assert.deepEqual(problems([f('extensions.name', 'a'), z('extensions.zip_file'), f('extensions.name', 'b')]), ['extensions[1].zip_file: is missing (a name without its archive)']);
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

/** A minimal protobuf reader for the test: field number → list of length-delimited values. */
function readFields(buf: Buffer): Map<number, Buffer[]> {
  const out = new Map<number, Buffer[]>();
  let i = 0;
  const varint = (): number => {
    let v = 0;
    let mul = 1;
    for (;;) {
      const b = buf[i++] as number;
      v += (b & 0x7f) * mul;
      mul *= 128;
      if (b < 0x80) return v;
    }
  };
  while (i < buf.length) {
    const tag = varint();
    assert.equal(tag & 7, 2, 'only length-delimited fields');
    const len = varint();
    const field = Math.floor(tag / 8);
    out.set(field, [...(out.get(field) ?? []), buf.subarray(i, i + len)]);
    i += len;
  }
  return out;
}

describe('CRX3 and ids', () => {
  test('a packed CRX parses back: header, id from the key, a signature that verifies', async () => {
    const keys = fresh();
    const key = await loadOrCreateKey(keys, 'my-ext');
    const zip = await zipDirectory(fixtureDir('mv3-worker'));
    const { crx, id } = packCrx3(zip, key);

    assert.equal(crx.subarray(0, 4).toString('latin1'), 'Cr24');
    assert.equal(crx.readUInt32LE(4), 3);
    const headerLen = crx.readUInt32LE(8);
    const header = crx.subarray(12, 12 + headerLen);
    assert.deepEqual(crx.subarray(12 + headerLen), zip, 'the zip follows the header unchanged');

    const fields = readFields(header);
    const proofs = fields.get(2) ?? [];
    assert.equal(proofs.length, 1, 'one sha256_with_rsa proof');
    const proof = readFields(proofs[0] as Buffer);
    const pub = (proof.get(1) ?? [])[0] as Buffer;
    const sig = (proof.get(2) ?? [])[0] as Buffer;
    const signedHeader = (fields.get(10000) ?? [])[0] as Buffer;
    const crxId = (readFields(signedHeader).get(1) ?? [])[0] as Buffer;

    assert.deepEqual(pub, publicKeyDer(key));
    assert.deepEqual(crxId, createHash('sha256').update(pub).digest().subarray(0, 16));
    const hex = crxId.toString('hex');
    assert.equal(id, [...hex].map((c) => String.fromCharCode(97 + parseInt(c, 16))).join(''));
    assert.equal(id, idFromPublicKey(pub));
    assert.match(id, /^[a-p]{32}$/);

    const len = Buffer.alloc(4);
    len.writeUInt32LE(signedHeader.length);
    const signed = Buffer.concat([Buffer.from('CRX3 SignedData\x00', 'latin1'), len, signedHeader, zip]);
    assert.ok(verify('sha256', signed, createPublicKey({ key: pub, format: 'der', type: 'spki' }), sig), 'RSA-SHA256 signature verifies');
  });

  test('the key of a name is kept (0600), so its id stays the same', async () => {
    const keys = fresh();
    const a = await loadOrCreateKey(keys, 'same');
    const b = await loadOrCreateKey(keys, 'same');
    assert.equal(idFromPublicKey(publicKeyDer(a)), idFromPublicKey(publicKeyDer(b)));
    assert.equal(statSync(path.join(keys, 'same.pem')).mode & 0o777, 0o600);
    const other = await loadOrCreateKey(keys, 'other');
    assert.notEqual(idFromPublicKey(publicKeyDer(other)), idFromPublicKey(publicKeyDer(a)));
  });

  test('the id of an unpacked extension comes from its path (as Chromium 156 computed it)', () => {
    assert.equal(idFromPath('/tmp/exp5/ext3'), 'goagkaolfmanfdljcpdodfcbpbnobflb');
  });

  test('the update manifest', () => {
    const xml = updateManifest({ id: 'a'.repeat(32), version: '1.2', crxFile: '/x' }, 4567);
    assert.match(xml, /<gupdate xmlns='http:\/\/www\.google\.com\/update2\/response' protocol='2\.0'>/);
    assert.match(xml, /<app appid='a{32}'><updatecheck codebase='http:\/\/127\.0\.0\.1:4567\/a{32}\/1\.2\.crx' version='1\.2'\/><\/app>/);
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

describe('store', () => {
  const log = createLogger('silent');
  test('after a crash mid-install, installed.json is the truth', async () => {
    const state = fresh();
    const s1 = new Store(state, log);
    await s1.open();
    for (const name of ['kept', 'replaced']) {
      mkdirSync(s1.installedPath(name));
      writeFileSync(path.join(s1.installedPath(name), 'manifest.json'), `{"v": "old-${name}"}`);
      s1.committed.set(name, { name, id: 'a'.repeat(32), version: '1', activation: 'live', installed_at: new Date().toISOString(), service_worker: null });
    }
    await s1.save();
    // An install of a new version of `replaced` and a new `fresh` one, interrupted before its commit:
    const aside = await s1.putAside('replaced');
    assert.ok(aside !== null);
    for (const name of ['replaced', 'newcomer']) {
      const tree = path.join(state, `tree-${name}`);
      mkdirSync(tree);
      writeFileSync(path.join(tree, 'manifest.json'), '{"v": "new"}');
      await s1.place(name, tree);
    }
    mkdirSync(path.join(s1.stagingDir, 'leftover'));

    const s2 = new Store(state, log);
    await s2.open();
    assert.deepEqual([...s2.committed.keys()], ['kept', 'replaced']);
    assert.equal(readFileSync(path.join(s2.installedPath('replaced'), 'manifest.json'), 'utf8'), '{"v": "old-replaced"}');
    assert.equal(existsSync(s2.installedPath('newcomer')), false);
    assert.deepEqual(readdirSync(s2.previousDir), []);
    assert.deepEqual(readdirSync(s2.stagingDir), []);
  });

  test('an unreadable installed.json is set aside, not fatal', async () => {
    const state = fresh();
    mkdirSync(path.join(state, 'extensions'), { recursive: true });
    writeFileSync(path.join(state, 'extensions', 'installed.json'), '{broken');
    const s = new Store(state, log);
    await s.open();
    assert.equal(s.committed.size, 0);
    assert.ok(readdirSync(path.join(state, 'extensions')).some((f) => f.startsWith('installed.json.unreadable-')));
  });
});
