// Bearer authentication with scopes. Tokens are only ever held as sha256 digests and compared
// in constant time; every key is compared, whichever matches, so timing says nothing of which.
// A bearer that is no key but has the shape of a JWT, and the `?jwt=` of a URL, are session
// tokens (jwt/session-tokens.ts): verified, their scopes those of the SCOPES they name.
import { hash, randomBytes, timingSafeEqual } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync, chmodSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { lazy } from '../core/lazy.js';
import { ConfigError, type Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import type { Metrics } from '../core/metrics.js';
import { ForbiddenError, UnauthorizedError } from '../core/errors.js';
import { SessionTokens, type TokenGrant } from './jwt/session-tokens.js';

const SCOPES = [
  'browser:read',
  'browser:write',
  'browser:configure',
  'processes:exec',
  'processes:write',
  /** as_root, and as_user naming root or the daemon's own user (docs/security.md). */
  'processes:root',
  'extensions:write',
  'proxies:read',
  'proxies:write',
  'proxies:check',
  'profiles:read',
  'profiles:write',
  'cdp',
  'computer',
  /** List and invoke the tools pages register (WebMCP: docs/webmcp.md); the page's own code runs, nothing of the agent's. */
  'webmcp',
  'playwright:execute',
  'logs:read',
  'fs:read',
  'fs:write',
  'replays:read',
  'replays:write',
  'browser:fetch',
  'telemetry:read',
  'telemetry:write',
  'live:view',
  'live:control',
  /** GET /browsers/{id}/network/egress-policy. */
  'network:read',
  /** PUT /browsers/{id}/network/egress-policy (docs/egress.md). */
  'network:write',
] as const;
export type Scope = (typeof SCOPES)[number];
/** Every scope, in the order tokens list them. */
export const ALL_SCOPES: readonly Scope[] = SCOPES;

export interface Identity {
  keyId: string;
  scopes: ReadonlySet<Scope>;
  project: string | null;
  /** When the credential stops being valid (epoch seconds): a session token's exp; null for a key (no expiry). */
  expiresAt: number | null;
}

/** A token the daemon signed for a caller (derive()): what it grants and until when. */
export interface DerivedToken {
  token: string;
  scopes: Scope[];
  project: string | null;
  /** epoch seconds */
  expiresAt: number;
}

interface Key extends Identity {
  digest: Buffer;
}

const keysFileSchema = lazy(() => z
  .array(
    z.object({
      id: z.string().min(1).max(128),
      sha256: z.string().regex(/^[0-9a-fA-F]{64}$/, 'must be 64 hex digits'),
      scopes: z.array(z.enum(SCOPES)),
      project: z.string().min(1).optional(),
    }),
  )
  .superRefine((keys, ctx) => {
    const seen = new Set<string>();
    keys.forEach((k, i) => {
      if (seen.has(k.id)) ctx.addIssue({ code: 'custom', path: [i, 'id'], message: `duplicate id "${k.id}"` });
      seen.add(k.id);
    });
  }));

export function sha256(token: string): Buffer {
  // One-shot (no Hash object): the token of every request is hashed.
  return hash('sha256', token, 'buffer');
}

function keyFromToken(id: string, token: string): Key {
  return { keyId: id, scopes: new Set(SCOPES), project: null, expiresAt: null, digest: sha256(token) };
}

/** Reads and validates a keys file; throws Error with a message naming the entry and field. */
function readKeysFile(file: string): Key[] {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new Error(`cannot read ${file} as JSON: ${(err as Error).message}`, { cause: err });
  }
  const parsed = keysFileSchema().safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`${file}: ${issue?.path.join('.') || '(root)'}: ${issue?.message}`);
  }
  return parsed.data.map((k) => ({
    keyId: k.id,
    scopes: new Set(k.scopes),
    project: k.project ?? null,
    expiresAt: null,
    digest: Buffer.from(k.sha256, 'hex'),
  }));
}

export class KeyRing {
  private keys: Key[];
  /** Keys that live only in memory, for as long as their holder (a Playwright runner's CDP token). */
  private readonly ephemeral = new Map<string, Key>();

