// Strict base64 (RFC 4648 §4, the standard alphabet with `=` padding). Buffer.from(s, 'base64')
// silently skips characters it does not know and accepts missing padding, so a corrupted or
// truncated payload would reach a child as different bytes; this decoder refuses it instead and
// says what is wrong and where.
//
// Accepted: only A-Z a-z 0-9 + /, length a multiple of 4, at most two `=` and only at the end,
// and the unused bits of the last character zero (the canonical encoding every encoder emits).
// Refused: whitespace or line breaks anywhere, base64url (`-` `_`), missing or extra padding.

export class Base64Error extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'Base64Error';
  }
}

const STRICT_RE = /^[A-Za-z0-9+/]*={0,2}$/;

/** Value of one base64 character (0-63), or -1. */
function sextet(code: number): number {
  if (code >= 65 && code <= 90) return code - 65; // A-Z
  if (code >= 97 && code <= 122) return code - 71; // a-z
  if (code >= 48 && code <= 57) return code + 4; // 0-9
  if (code === 43) return 62; // +
  if (code === 47) return 63; // /
  return -1;
}

function describe(code: number): string {
  switch (code) {
    case 0x20:
      return 'a space';
    case 0x0a:
      return 'a line feed (\\n)';
    case 0x0d:
      return 'a carriage return (\\r)';
    case 0x09:
      return 'a tab (\\t)';
    default: {
      const hex = `U+${code.toString(16).toUpperCase().padStart(4, '0')}`;
      return code >= 0x21 && code <= 0x7e ? `'${String.fromCharCode(code)}' (${hex})` : hex;
    }
  }
}

/** The first problem of a string that fails the fast check, as a message naming its position. */
function findProblem(s: string): string {
  let padAt = -1;
  for (let i = 0; i < s.length; i++) {
    const code = s.charCodeAt(i);
    if (code === 61) {
      if (padAt < 0) padAt = i;
      continue;
    }
    if (sextet(code) < 0) {
      if (code === 0x20 || code === 0x0a || code === 0x0d || code === 0x09) {
        return `${describe(code)} at position ${i}: whitespace is not allowed in base64 here`;
      }
      if (code === 45 || code === 95) {
        return `${describe(code)} at position ${i} is not in the base64 alphabet (A-Z a-z 0-9 + /); base64url is not accepted`;
      }
      return `${describe(code)} at position ${i} is not in the base64 alphabet (A-Z a-z 0-9 + /)`;
    }
    if (padAt >= 0) return `'${s[i]}' at position ${i} follows the padding '=' at position ${padAt}; '=' may only end the text`;
  }
  // Only '=' can be left: more than two of them at the end.
  return `too much padding: ${s.length - padAt} '=' at the end (at most 2)`;
}

/** Bytes a valid base64 text decodes to (no validation). */
export function decodedLength(s: string): number {
  const pad = s.endsWith('==') ? 2 : s.endsWith('=') ? 1 : 0;
  return Math.floor(s.length / 4) * 3 - pad;
}

/** Decodes strictly or throws Base64Error with a message saying what is wrong and where. */
export function decodeStrictBase64(s: string): Buffer {
  const data = Buffer.from(s, 'base64');
  if (isCanonical(s, data)) return data;
  throw new Base64Error(explain(s));
}

/**
 * Whether `s` is strict canonical base64, given `data`, its lenient decoding: exactly when
 * re-encoding `data` gives `s` back (the encoder only emits canonical base64), but without
 * re-encoding (for an 8 MiB write that took as long as the decoding and the copy to the pipe
 * together). The lenient decoder skips characters outside its alphabet and stops at a `=`: either
 * leaves `data` shorter than the length of `s` says. What it accepts besides the strict alphabet is
 * base64url's `-` and `_`; and the unused bits of the last character before padding must be zero.
 * (A test compares this with re-encoding on every short text, so a Node whose decoder differs is noticed.)
 */
function isCanonical(s: string, data: Buffer): boolean {
  if (s.length % 4 !== 0 || data.length !== decodedLength(s)) return false;
  if (s.includes('-') || s.includes('_')) return false;
  const pad = s.endsWith('==') ? 2 : s.endsWith('=') ? 1 : 0;
  if (pad === 0) return true;
  const last = sextet(s.charCodeAt(s.length - pad - 1));
  return (last & (pad === 1 ? 0x03 : 0x0f)) === 0;
}

/** Why `s` is not strict base64 (only called for texts that are not). */
function explain(s: string): string {
  if (!STRICT_RE.test(s)) return findProblem(s);
  if (s.length % 4 !== 0) return `length ${s.length} is not a multiple of 4: characters or '=' padding are missing`;
  const pad = s.endsWith('==') ? 2 : s.endsWith('=') ? 1 : 0;
  const lastIndex = s.length - pad - 1;
  return `'${s[lastIndex]}' at position ${lastIndex} has unused bits set before the padding: not canonical base64`;
}

/** Length of the base64 text of `bytes` bytes (with padding). */
export function base64Length(bytes: number): number {
  return Math.ceil(bytes / 3) * 4;
}
