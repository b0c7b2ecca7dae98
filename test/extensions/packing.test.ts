// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// Policy-install packing without Chromium: the daemon's zip writer (async deflate, straight to a
// file), CRX3 files (parsed back and verified), ids, the update manifest, and the publisher's
// CRX files: a same-version replacement gets a file of its own, so a rollback serves the old bytes.
import assert from 'node:assert/strict';
import { createHash, createPublicKey, verify } from 'node:crypto';
import { cpSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import path from 'node:path';
import { describe, test } from 'node:test';
import zlib from 'node:zlib';
import { createLogger } from '../../daemon/core/log.js';
import { idFromPath, idFromPublicKey, loadOrCreateKey, packCrx3, publicKeyDer } from '../../daemon/extensions/policy/crx3.js';
import { POLICY_FILE } from '../../daemon/extensions/policy/policy.js';
import { PolicyPublisher } from '../../daemon/extensions/policy/publisher.js';
import { Store, type InstalledEntry } from '../../daemon/extensions/store.js';
import { safeUnzip } from '../../daemon/core/zip/unzip.js';
import { updateManifest } from '../../daemon/extensions/policy/update-server.js';
import { zipDirectory } from '../../daemon/core/zip/write.js';
import { fixtureDir } from '../helpers/zip.js';
import { scratchDirs } from '../kit/cleanup.js';

const fresh = scratchDirs('browserd-ext-packing-');
const LIMITS = { maxEntries: 100, maxUnpackedBytes: 4 * 1024 * 1024 };

/** Unpacks a zip file with the daemon's safe unzip; returns the folder. */
async function unpack(zipFile: string): Promise<string> {
  const out = path.join(fresh(), 'out');
  mkdirSync(out);
  await safeUnzip(zipFile, out, LIMITS);
  return out;
}

/** The zip inside a CRX3 file. */
function zipOfCrx(crx: Buffer): Buffer {
  return crx.subarray(12 + crx.readUInt32LE(8));
}

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

describe('zip writer', () => {
  test('round-trips through the unzip', async () => {
    const zip = path.join(fresh(), 'a.zip');
    await zipDirectory(fixtureDir('content-script'), zip);
    const out = await unpack(zip);
    assert.deepEqual(readdirSync(out).sort(), ['content.js', 'manifest.json']);
    assert.deepEqual(readFileSync(path.join(out, 'manifest.json')), readFileSync(path.join(fixtureDir('content-script'), 'manifest.json')));
  });

  test('deflates on the thread pool: never zlib.deflateRawSync, which blocks the event loop', async () => {
    const src = fresh();
    writeFileSync(path.join(src, 'big.txt'), 'browserd '.repeat(200_000));
    writeFileSync(path.join(src, 'small.txt'), 'x');
    const zip = path.join(fresh(), 'b.zip');
    const original = zlib.deflateRawSync;
    let syncCalls = 0;
    zlib.deflateRawSync = ((...args: Parameters<typeof original>) => {
      syncCalls++;
      return original(...args);
    }) as typeof original;
    syncBuiltinESMExports();
    try {
      await zipDirectory(src, zip);
    } finally {
      zlib.deflateRawSync = original;
      syncBuiltinESMExports();
    }
    assert.equal(syncCalls, 0);
    assert.ok(statSync(zip).size < 100_000, 'the big entry is deflated');
    assert.equal(readFileSync(path.join(await unpack(zip), 'big.txt'), 'utf8'), 'browserd '.repeat(200_000));
  });
});

describe('CRX3 and ids', () => {
  test('a packed CRX parses back: header, id from the key, a signature that verifies', async () => {
    const dir = fresh();
    const key = await loadOrCreateKey(path.join(dir, 'keys'), 'my-ext');
    const zipFile = path.join(dir, 'x.zip');
    await zipDirectory(fixtureDir('mv3-worker'), zipFile);
    const crxFile = path.join(dir, 'x.crx');
    const { id, sha256 } = await packCrx3(zipFile, key, crxFile);
    const crx = readFileSync(crxFile);
    const zip = readFileSync(zipFile);
    assert.equal(sha256, createHash('sha256').update(crx).digest('hex'));

    assert.equal(crx.subarray(0, 4).toString('latin1'), 'Cr24');
    assert.equal(crx.readUInt32LE(4), 3);
    const headerLen = crx.readUInt32LE(8);
    const header = crx.subarray(12, 12 + headerLen);
    assert.deepEqual(zipOfCrx(crx), zip, 'the zip follows the header unchanged');

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

  test('the update manifest points at the CRX file by its name', () => {
    const xml = updateManifest({ id: 'a'.repeat(32), version: '1.2', fileName: '1.2-0123456789abcdef.crx', crxFile: '/x' }, 4567);
    assert.match(xml, /<gupdate xmlns='http:\/\/www\.google\.com\/update2\/response' protocol='2\.0'>/);
    assert.match(xml, /<app appid='a{32}'><updatecheck codebase='http:\/\/127\.0\.0\.1:4567\/a{32}\/1\.2-0123456789abcdef\.crx' version='1\.2'\/><\/app>/);
  });
});

describe('publisher', () => {
  test('a same-version replacement gets its own CRX file: until the commit, the old bytes are what is served', async (t) => {
    const log = createLogger('silent');
    const state = fresh();
    const policyDir = path.join(state, 'policy');
    const store = new Store(state, log);
    await store.open();
    const publisher = new PolicyPublisher(store, policyDir, log);
    t.after(() => publisher.close());
    const installed = store.installedPath('blk');
    cpSync(fixtureDir('webrequest-blocking'), installed, { recursive: true });
    writeFileSync(path.join(installed, 'marker.txt'), 'old');
    const old = await publisher.pack('blk', '1.0');
    // The replacement: same name, same version, other content.
    writeFileSync(path.join(installed, 'marker.txt'), 'new');
    const next = await publisher.pack('blk', '1.0');
    assert.equal(next.id, old.id, 'the key of the name gives the same id');
    assert.match(old.crxFile, /^1\.0-[0-9a-f]{16}\.crx$/);
    assert.notEqual(next.crxFile, old.crxFile);
    const dir = path.join(store.crxDir, 'blk');
    assert.deepEqual(readdirSync(dir).sort(), [old.crxFile, next.crxFile].sort(), 'both kept, no temp files left');

    // Rolled back: the set names the old CRX again; the update server serves its bytes.
    const entry: InstalledEntry = { name: 'blk', id: old.id, version: '1.0', activation: 'policy', installed_at: new Date().toISOString(), service_worker: 'worker.js', crx_file: old.crxFile };
    await publisher.sync([entry]);
    const forced = (JSON.parse(readFileSync(path.join(policyDir, POLICY_FILE), 'utf8')) as { ExtensionInstallForcelist: string[] }).ExtensionInstallForcelist;
    const updateUrl = (forced[0] ?? '').split(';')[1] ?? '';
    const xml = await (await fetch(updateUrl)).text();
    const codebase = /codebase='([^']+)'/.exec(xml)?.[1] ?? '';
    assert.ok(codebase.endsWith(`/${old.id}/${old.crxFile}`), xml);
    const served = Buffer.from(await (await fetch(codebase)).arrayBuffer());
    assert.deepEqual(served, readFileSync(path.join(dir, old.crxFile)));
    const zipFile = path.join(fresh(), 'served.zip');
    writeFileSync(zipFile, zipOfCrx(served));
    assert.equal(readFileSync(path.join(await unpack(zipFile), 'marker.txt'), 'utf8'), 'old');
    assert.equal((await fetch(codebase.replace(old.crxFile, next.crxFile))).status, 404, 'only the file of the set is served');

    await publisher.prune([entry]);
    assert.deepEqual(readdirSync(dir), [old.crxFile]);
  });
});