  private constructor(
    private readonly config: Config,
    private readonly log: Logger,
    private readonly tokenKey: Key | null,
    fileKeys: Key[],
    /** Session tokens (JWTs): the control plane's keys and the daemon's own signing key. */
    readonly sessionTokens: SessionTokens,
  ) {
    this.keys = tokenKey ? [tokenKey, ...fileKeys] : fileKeys;
  }

  /**
   * BROWSERD_TOKEN and/or BROWSERD_KEYS_FILE; with neither, `<state>/token` (created 0600 on
   * first start, path logged, never the token). Throws ConfigError for a bad keys file.
   */
  static create(config: Config, log: Logger, metrics?: Metrics): KeyRing {
    let fileKeys: Key[] = [];
    if (config.keysFile !== null) {
      try {
        fileKeys = readKeysFile(config.keysFile);
      } catch (err) {
        throw new ConfigError('BROWSERD_KEYS_FILE', (err as Error).message);
      }
    }
    let tokenKey: Key | null = null;
    if (config.token !== null) tokenKey = keyFromToken('env-token', config.token);
    else if (config.keysFile === null) tokenKey = keyFromToken('token-file', loadOrCreateTokenFile(config.stateDir, log));
    let sessionTokens: SessionTokens;
    try {
      sessionTokens = SessionTokens.create({ sessionId: config.sessionId, audience: config.jwt.audience, keysFile: config.jwt.keysFile, stateDir: config.stateDir, ttlSec: config.jwt.ttlSec, onCheck: metrics && ((outcome) => metrics.sessionTokenChecks.inc({ outcome })) }, log);
    } catch (err) {
      throw new ConfigError(config.jwt.keysFile !== null && (err as Error).message.includes(config.jwt.keysFile) ? 'BROWSERD_JWT_KEYS_FILE' : 'BROWSERD_STATE_DIR', (err as Error).message);
    }
    return new KeyRing(config, log, tokenKey, fileKeys, sessionTokens);
  }

  /** SIGHUP: re-read the keys file and the session-token keys file; a broken file keeps the old keys and logs why. */
  reload(): void {
    this.sessionTokens.reload();
    if (this.config.keysFile === null) {
      this.log.info({ event: 'keys_reload', outcome: 'skipped' }, 'no BROWSERD_KEYS_FILE to reload');
      return;
    }
    try {
      const fileKeys = readKeysFile(this.config.keysFile);
      this.keys = this.tokenKey ? [this.tokenKey, ...fileKeys] : fileKeys;
      this.log.info({ event: 'keys_reload', outcome: 'ok', keys: fileKeys.length }, 'keys file reloaded');
    } catch (err) {
      this.log.error(
        { event: 'keys_reload', outcome: 'kept_old', reason: (err as Error).message },
        'keys file not reloaded; the previous keys stay in force',
      );
    }
  }

  /**
   * Adds a key held only in memory (as a sha256 digest, like every key), never written anywhere
   * and not touched by a reload; returns the function that revokes it (idempotent). `id` must be
   * unique among the ephemeral keys (it is the key_id of the requests made with it).
   */
  addEphemeral(id: string, token: string, scopes: readonly Scope[]): () => void {
    if (this.ephemeral.has(id)) throw new Error(`an ephemeral key ${id} exists already`);
    const key: Key = { keyId: id, scopes: new Set(scopes), project: null, expiresAt: null, digest: sha256(token) };
    this.ephemeral.set(id, key);
    return () => {
      if (this.ephemeral.get(id) === key) this.ephemeral.delete(id);
    };
  }

  /** The identity of the key behind an `Authorization` header, or UnauthorizedError (keys only). */
  authenticate(header: string | undefined): Identity {
    const token = bearerOf(header);
    const found = this.lookup(token);
    if (found === null) throw new UnauthorizedError('unknown token');
    return found;
  }

  /**
   * A request's identity: the `Authorization` header (a key, or else a session token), or without
   * it the `?jwt=` of the URL (`urlJwt`); UnauthorizedError naming the fault. A key answers at once,
   * a session token after its verification (a promise).
   */
  authenticateRequest(header: string | undefined, urlJwt: string | undefined): Identity | Promise<Identity> {
    if (header === undefined && urlJwt !== undefined) return this.fromSessionToken(urlJwt);
    const token = bearerOf(header);
    const found = this.lookup(token);
    if (found !== null) return found;
    if (SessionTokens.looksLikeJwt(token)) return this.fromSessionToken(token);
    throw new UnauthorizedError('unknown token');
  }

