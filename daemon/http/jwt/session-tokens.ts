// Session tokens: JWTs bound to this daemon's session, with scopes, a short life and an audience.
// Two sources verify: the control plane's public keys (BROWSERD_JWT_KEYS_FILE, re-read on SIGHUP)
// and the daemon's own Ed25519 key (signing-key.ts), with which it signs the tokens it hands out.
// Every refusal is an UnauthorizedError whose message names the fault (alg none, HMAC, unknown kid,
// bad signature, expired, not yet valid, another audience, another session). No token is logged.
// A token that verified is kept (verified-cache.ts) until its exp or a reload of the keys: sent
// again, it costs a Map look-up and its time window checked against the clock, not a signature.
import { SignJWT, decodeProtectedHeader, errors, jwtVerify, type JWTPayload } from 'jose';
import type { KeyObject } from 'node:crypto';
import { UnauthorizedError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import { TOKEN_ALGS, readPublicKeys, type PublicKey, type TokenAlg } from './public-keys.js';
import { loadOrCreateSigningKey, type SigningKey } from './signing-key.js';
import { VerifiedTokenCache } from './verified-cache.js';

/** Leeway for exp, nbf and iat against clock skew between the control plane and the VM. */
export const CLOCK_TOLERANCE_SEC = 5;
/** A JWT: three base64url parts, the first a JSON object (`eyJ` is `{"` in base64url). */
const JWT_SHAPE = /^eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*$/;

export interface SessionTokenSettings {
  sessionId: string;
  audience: string;
  /** BROWSERD_JWT_KEYS_FILE */
  keysFile: string | null;
  stateDir: string;
  /** The life of the tokens the daemon signs. */
  ttlSec: number;
  /** The clock, in ms since the epoch (tests move it); Date.now by default. */
  now?: () => number;
  /** Each verification's outcome: answered from the cache, verified (a signature checked), or refused. */
  onCheck?: (outcome: 'cached' | 'verified' | 'refused') => void;
}

/** What a verified token grants (the auth module turns it into an Identity). Shared by every use of a cached token: never changed. */
export interface TokenGrant {
  /** `jwt:self` for the daemon's own tokens, else `jwt:<kid>`. */
  readonly keyId: string;
  readonly scopes: readonly string[];
  readonly project: string | null;
  readonly expiresAt: number;
}

const iso = (sec: unknown): string => (typeof sec === 'number' ? new Date(sec * 1000).toISOString() : String(sec));

export class SessionTokens {
  /** Tokens that verified, with their grants; emptied when the control plane's keys change. */
  private readonly verified = new VerifiedTokenCache<TokenGrant>(CLOCK_TOLERANCE_SEC);
  /** Bumped at each change of the keys: a verification begun before it is not cached after it. */
  private keysGeneration = 0;
  private readonly now: () => number;

  private constructor(
    private readonly settings: SessionTokenSettings,
    private readonly log: Logger,
    private readonly own: SigningKey,
    private controlPlane: PublicKey[],
  ) {
    this.now = settings.now ?? Date.now;
  }

  /** Throws Error naming the file (the keys file, or the signing key in the state dir). */
  static create(settings: SessionTokenSettings, log: Logger): SessionTokens {
    const keys = settings.keysFile === null ? [] : readPublicKeys(settings.keysFile);
    if (settings.keysFile !== null) log.info({ event: 'jwt_keys', path: settings.keysFile, keys: keys.length }, 'control-plane session-token keys loaded');
    return new SessionTokens(settings, log, loadOrCreateSigningKey(settings.stateDir, log), keys);
  }

  static looksLikeJwt(token: string): boolean {
    return JWT_SHAPE.test(token);
  }

  get ownKid(): string {
    return this.own.kid;
  }

  get ttlSec(): number {
    return this.settings.ttlSec;
  }

  /** SIGHUP: the keys file again; a broken file keeps the old keys and logs why. */
  reload(): void {
    if (this.settings.keysFile === null) return;
    try {
      this.controlPlane = readPublicKeys(this.settings.keysFile);
      this.keysGeneration++;
      this.verified.clear();
      this.log.info({ event: 'jwt_keys_reload', outcome: 'ok', keys: this.controlPlane.length }, 'session-token keys file reloaded');
    } catch (err) {
      this.log.error({ event: 'jwt_keys_reload', outcome: 'kept_old', reason: (err as Error).message }, 'session-token keys file not reloaded; the previous keys stay in force');
    }
  }

  /**
   * A token of this daemon's own key for `scopes`, valid for ttlSec (at most the configured life),
   * and never past `notAfter` (epoch seconds: the expiry of the credential it is derived from).
   */
  async issue(scopes: readonly string[], project: string | null, opts: { ttlSec?: number; notAfter?: number | null } = {}): Promise<{ token: string; expiresAt: number }> {
    const now = Math.floor(this.now() / 1000);
    const life = Math.min(opts.ttlSec ?? this.settings.ttlSec, this.settings.ttlSec);
    const expiresAt = opts.notAfter === undefined || opts.notAfter === null ? now + life : Math.min(now + life, opts.notAfter);
    const claims: JWTPayload = { scope: scopes.join(' '), session_id: this.settings.sessionId };
    if (project !== null) claims.project = project;
    const token = await new SignJWT(claims)
      .setProtectedHeader({ alg: 'EdDSA', kid: this.own.kid, typ: 'JWT' })
      .setIssuer('browserd')
      .setSubject(this.settings.sessionId)
      .setAudience(this.settings.audience)
      .setIssuedAt(now)
      .setExpirationTime(expiresAt)
      .sign(this.own.privateKey);
    return { token, expiresAt };
  }

  /** Tokens held as verified now (for tests and the docs' bound). */
  get cachedCount(): number {
    return this.verified.size;
  }

  /**
   * The grant of a token verified before and still within its exp/nbf, else undefined (then
   * verify() it). Synchronous: a request with a cached token waits on nothing.
   */
  cached(token: string): TokenGrant | undefined {
    const grant = this.verified.get(token, Math.floor(this.now() / 1000));
    if (grant !== undefined) this.settings.onCheck?.('cached');
    return grant;
  }

  /** The grant of a valid token (from the cache when it was verified before), else UnauthorizedError naming the fault. */
  async verify(token: string): Promise<TokenGrant> {
    const hit = this.cached(token);
    if (hit !== undefined) return hit;
    try {
      const generation = this.keysGeneration;
      const { grant, nbf } = await this.verifyFully(token);
      this.settings.onCheck?.('verified');
      // Keys reloaded meanwhile: this verdict may rest on a key that is gone.
      if (generation === this.keysGeneration) this.verified.set(token, { exp: grant.expiresAt, nbf }, grant);
      return grant;
    } catch (err) {
      this.settings.onCheck?.('refused');
      throw err;
    }
  }

  private async verifyFully(token: string): Promise<{ grant: TokenGrant; nbf: number | undefined }> {
    if (!SessionTokens.looksLikeJwt(token)) throw new UnauthorizedError('the session token is not a JWT (three base64url parts, the first a JSON header)');
    let header: ReturnType<typeof decodeProtectedHeader>;
    try {
      header = decodeProtectedHeader(token);
    } catch {
      throw new UnauthorizedError("the session token's header is not base64url JSON");
    }
    const alg = header.alg;
    if (typeof alg !== 'string' || alg === '') throw new UnauthorizedError('the session token names no alg');
    if (alg.toLowerCase() === 'none') throw new UnauthorizedError('the session token is unsigned (alg none); only EdDSA, ES256 and RS256 tokens are accepted');
    if (/^HS/i.test(alg)) {
      throw new UnauthorizedError(`the session token is signed with HMAC (${alg}); only EdDSA, ES256 and RS256 are accepted (an HMAC made with a public key proves nothing)`);
    }
    if (!TOKEN_ALGS.includes(alg as TokenAlg)) throw new UnauthorizedError(`the session token's alg ${alg} is not accepted; only EdDSA, ES256 and RS256`);
    const kid = typeof header.kid === 'string' ? header.kid : undefined;
    const candidates = this.candidates(alg as TokenAlg, kid);
    let payload: JWTPayload | null = null;
    let own = false;
    let lastSignatureError = false;
    for (const c of candidates) {
      try {
        payload = (await jwtVerify(token, c.key, { algorithms: [alg], audience: this.settings.audience, clockTolerance: CLOCK_TOLERANCE_SEC, requiredClaims: ['exp'], currentDate: new Date(this.now()) })).payload;
        own = c.own;
        break;
      } catch (err) {
        if (err instanceof errors.JWSSignatureVerificationFailed) {
          lastSignatureError = true;
          continue;
        }
        throw this.claimFault(err);
      }
    }
    if (payload === null) {
      throw new UnauthorizedError(lastSignatureError ? `the session token's signature does not verify${kid === undefined ? '' : ` with the key ${kid}`}` : 'the session token could not be verified');
    }
    this.checkSession(payload);
    const scope = typeof payload.scope === 'string' ? payload.scope.split(' ').filter(Boolean) : [];
    const project = typeof payload.project === 'string' && payload.project !== '' ? payload.project : null;
    const grant: TokenGrant = { keyId: own ? 'jwt:self' : `jwt:${kid ?? 'control-plane'}`, scopes: scope, project, expiresAt: payload.exp as number };
    // jose checked that exp (required) and nbf, when given, are numbers.
    return { grant, nbf: typeof payload.nbf === 'number' ? payload.nbf : undefined };
  }

  private candidates(alg: TokenAlg, kid: string | undefined): { key: KeyObject; own: boolean }[] {
    if (kid !== undefined) {
      if (kid === this.own.kid) {
        if (alg !== 'EdDSA') throw new UnauthorizedError(`the key ${kid} verifies EdDSA, not ${alg}`);
        return [{ key: this.own.publicKey, own: true }];
      }
      const k = this.controlPlane.find((c) => c.kid === kid);
      if (k === undefined) {
        throw new UnauthorizedError(
          `no key has the kid "${kid}" (the control plane's keys${this.settings.keysFile === null ? ': BROWSERD_JWT_KEYS_FILE is not set' : ` of BROWSERD_JWT_KEYS_FILE`}, and this daemon's own)`,
        );
      }
      if (k.alg !== alg) throw new UnauthorizedError(`the key ${kid} verifies ${k.alg}, not ${alg}`);
      return [{ key: k.key, own: false }];
    }
    const keys = this.controlPlane.filter((c) => c.alg === alg).map((c) => ({ key: c.key, own: false }));
    if (keys.length === 0) throw new UnauthorizedError(`the session token has no kid, and no key of the control plane verifies ${alg}`);
    return keys;
  }

  /** A claim jose refused, as the fault it is. */
  private claimFault(err: unknown): UnauthorizedError {
    if (err instanceof errors.JWTExpired) return new UnauthorizedError(`the session token expired at ${iso(err.payload.exp)}`);
    if (err instanceof errors.JWTClaimValidationFailed) {
      const p = err.payload;
      if (err.claim === 'nbf') return new UnauthorizedError(`the session token is not valid before ${iso(p.nbf)}`);
      if (err.claim === 'aud') {
        return new UnauthorizedError(p.aud === undefined ? `the session token has no audience (aud); it must be "${this.settings.audience}"` : `the session token is for the audience ${JSON.stringify(p.aud)}, not "${this.settings.audience}"`);
      }
      if (err.claim === 'exp') return new UnauthorizedError(err.reason === 'missing' ? 'the session token has no exp: tokens without an expiry are refused' : 'the session token has an exp that is not a number');
      if (err.claim === 'iat') return new UnauthorizedError(`the session token was issued in the future (iat ${iso(p.iat)})`);
      return new UnauthorizedError(`the session token's ${err.claim} claim is invalid: ${err.message}`);
    }
    if (err instanceof errors.JOSEError) return new UnauthorizedError(`the session token is invalid: ${err.message}`);
    return new UnauthorizedError('the session token is invalid');
  }

  private checkSession(payload: JWTPayload): void {
    const want = this.settings.sessionId;
    const named = [payload.sub, payload.session_id].filter((v): v is string => typeof v === 'string');
    if (named.length === 0) throw new UnauthorizedError(`the session token names no session (sub); it must be "${want}"`);
    const other = named.find((s) => s !== want);
    if (other !== undefined) throw new UnauthorizedError(`the session token is for the session "${other}", not this daemon's "${want}"`);
  }
}
