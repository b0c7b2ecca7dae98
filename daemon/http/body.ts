// Request bodies: read with a size limit (413 past it, without buffering the rest), parse JSON,
// validate with zod into the contract's `bad_request` with one detail per problem; and a fast path for
// bodies with one big base64 field (stdin data), at the end.
import type { IncomingMessage } from 'node:http';
import type { ZodType, core } from 'zod';
import { BadRequestError, InvalidRequestError, PayloadTooLargeError } from '../core/errors.js';
import { Base64Error, decodeStrictBase64 } from '../core/strict-base64.js';

export function readBody(req: IncomingMessage, limitBytes: number): Promise<Buffer> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limitBytes) {
    return Promise.reject(new PayloadTooLargeError('the request body', limitBytes));
  }
  // Listeners, not `for await`: leaving an async iterator early destroys the socket, and the
  // server still wants to drain the rest and answer.
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = (): void => {
      req.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limitBytes) {
        cleanup();
        req.pause();
        reject(new PayloadTooLargeError('the request body', limitBytes));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      cleanup();
      // A body of one chunk (most small ones) is that chunk, not a copy of it.
      resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size));
    };
    const onError = (err: Error): void => {
      cleanup();
      reject(err);
    };
    const onClose = (): void => {
      cleanup();
      reject(new InvalidRequestError('the client closed the connection before the body was complete'));
    };
    req.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose);
  });
}

function isJsonContentType(header: string | undefined): boolean {
  if (header === undefined) return false;
  const type = header.split(';')[0]?.trim().toLowerCase();
  return type === 'application/json' || (type !== undefined && /^application\/[a-z0-9.+-]+\+json$/.test(type));
}

interface JsonOptions {
  limitBytes: number;
  /** An empty body is `{}`. */
  optional?: boolean;
}

/**
 * The body as JSON validated by `schema`. An empty body is `{}` when `optional` (routes whose
 * body may be left out); otherwise it must be JSON with a JSON content type.
 */
export async function readJson<T>(req: IncomingMessage, schema: ZodType<T>, opts: JsonOptions): Promise<T> {
  return validate(schema, (await readValue(req, opts, null)).value);
}

/**
 * readJson for a body with a top-level string `field` of base64 that may be large (stdin data):
 * the same result, with the field's strict base64 decoding when the fast path of
 * parseWithBigField (below) took it (else null: the caller decodes it, with its own error answers).
 */
export async function readJsonBase64<T>(req: IncomingMessage, schema: ZodType<T>, field: string, opts: JsonOptions): Promise<{ body: T; decoded: Buffer | null }> {
  const { value, decoded } = await readValue(req, opts, field);
  return { body: validate(schema, value), decoded };
}

async function readValue(req: IncomingMessage, opts: JsonOptions, base64Field: string | null): Promise<{ value: unknown; decoded: Buffer | null }> {
  const hasBody = req.headers['content-length'] !== undefined ? Number(req.headers['content-length']) > 0 : req.headers['transfer-encoding'] !== undefined;
  if (!hasBody && opts.optional) return { value: {}, decoded: null };
  if (!isJsonContentType(req.headers['content-type'])) {
    throw new InvalidRequestError(`the body must be application/json, got ${req.headers['content-type'] ?? 'no content type'}`);
  }
  const raw = await readBody(req, opts.limitBytes);
  const fast = base64Field === null ? null : parseWithBigField(raw, base64Field, (bytes) => STRICT_UTF8.decode(bytes));
  if (fast !== null) return fast;
  if (raw.length === 0 && opts.optional) return { value: {}, decoded: null };
  let text: string;
  try {
    text = STRICT_UTF8.decode(raw);
  } catch {
    // toString('utf8') would put U+FFFD in place of the bad bytes, and a child would get other bytes than were sent.
    throw new InvalidRequestError(`the body is not valid UTF-8 (at or before byte ${firstInvalidUtf8(raw)})`);
  }
  try {
    return { value: parseJsonBody(text), decoded: null };
  } catch (err) {
    if (err instanceof BadRequestError) throw err;
    throw new InvalidRequestError(`the body is not JSON: ${(err as Error).message}`);
  }
}