  private lookup(token: string): Identity | null {
    const digest = sha256(token);
    let found: Key | null = null;
    // No early exit: every key costs the same comparison.
    for (const key of this.keys) if (timingSafeEqual(digest, key.digest) && found === null) found = key;
    for (const key of this.ephemeral.values()) if (timingSafeEqual(digest, key.digest) && found === null) found = key;
    return found === null ? null : { keyId: found.keyId, scopes: found.scopes, project: found.project, expiresAt: null };
  }

  /** A token verified before (and still in its time window) answers at once, else after its verification. */
  private fromSessionToken(token: string): Identity | Promise<Identity> {
    const hit = this.sessionTokens.cached(token);
    if (hit !== undefined) return identityOf(hit);
    return this.sessionTokens.verify(token).then(identityOf);
  }

  /**
   * The one rule of every token this daemon signs for a caller (the record's `jwt`, cdp_ws_url and
   * browser_live_view_url; POST /browsers/{id}/tokens): it never out-scopes and never outlives the
   * credential that asked for it. Its scopes are the caller's, or those of `scopes` the caller holds;
   * its project the caller's; its expiry the earliest of now + `ttlSec`, now + BROWSERD_JWT_TTL_SEC
   * and the caller's own expiry (a session token's exp; a key has none).
   */
  derive(identity: Identity, want: { scopes?: readonly Scope[]; ttlSec?: number } = {}): Promise<DerivedToken> {
    const scopes = SCOPES.filter((s) => identity.scopes.has(s) && (want.scopes === undefined || want.scopes.includes(s)));
    return this.sessionTokens
      .issue(scopes, identity.project, { ttlSec: want.ttlSec, notAfter: identity.expiresAt })
      .then(({ token, expiresAt }) => ({ token, scopes, project: identity.project, expiresAt }));
  }
}

const KNOWN_SCOPES: ReadonlySet<string> = new Set(SCOPES);

function identityOf(grant: TokenGrant): Identity {
  // Scopes this daemon does not know grant nothing (a control plane may name newer ones).
  const scopes = new Set(grant.scopes.filter((s): s is Scope => KNOWN_SCOPES.has(s)));
  return { keyId: grant.keyId, scopes, project: grant.project, expiresAt: grant.expiresAt };
}

function bearerOf(header: string | undefined): string {
  const m = header === undefined ? null : /^Bearer +(\S+) *$/i.exec(header);
  if (!m || m[1] === undefined) throw new UnauthorizedError();
  return m[1];
}

export function requireScope(identity: Identity, scope: Scope): void {
  if (!identity.scopes.has(scope)) throw new ForbiddenError(scope);
}

function loadOrCreateTokenFile(stateDir: string, log: Logger): string {
  const file = path.join(stateDir, 'token');
  try {
    const token = readFileSync(file, 'utf8').trim();
    if (token.length >= 16) {
      chmodSync(file, 0o600);
      log.info({ event: 'token_file', path: file, created: false }, 'using the bearer token in the token file');
      return token;
    }
    log.warn({ event: 'token_file', path: file, replaced: true }, 'the token file holds fewer than 16 characters: writing a new token');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
      throw new ConfigError('BROWSERD_STATE_DIR', `cannot read ${file}: ${(err as Error).message}`);
    }
  }
  const token = randomBytes(32).toString('base64url');
  try {
    mkdirSync(stateDir, { recursive: true, mode: 0o700 });
    writeFileSync(file, `${token}\n`, { mode: 0o600, flag: 'w' });
    chmodSync(file, 0o600);
  } catch (err) {
    throw new ConfigError('BROWSERD_STATE_DIR', `cannot write ${file}: ${(err as Error).message}`);
  }
  log.info({ event: 'token_file', path: file, created: true }, 'wrote a new bearer token to the token file');
  return token;
}
