// What never leaves the daemon in an event, and how big one may be. Redaction goes by what a value
// is, wherever it appears (a header, a redirect target, console text, a stack frame, a title):
//   - a header that carries a credential by its name (cookies, authorization, proxy credentials,
//     API keys, tokens) loses its value whole;
//   - a URL (absolute, or the query and fragment of a relative one, as in Location or Referer)
//     loses its user info and the values of secret-looking parameters, in the query and in the
//     fragment (#access_token=…);
//   - name=value pairs in any text (a cookie string, a form body logged to the console) lose the
//     values of secret-looking names;
//   - an authorization value (`Bearer …`, `Basic …`) and a JWT (`eyJ….….…`) anywhere in text lose
//     their credential.
// Strings past a limit are cut, and the event says `truncated: true`. Bodies are never taken.

/** A header whose value is replaced by "[redacted]". */
const SECRET_HEADER = /^(cookie|set-cookie|set-cookie2|authorization|proxy-authorization|proxy-authenticate|www-authenticate|x-api-key|api-key|x-auth-token|x-access-token|x-csrf-token|x-xsrf-token|x-amz-security-token)$|token|secret|password|session/i;
/** A query parameter whose value is replaced (jwt, token, key, signature, password, …). */
const SECRET_PARAM = /jwt|token|secret|passw|pwd|auth|key|sig|session|code|credential/i;

export const REDACTED = '[redacted]';
/** One string value (a URL, a console argument, a header) at most this many characters. */
export const MAX_STRING_CHARS = 2048;
/** Console arguments kept per event. */
export const MAX_ARGS = 16;

export interface Cut {
  /** Set when something was cut. */
  truncated: boolean;
}

export function cutString(s: string, cut: Cut, max = MAX_STRING_CHARS): string {
  if (s.length <= max) return s;
  cut.truncated = true;
  return `${s.slice(0, max)}…`;
}

/** URLs whose redaction is remembered (a page's URL is redacted for every event of the page, a request's twice). */
const URL_MEMO_ENTRIES = 64;
/** Longer URLs are redacted each time (the memo holds at most URL_MEMO_ENTRIES × this many characters, twice). */
const URL_MEMO_MAX_CHARS = 2048;
const urlMemo = new Map<string, { out: string; truncated: boolean }>();

/** A URL without credentials: user info dropped, secret-looking query values replaced, then cut. */
export function redactUrl(raw: string, cut: Cut): string {
  const hit = urlMemo.get(raw);
  if (hit !== undefined) {
    if (hit.truncated) cut.truncated = true;
    return hit.out;
  }
  const own: Cut = { truncated: false };
  const out = redactUrlOnce(raw, own);
  if (raw.length <= URL_MEMO_MAX_CHARS) {
    if (urlMemo.size >= URL_MEMO_ENTRIES) urlMemo.delete(urlMemo.keys().next().value as string);
    urlMemo.set(raw, { out, truncated: own.truncated });
  }
  if (own.truncated) cut.truncated = true;
  return out;
}

function redactUrlOnce(raw: string, cut: Cut): string {
  let out = raw;
  if (/^(https?|wss?|ftp):/i.test(raw) && URL.canParse(raw)) {
    const u = new URL(raw);
    if (u.username !== '' || u.password !== '') {
      u.username = '';
      u.password = '';
    }
    for (const k of [...u.searchParams.keys()]) if (SECRET_PARAM.test(k)) u.searchParams.set(k, REDACTED);
    if (u.hash.includes('=')) u.hash = redactPairs(u.hash);
    out = u.toString();
  } else if (/^data:/i.test(raw)) {
    out = raw.slice(0, raw.indexOf(',') + 1 || 64);
    if (out.length < raw.length) cut.truncated = true;
    return out;
  }
  return cutString(out, cut);
}

/** A URL anywhere in text: scheme://, up to a space, quote or angle bracket. */
const URL_IN_TEXT = /\b(?:https?|wss?|ftp):\/\/[^\s"'<>`]+/gi;
/** name=value where the name looks secret: in a query, a fragment, a cookie string, a form body. */
const SECRET_PAIR = /(^|[?&#;,\s])([^=?&#;,\s]*?)=([^&#;,\s"'<>]*)/g;
/** An authorization value: its scheme, then the credential. */
const AUTH_VALUE = /\b(Bearer|Basic|Digest|Token|Negotiate)\s+[A-Za-z0-9._~+/=-]{6,}/gi;
/** A JWT: three base64url parts, the first a JSON header. */
const JWT = /\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*/g;

/** name=value pairs of `text` with the values of secret-looking names replaced. */
function redactPairs(text: string): string {
  return text.replace(SECRET_PAIR, (all, lead: string, name: string, value: string) => (value !== '' && SECRET_PARAM.test(name) ? `${lead}${name}=${REDACTED}` : all));
}

/**
 * Any text (console output, a header value, a title, an error): every URL in it redacted as a URL,
 * secret-looking name=value pairs, authorization values and JWTs replaced; then cut at `max`.
 */
export function redactText(text: string, cut: Cut, max = MAX_STRING_CHARS): string {
  let out = text.length > max * 2 ? text.slice(0, max * 2) : text; // no regex over more than is kept
  if (out.length < text.length) cut.truncated = true;
  if (out.includes('://')) out = out.replace(URL_IN_TEXT, (u) => redactUrlOnce(u, { truncated: false }));
  if (out.includes('=')) out = redactPairs(out);
  if (/Bearer|Basic|Digest|Token|Negotiate/i.test(out)) out = out.replace(AUTH_VALUE, (_all, scheme: string) => `${scheme} ${REDACTED}`);
  if (out.includes('eyJ')) out = out.replace(JWT, REDACTED);
  return cutString(out, cut, max);
}

/**
 * A header map with every credential replaced; names kept as they came. A header that carries a
 * credential by its name loses its value; every other value is redacted as text (a Referer, a
 * Location, a Link, a Refresh: the URLs in them, and any secret-looking pair).
 */
export function redactHeaders(headers: Record<string, unknown> | undefined, cut: Cut): Record<string, string> | undefined {
  if (headers === undefined) return undefined;
  const out: Record<string, string> = {};
  let n = 0;
  for (const [name, value] of Object.entries(headers)) {
    if (++n > 64) {
      cut.truncated = true;
      break;
    }
    out[name] = SECRET_HEADER.test(name) ? REDACTED : redactText(String(value), cut, 512);
  }
  return out;
}

/** Strings cut at MAX_STRING_CHARS, arrays and objects bounded, at any depth (custom events). */
export function boundValue(v: unknown, cut: Cut, depth = 0): unknown {
  if (typeof v === 'string') return cutString(v, cut);
  if (v === null || typeof v !== 'object') return v;
  if (depth > 8) {
    cut.truncated = true;
    return null;
  }
  if (Array.isArray(v)) {
    if (v.length > 256) cut.truncated = true;
    return v.slice(0, 256).map((x) => boundValue(x, cut, depth + 1));
  }
  const out: Record<string, unknown> = {};
  let n = 0;
  for (const [k, x] of Object.entries(v)) {
    if (++n > 256) {
      cut.truncated = true;
      break;
    }
    out[k] = boundValue(x, cut, depth + 1);
  }
  return out;
}
