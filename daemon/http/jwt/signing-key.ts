// The daemon's own signing key for the session tokens it hands out (the `?jwt=` of cdp_ws_url):
// Ed25519, kept as PKCS#8 PEM in `<state>/jwt-signing-key.pem` (0600, created at the first start,
// never logged). Its kid is the RFC 7638 thumbprint of the public key, prefixed `browserd-`.
import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from '../../core/log.js';
import { thumbprint } from './public-keys.js';

export const SIGNING_KEY_FILE = 'jwt-signing-key.pem';

export interface SigningKey {
  kid: string;
  privateKey: KeyObject;
  publicKey: KeyObject;
}

/** Reads the key, or creates it; throws Error naming the file. */
export function loadOrCreateSigningKey(stateDir: string, log: Logger): SigningKey {
  const file = path.join(stateDir, SIGNING_KEY_FILE);
  let privateKey: KeyObject | null;
  try {
    privateKey = createPrivateKey(readFileSync(file, 'utf8'));
    if (privateKey.asymmetricKeyType !== 'ed25519') throw new Error(`holds a ${privateKey.asymmetricKeyType} key, not Ed25519`);
    chmodSync(file, 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new Error(`${file}: ${(err as Error).message}`, { cause: err });
    privateKey = null;
  }
  if (privateKey === null) {
    privateKey = generateKeyPairSync('ed25519').privateKey;
    writeFileSync(file, privateKey.export({ format: 'pem', type: 'pkcs8' }), { mode: 0o600, flag: 'wx' });
    log.info({ event: 'jwt_signing_key', path: file, created: true }, 'wrote a new session-token signing key');
  }
  const publicKey = createPublicKey(privateKey);
  const kid = `browserd-${thumbprint(publicKey)}`;
  return { kid, privateKey, publicKey };
}
