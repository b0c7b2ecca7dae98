// CRX3 packing for policy installs, and the extension ids Chromium derives.
//
// A CRX3 file is `Cr24`, version 3 and the header length (both uint32 LE), a protobuf
// CrxFileHeader, then the zip. The header holds one AsymmetricKeyProof (field 2: public_key = 1,
// signature = 2) and signed_header_data (field 10000), itself a SignedData { crx_id = 1 } with the
// 16 id bytes. The RSA-SHA256 signature covers "CRX3 SignedData\0", the uint32 LE length of
// signed_header_data, signed_header_data and the zip. The few protobuf fields are encoded here.
import { createHash, createPrivateKey, createPublicKey, generateKeyPair, sign, type KeyObject } from 'node:crypto';
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { writeFileAtomic } from '../core/fs-atomic.js';

const generateKeyPairAsync = promisify(generateKeyPair);
const SIGNATURE_CONTEXT = Buffer.from('CRX3 SignedData\x00', 'latin1');

/** Chromium's id alphabet: each hex digit of the first 16 bytes of a sha256, mapped 0-f → a-p. */
export function idFromBytes(bytes: Buffer): string {
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

export interface Crx {
  crx: Buffer;
  id: string;
}

export function packCrx3(zip: Buffer, privateKey: KeyObject): Crx {
  const pub = publicKeyDer(privateKey);
  const idBytes = createHash('sha256').update(pub).digest().subarray(0, 16);
  const signedData = bytesField(1, idBytes);
  const signature = sign('sha256', Buffer.concat([SIGNATURE_CONTEXT, u32le(signedData.length), signedData, zip]), privateKey);
  const proof = Buffer.concat([bytesField(1, pub), bytesField(2, signature)]);
  const header = Buffer.concat([bytesField(2, proof), bytesField(10000, signedData)]);
  const crx = Buffer.concat([Buffer.from('Cr24', 'latin1'), u32le(3), u32le(header.length), header, zip]);
  return { crx, id: idFromBytes(idBytes) };
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
