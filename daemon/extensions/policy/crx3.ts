// CRX3 packing for policy installs, and the extension ids Chromium derives.
//
// A CRX3 file is `Cr24`, version 3 and the header length (both uint32 LE), a protobuf
// CrxFileHeader, then the zip. The header holds one AsymmetricKeyProof (field 2: public_key = 1,
// signature = 2) and signed_header_data (field 10000), itself a SignedData { crx_id = 1 } with the
// 16 id bytes. The RSA-SHA256 signature covers "CRX3 SignedData\0", the uint32 LE length of
// signed_header_data, signed_header_data and the zip. The few protobuf fields are encoded here.
import { createHash, createPrivateKey, createPublicKey, createSign, generateKeyPair, type KeyObject } from 'node:crypto';
import { mkdir, open, readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { writeFileAtomic } from '../../core/fs-atomic.js';

const generateKeyPairAsync = promisify(generateKeyPair);
const SIGNATURE_CONTEXT = Buffer.from('CRX3 SignedData\x00', 'latin1');

/** Chromium's id alphabet: each hex digit of the first 16 bytes of a sha256, mapped 0-f → a-p. */
function idFromBytes(bytes: Buffer): string {
  let id = '';
  for (const c of bytes.subarray(0, 16).toString('hex')) id += String.fromCharCode(97 + parseInt(c, 16));
  return id;
}

/** The id of an extension signed with this key (DER SubjectPublicKeyInfo). */
export function idFromPublicKey(spkiDer: Buffer): string {
  return idFromBytes(createHash('sha256').update(spkiDer).digest());
}

/** The id Chromium gives an unpacked extension without a `key`: derived from its absolute path. */
export function idFromPath(absPath: string): string {
  return idFromBytes(createHash('sha256').update(absPath, 'utf8').digest());
}

export function publicKeyDer(key: KeyObject): Buffer {
  return createPublicKey(key).export({ type: 'spki', format: 'der' });
}

function varint(n: number): Buffer {
  const out: number[] = [];
  let v = n;
  while (v >= 0x80) {
    out.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return Buffer.from(out);
}

/** A length-delimited protobuf field (wire type 2). */
function bytesField(field: number, value: Buffer): Buffer {
  return Buffer.concat([varint(field * 8 + 2), varint(value.length), value]);
}

function u32le(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n, 0);
  return b;
}

const CHUNK_BYTES = 1024 * 1024;

/** Every chunk of a file, in order, one at a time. */
async function* chunksOf(file: string): AsyncGenerator<Buffer> {
  const fh = await open(file, 'r');
  try {
    for (;;) {
      const buf = Buffer.alloc(CHUNK_BYTES);
      const { bytesRead } = await fh.read(buf, 0, CHUNK_BYTES, null);
      if (bytesRead === 0) return;
      yield buf.subarray(0, bytesRead);
    }
  } finally {
    await fh.close();
  }
}

interface PackedCrx {
  /** The extension id (from the key). */
  id: string;
  /** sha256 of the whole CRX file, hex. */
  sha256: string;
}

/**
 * Writes the CRX3 of `zipFile` signed with `privateKey` to `outFile` (created, must not exist).
 * The zip is read in chunks twice (signature, then copy), never held in memory whole.
 */
export async function packCrx3(zipFile: string, privateKey: KeyObject, outFile: string): Promise<PackedCrx> {
  const pub = publicKeyDer(privateKey);
  const idBytes = createHash('sha256').update(pub).digest().subarray(0, 16);
  const signedData = bytesField(1, idBytes);
  const signer = createSign('sha256');
  signer.update(Buffer.concat([SIGNATURE_CONTEXT, u32le(signedData.length), signedData]));
  for await (const chunk of chunksOf(zipFile)) signer.update(chunk);
  const signature = signer.sign(privateKey);
  const proof = Buffer.concat([bytesField(1, pub), bytesField(2, signature)]);
  const header = Buffer.concat([bytesField(2, proof), bytesField(10000, signedData)]);
  const prefix = Buffer.concat([Buffer.from('Cr24', 'latin1'), u32le(3), u32le(header.length), header]);
  const hash = createHash('sha256').update(prefix);
  const out = await open(outFile, 'wx', 0o600);
  try {
    await out.write(prefix);
    for await (const chunk of chunksOf(zipFile)) {
      hash.update(chunk);
      await out.write(chunk);
    }
    await out.sync();
  } finally {
    await out.close();
  }
  return { id: idFromBytes(idBytes), sha256: hash.digest('hex') };
}

/**
 * The RSA key of an extension name, kept in `<keysDir>/<name>.pem` (0600) so that re-uploads of
 * a name keep its id. Created on first use.
 */
export async function loadOrCreateKey(keysDir: string, name: string): Promise<KeyObject> {
  const file = path.join(keysDir, `${name}.pem`);
  try {
    return createPrivateKey(await readFile(file, 'utf8'));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  await mkdir(keysDir, { recursive: true, mode: 0o700 });
  const { privateKey } = await generateKeyPairAsync('rsa', { modulusLength: 2048 });
  await writeFileAtomic(file, privateKey.export({ type: 'pkcs8', format: 'pem' }) as string, 0o600);
  return privateKey;
}
