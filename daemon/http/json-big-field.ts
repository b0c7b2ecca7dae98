// A fast path for JSON bodies that are one big base64 string and a few small fields (stdin's
// `{"data_b64": "…", "close": true}`): the string is cut out of the raw bytes as they are and
// decoded from base64 once, and only the rest of the body is decoded as UTF-8 and parsed. The
// general path decodes all of the body as strict UTF-8 and parses all of it; for the 11 MB of an
// 8 MiB write that took as long as all the rest of the request (profile of the stdin benchmark).
//
// The fast path answers only when it is sure to give what the general path would:
// - `"name":"` followed, up to the next quote, by strict canonical base64 (its decoding encodes
//   back to the same text, so it holds only A-Z a-z 0-9 + / =: JSON reads those bytes as they are);
// - the rest (the body with that string emptied) free of backslashes, so every key is spelled as
//   it reads, and naming `"name"` only there;
// - the rest valid JSON whose top-level object has the field as the empty string.
// Then the top-level field is that string and nothing else differs. Anything else returns null,
// and the caller takes the general path (with its error messages).
import { decodeStrictBase64, Base64Error } from '../core/strict-base64.js';

/** Smaller bodies take the general path: the fast one saves nothing on them. */
export const MIN_BYTES = 16 * 1024;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

export interface BigFieldBody {
  /** The parsed body, the field set to its text. */
  value: Record<string, unknown>;
  /** The field's text decoded (strict base64). */
  decoded: Buffer;
}

/**
 * The parsed body and its field decoded, or null when the fast path does not apply. `decodeRest`
 * turns the bytes outside the string into text (the caller's strict UTF-8 decoder; when it
 * throws, null is returned so that the general path reports the problem).
 */
export function parseWithBigField(raw: Buffer, field: string, decodeRest: (bytes: Buffer) => string, minBytes = MIN_BYTES): BigFieldBody | null {
  if (raw.length < minBytes) return null;
  const opening = Buffer.from(`"${field}":"`, 'latin1');
  const at = raw.indexOf(opening);
  if (at < 0) return null;
  const start = at + opening.length;
  const end = raw.indexOf(QUOTE, start);
  if (end < 0) return null;
  const text = raw.toString('latin1', start, end);
  let decoded: Buffer;
  try {
    decoded = decodeStrictBase64(text);
  } catch (err) {
    if (err instanceof Base64Error) return null;
    throw err;
  }
  const rest = Buffer.concat([raw.subarray(0, start), raw.subarray(end)]);
  const name = opening.subarray(0, opening.length - 2); // "name"
  if (rest.includes(BACKSLASH) || rest.indexOf(name) !== rest.lastIndexOf(name)) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(decodeRest(rest));
  } catch {
    return null;
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return null;
  const value = parsed as Record<string, unknown>;
  if (!Object.hasOwn(value, field) || value[field] !== '') return null;
  value[field] = text;
  return { value, decoded };
}