/**
 * JSON.parse, refusing a key named `__proto__` anywhere: JSON.parse keeps it as a plain key, but a
 * schema's record (zod's z.record) drops it without a word, so `{"policies": {"__proto__": …}}`
 * would be answered 200 with nothing done. The reviver runs only when the text may hold such a key
 * (the name itself, or a \u escape that could spell it).
 */
function parseJsonBody(text: string): unknown {
  const value: unknown = JSON.parse(text);
  if (text.includes('__proto__') || text.includes('\\u')) {
    const at = protoKeyIn(value, '');
    if (at !== null) throw new BadRequestError([`${at}: a key named __proto__ is refused (it names nothing here)`]);
  }
  return value;
}

/** Where a key named `__proto__` is in a parsed JSON value (`env.__proto__`), or null. */
function protoKeyIn(value: unknown, path: string): string | null {
  if (value === null || typeof value !== 'object') return null;
  for (const [key, inner] of Object.entries(value)) {
    const here = Array.isArray(value) ? `${path}[${key}]` : path === '' ? key : `${path}.${key}`;
    if (key === '__proto__' && !Array.isArray(value)) return here;
    const found = protoKeyIn(inner, here);
    if (found !== null) return found;
  }
  return null;
}

const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/** The offset of the first byte that is not valid UTF-8 (a prefix is valid when it decodes, an unfinished last character aside). */
function firstInvalidUtf8(buf: Buffer): number {
  const validPrefix = (n: number): boolean => {
    try {
      new TextDecoder('utf-8', { fatal: true }).decode(buf.subarray(0, n), { stream: true });
      return true;
    } catch {
      return false;
    }
  };
  let lo = 0;
  let hi = buf.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >>> 1;
    if (validPrefix(mid)) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

export function validate<T>(schema: ZodType<T>, value: unknown): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  throw new BadRequestError(issuesToProblems(parsed.error.issues));
}

export function issuesToProblems(issues: readonly core.$ZodIssue[]): string[] {
  return issues.map((issue) => `${issue.path.length > 0 ? issue.path.join('.') : '(body)'}: ${issue.message}`);
}

/** Past this many unread bytes a refused body is not drained: the answer goes out and the socket closes. */
const DRAIN_CAP_BYTES = 64 * 1024 * 1024;
/** A refused body that stalls this long while being drained: the socket is closed. */
const DRAIN_IDLE_MS = 2000;

/**
 * After an early answer (413, 429, 401 … before the body was read): discard the rest of the
 * body so that a client still sending reads the answer instead of a reset, and the connection
 * stays usable (lingering close). A declared length over DRAIN_CAP_BYTES: the socket is closed
 * once the answer is out. A chunked body is drained while it stays under DRAIN_CAP_BYTES (a
 * client that writes its body before reading, as fetch does, would otherwise get EPIPE instead
 * of the answer). Past the cap, or stalled for DRAIN_IDLE_MS: the socket is closed, never left
 * hanging.
 */
export function lingerOnRefusedBody(req: IncomingMessage): void {
  const socket = req.socket;
  if (req.complete || socket === null) return;
  const declared = Number(req.headers['content-length'] ?? Number.NaN);
  if (Number.isFinite(declared) && declared > DRAIN_CAP_BYTES) {
    socket.destroySoon();
    return;
  }
  let drained = 0;
  const timer = setTimeout(() => socket.destroy(), DRAIN_IDLE_MS);
  const onData = (chunk: Buffer): void => {
    drained += chunk.length;
    if (drained > DRAIN_CAP_BYTES) {
      stop();
      socket.destroy();
      return;
    }
    timer.refresh();
  };
  const stop = (): void => {
    clearTimeout(timer);
    req.off('data', onData);
  };
  req.on('data', onData).once('end', stop).once('close', stop);
  req.resume();
}

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

/** Smaller bodies take the general path: the fast one saves nothing on them. */
export const MIN_BYTES = 16 * 1024;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

interface BigFieldBody {
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
    parsed = parseJsonBody(decodeRest(rest));
  } catch {
    return null; // the full path says why
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return null;
  const value = parsed as Record<string, unknown>;
  if (!Object.hasOwn(value, field) || value[field] !== '') return null;
  value[field] = text;
  return { value, decoded };
}
