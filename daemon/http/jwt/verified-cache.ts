// Verified session tokens, so that a token sent again is not verified again (an EdDSA or ES256
// signature check is ~200 µs of CPU; a Map look-up is well under 1 µs). Keyed by the exact token
// string: a hit is the same bytes that were verified, never a prefix or a digest of them. Each
// entry keeps the token's `exp` and `nbf`, checked against the clock on every use with the
// verification's own leeway, so a cached token is refused at the same second a verified one would
// be. What else the verification checks (audience, session, the key) is fixed for the life of the
// cache: the owner empties it whenever the verifying keys change (a reload). Bounded: the oldest
// entry goes when a new one would pass MAX_ENTRIES. Why a look-up by an attacker's string leaks
// nothing useful: docs/tokens.md, "The cache of verified tokens".

/** Entries at most; the oldest inserted is dropped first. */
export const VERIFIED_CACHE_MAX_ENTRIES = 1024;
/**
 * Longer tokens are verified every time and never cached. V8 hashes a string of more than 16,383
 * characters by its length alone, so two long tokens of one length would be told apart by comparing
 * their characters; below this limit a miss costs a hash of the whole string and (save a full hash
 * collision) no character comparison, whatever the guess shares with a cached token.
 */
export const VERIFIED_CACHE_MAX_TOKEN_CHARS = 4096;

export interface TimeWindow {
  /** `exp`, seconds since the epoch (required of every session token). */
  exp: number;
  /** `nbf`, seconds since the epoch, when the token has one. */
  nbf: number | undefined;
}

/**
 * Whether a token with this `exp`/`nbf` is valid at `nowSec` with `toleranceSec` of leeway: the
 * same rule as the verification (jose): `nbf` ≤ now + leeway and `exp` > now − leeway.
 */
export function inWindow(w: TimeWindow, nowSec: number, toleranceSec: number): boolean {
  if (w.nbf !== undefined && w.nbf > nowSec + toleranceSec) return false;
  return w.exp > nowSec - toleranceSec;
}

interface Entry<T> extends TimeWindow {
  value: T;
}

export class VerifiedTokenCache<T> {
  private readonly entries = new Map<string, Entry<T>>();

  constructor(
    private readonly toleranceSec: number,
    private readonly maxEntries = VERIFIED_CACHE_MAX_ENTRIES,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  /**
   * The value cached for exactly this token while it is within its time window at `nowSec`;
   * undefined on a miss. An entry outside its window is dropped (the caller verifies the token
   * again, and that refusal names the fault).
   */
  get(token: string, nowSec: number): T | undefined {
    const e = this.entries.get(token);
    if (e === undefined) return undefined;
    if (!inWindow(e, nowSec, this.toleranceSec)) {
      this.entries.delete(token);
      return undefined;
    }
    return e.value;
  }

  /** Caches a token just verified (a token past the length limit is not cached). */
  set(token: string, window: TimeWindow, value: T): void {
    if (token.length > VERIFIED_CACHE_MAX_TOKEN_CHARS) return;
    this.entries.delete(token);
    while (this.entries.size >= this.maxEntries) {
      const oldest = this.entries.keys().next();
      if (oldest.done === true) break;
      this.entries.delete(oldest.value);
    }
    this.entries.set(token, { exp: window.exp, nbf: window.nbf, value });
  }

  /** Drops every entry: the verifying keys changed. */
  clear(): void {
    this.entries.clear();
  }
}
