// The control plane's public keys for session tokens (BROWSERD_JWT_KEYS_FILE): a JWKS (JSON
// `{"keys":[…]}`), or PEM (one or more `PUBLIC KEY` / `CERTIFICATE` blocks). Each key gets the alg
// it verifies (EdDSA for Ed25519, ES256 for P-256, RS256 for RSA of at least 2048 bits) and a kid
// (the JWK's own, else its RFC 7638 thumbprint). Private keys, symmetric keys and other curves are
// refused, naming the entry: an HMAC secret can never be a verification key here.
import { X509Certificate, createPublicKey, hash, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';

export type TokenAlg = 'EdDSA' | 'ES256' | 'RS256';
export const TOKEN_ALGS: readonly TokenAlg[] = ['EdDSA', 'ES256', 'RS256'];

export interface PublicKey {
  kid: string;
  alg: TokenAlg;
  key: KeyObject;
}

const MIN_RSA_BITS = 2048;

/** The alg a public key verifies, or why it cannot be one. */
function algOf(key: KeyObject): TokenAlg | string {
  if (key.type !== 'public') return `a ${key.type} key (only public keys)`;
  const t = key.asymmetricKeyType;
  const d = key.asymmetricKeyDetails;
  if (t === 'ed25519') return 'EdDSA';
  if (t === 'ec' && d?.namedCurve === 'prime256v1') return 'ES256';
  if (t === 'rsa') return (d?.modulusLength ?? 0) >= MIN_RSA_BITS ? 'RS256' : `an RSA key of ${d?.modulusLength} bits (at least ${MIN_RSA_BITS})`;
  return `a key of type ${t}${d?.namedCurve ? ` (${d.namedCurve})` : ''} (only Ed25519, P-256 and RSA)`;
}

function fromKeyObject(key: KeyObject, kid: string | undefined, where: string, declaredAlg?: string): PublicKey {
  const alg = algOf(key);
  if (!TOKEN_ALGS.includes(alg as TokenAlg)) throw new Error(`${where}: ${alg}`);
  if (declaredAlg !== undefined && declaredAlg !== alg) throw new Error(`${where}: alg ${declaredAlg} does not fit the key (it verifies ${alg})`);
  return { kid: kid ?? thumbprint(key), alg: alg as TokenAlg, key };
}

function parseJwks(json: unknown): { jwk: Record<string, unknown>; where: string }[] {
  const keys = (json as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys)) throw new Error('is JSON but not a JWKS (an object with a "keys" array)');
  return keys.map((jwk: unknown, i) => {
    if (typeof jwk !== 'object' || jwk === null) throw new Error(`keys.${i}: is not an object`);
    return { jwk: jwk as Record<string, unknown>, where: `keys.${i}` };
  });
}

/** The keys of the file; throws an Error whose message names the file and the entry. */
export function readPublicKeys(file: string): PublicKey[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`cannot read ${file}: ${(err as Error).message}`, { cause: err });
  }
  const out: PublicKey[] = [];
  try {
    if (text.trimStart().startsWith('{')) {
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch (err) {
        throw new Error(`is not JSON: ${(err as Error).message}`, { cause: err });
      }
      for (const { jwk, where } of parseJwks(json)) {
        if (jwk.kty === 'oct') throw new Error(`${where}: a symmetric (oct) key: HMAC tokens are never accepted`);
        if ('d' in jwk) throw new Error(`${where}: a private key (it has "d"): give only the public part`);
        let key: KeyObject;
        try {
          key = createPublicKey({ key: jwk as JsonWebKeyInput['key'], format: 'jwk' });
        } catch (err) {
          throw new Error(`${where}: not a usable JWK: ${(err as Error).message}`, { cause: err });
        }
        const kid = typeof jwk.kid === 'string' && jwk.kid !== '' ? jwk.kid : undefined;
        out.push(fromKeyObject(key, kid, where, typeof jwk.alg === 'string' ? jwk.alg : undefined));
      }
    } else {
      const blocks = [...text.matchAll(/-----BEGIN ([A-Z0-9 ]+)-----[\s\S]*?-----END \1-----/g)];
      if (blocks.length === 0) throw new Error('is neither a JWKS (JSON) nor PEM');
      for (const [i, m] of blocks.entries()) {
        const where = `PEM block ${i + 1} (${m[1]})`;
        if (/PRIVATE/.test(m[1] ?? '')) throw new Error(`${where}: a private key: give only the public part`);
        let key: KeyObject;
        try {
          key = m[1] === 'CERTIFICATE' ? new X509Certificate(m[0]).publicKey : createPublicKey(m[0]);
        } catch (err) {
          throw new Error(`${where}: ${(err as Error).message}`, { cause: err });
        }
        out.push(fromKeyObject(key, undefined, where));
      }
    }
  } catch (err) {
    throw new Error(`${file}: ${(err as Error).message}`, { cause: err });
  }
  if (out.length === 0) throw new Error(`${file}: holds no key`);
  const seen = new Set<string>();
  for (const k of out) {
    if (seen.has(k.kid)) throw new Error(`${file}: two keys have the kid "${k.kid}"`);
    seen.add(k.kid);
  }
  return out;
}

/** RFC 7638: sha256 of the key's required JWK members in lexicographic order, base64url. */
export function thumbprint(key: KeyObject): string {
  const jwk = key.export({ format: 'jwk' }) as Record<string, string>;
  const members = jwk.kty === 'RSA' ? ['e', 'kty', 'n'] : jwk.kty === 'EC' ? ['crv', 'kty', 'x', 'y'] : ['crv', 'kty', 'x'];
  const text = JSON.stringify(Object.fromEntries(members.map((m) => [m, jwk[m]])));
  return hash('sha256', text, 'base64url');
}

type JsonWebKeyInput = Extract<Parameters<typeof createPublicKey>[0], { format: 'jwk' }>;
