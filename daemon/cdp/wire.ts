// The shape of DevTools messages on the pipe, read and rewritten without parsing where Chromium's
// own layout allows: an answer starts `{"id":N,` and an event `{"method":"…",`; a message of a
// session ends `,"sessionId":"<hex>"}` (measured on Chromium 156; a message of any other shape is
// parsed and written again, so a layout change costs time, never correctness). Nothing here
// throws on what Chromium sends: a message that is not JSON or not of a DevTools message's shape is
// reported as malformed, with the id it starts with when it starts like an answer.

export type Head =
  | { kind: 'response'; id: number }
  | { kind: 'event'; method: string }
  /** A JSON object with neither an id nor a method (Chromium's answer to a message it could not parse). */
  | { kind: 'other' }
  /** Not a DevTools message; `id`: the answer it seems to be, read from its first bytes, when it starts like one. */
  | { kind: 'malformed'; reason: 'not_json' | 'bad_shape'; detail: string; id: number | null };

const HEAD_RE = /^\{"(?:id":(\d{1,15})[,}]|method":"([A-Za-z0-9_.]+)")/;
const ID_RE = /^\s*\{\s*"id"\s*:\s*(\d{1,15})\s*[,}]/;
const TAIL_RE = /,"sessionId":"([0-9A-Za-z_-]{1,128})"\}$/;
const HEAD_SCAN = 64;
const TAIL_SCAN = 160;
/** The error code of the answer the daemon gives in place of a malformed answer of Chromium. */
export const MALFORMED_ANSWER_CODE = -32099;

function head(data: Buffer): string {
  return data.toString('latin1', 0, Math.min(data.length, HEAD_SCAN));
}

function tail(data: Buffer): string {
  return data.toString('latin1', Math.max(0, data.length - TAIL_SCAN));
}

/**
 * The method of an event in Chromium's own layout (`{"method":"…",`, ending with `}`), read from its
 * first bytes; null for anything else (an answer, another layout: those are parsed).
 */
export function eventMethod(data: Buffer): string | null {
  if (data[0] !== 0x7b || data[2] !== 0x6d || data[data.length - 1] !== 0x7d) return null; // `{"m…}`
  const m = HEAD_RE.exec(head(data));
  return m?.[2] ?? null;
}

/** The id a message starts with (`{"id":N,`), whatever follows; null when it does not start so. */
export function leadingId(data: Buffer | string): number | null {
  const m = ID_RE.exec(typeof data === 'string' ? data.slice(0, HEAD_SCAN) : head(data));
  return m === null ? null : Number(m[1]);
}

/** Why `id` cannot be a DevTools message id, or null when it can. */
export function badId(id: unknown): string | null {
  return typeof id === 'number' && Number.isSafeInteger(id) && id >= 0 ? null : `its id is ${JSON.stringify(id) ?? String(id)}, not a whole number`;
}

/**
 * What a message is, from its first bytes when it has Chromium's own layout (and ends with `}`:
 * a message cut short is never relayed unparsed); else it is parsed and its shape checked.
 */
export function parseHead(data: Buffer): Head {
  const m = data[data.length - 1] === 0x7d ? HEAD_RE.exec(head(data)) : null;
  if (m !== null) return m[1] !== undefined ? { kind: 'response', id: Number(m[1]) } : { kind: 'event', method: m[2] as string };
  let msg: unknown;
  try {
    msg = JSON.parse(data.toString('utf8'));
  } catch (err) {
    return { kind: 'malformed', reason: 'not_json', detail: (err as Error).message, id: leadingId(data) };
  }
  const shape = shapeOf(msg);
  if (typeof shape === 'string') return { kind: 'malformed', reason: 'bad_shape', detail: shape, id: leadingId(data) };
  return shape;
}

/** A parsed message's kind, or what is wrong with its shape. */
function shapeOf(msg: unknown): Head | string {
  if (typeof msg !== 'object' || msg === null || Array.isArray(msg)) return 'not a JSON object';
  const o = msg as { id?: unknown; method?: unknown; sessionId?: unknown };
  if (o.sessionId !== undefined && typeof o.sessionId !== 'string') return 'its sessionId is not a string';
  if (o.id !== undefined) {
    const bad = badId(o.id);
    return bad ?? { kind: 'response', id: o.id as number };
  }
  if (o.method !== undefined) return typeof o.method === 'string' ? { kind: 'event', method: o.method } : 'its method is not a string';
  return { kind: 'other' };
}

/** What is wrong with a parsed answer (its result or error), or null. */
export function badAnswer(msg: { result?: unknown; error?: unknown }): string | null {
  const isObject = (v: unknown): boolean => typeof v === 'object' && v !== null && !Array.isArray(v);
  if (msg.error !== undefined) return isObject(msg.error) ? null : 'its error is not an object';
  if (msg.result === undefined) return 'it has neither a result nor an error';
  return isObject(msg.result) ? null : 'its result is not an object';
}

/** The top-level sessionId of a message, or null for the root session. */
export function parseTail(data: Buffer): string | null {
  const m = TAIL_RE.exec(tail(data));
  if (m !== null) return m[1] as string;
  if (data[data.length - 1] === 0x7d && HEAD_RE.test(head(data))) return null; // Chromium's layout without a session
  const sid = parseObject(data)?.sessionId;
  return typeof sid === 'string' ? sid : null;
}

/**
 * The message with its id replaced by `id` (when given) and its top-level sessionId removed when
 * it is `stripSession`; the bytes in between are never parsed. With `reuse` the caller gives `data`
 * up: the new head and tail are written into it where they fit (a view of it is returned, nothing
 * copied — a 10 MB screenshot is not copied again); else they are copied once. null: the message
 * had to be parsed and is not a JSON object.
 */
export function rewrite(data: Buffer, opts: { id?: number; stripSession?: string; reuse?: boolean }): Buffer | null {
  let start = 0;
  let prefix = '';
  if (opts.id !== undefined) {
    const m = /^\{"id":(\d{1,15})/.exec(head(data));
    if (m === null) return rewriteParsed(data, opts);
    prefix = `{"id":${opts.id}`;
    start = m[0].length;
  }
  let end = data.length;
  let suffix = '';
  if (opts.stripSession !== undefined) {
    const m = TAIL_RE.exec(tail(data));
    if (m !== null && m[1] === opts.stripSession) {
      end = data.length - m[0].length;
      suffix = '}';
    } else if (m === null && data.includes('"sessionId"')) {
      return rewriteParsed(data, opts);
    }
  }
  if (prefix === '' && suffix === '') return data;
  if (opts.reuse === true && prefix.length <= start) {
    // The prefix ends where the old id ended; the suffix ('}' or nothing) overwrites the byte after `end`.
    const from = start - prefix.length;
    data.write(prefix, from, 'latin1');
    if (suffix !== '') data.write(suffix, end, 'latin1');
    return data.subarray(from, end + suffix.length);
  }
  return Buffer.concat([Buffer.from(prefix, 'latin1'), data.subarray(start, end), Buffer.from(suffix, 'latin1')]);
}

function rewriteParsed(data: Buffer, opts: { id?: number; stripSession?: string }): Buffer | null {
  const msg = parseObject(data);
  if (msg === null) return null;
  if (opts.id !== undefined) msg.id = opts.id;
  if (opts.stripSession !== undefined && msg.sessionId === opts.stripSession) delete msg.sessionId;
  return Buffer.from(JSON.stringify(msg));
}

/** The message as a JSON object, or null when it is not one (never throws). */
export function parseObject(data: Buffer | string): Record<string, unknown> | null {
  try {
    const msg: unknown = JSON.parse(typeof data === 'string' ? data : data.toString('utf8'));
    return typeof msg === 'object' && msg !== null && !Array.isArray(msg) ? (msg as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** An error answer in Chromium's words. */
export function errorReply(id: unknown, code: number, message: string, sessionId?: string): Buffer {
  const body: Record<string, unknown> = {};
  if (typeof id === 'number') body.id = id;
  body.error = { code, message };
  if (sessionId !== undefined) body.sessionId = sessionId;
  return Buffer.from(JSON.stringify(body));
}

/** Commands whose answer hands the client a new session of its own. */
export function attachKind(method: string): boolean {
  return method === 'Target.attachToTarget' || method === 'Target.attachToBrowserTarget';
}

/** Commands whose `params.sessionId` names a session to act on. */
const SESSION_PARAM_METHODS = new Set(['Target.detachFromTarget', 'Target.sendMessageToTarget']);

/**
 * Why a client's command may not go to Chromium, as the answer to send back; null when it may.
 * A client names only sessions it owns, also in `params.sessionId` of detachFromTarget.
 */
export function commandGuard(msg: Record<string, unknown>, owns: (sessionId: string) => boolean): Buffer | null {
  if (typeof msg !== 'object' || msg === null || Array.isArray(msg)) return errorReply(undefined, -32600, 'Message must be an object');
  const id = msg.id;
  if (typeof id !== 'number' || !Number.isInteger(id)) return errorReply(undefined, -32600, "Message must have integer 'id' property");
  if (typeof msg.method !== 'string') return errorReply(id, -32600, "Message must have string 'method' property");
  if (msg.params !== undefined && (typeof msg.params !== 'object' || msg.params === null || Array.isArray(msg.params))) {
    return errorReply(id, -32600, "Message has invalid 'params' property");
  }
  const sid = msg.sessionId;
  if (sid !== undefined && (typeof sid !== 'string' || !owns(sid))) return errorReply(id, -32001, 'Session with given id not found.');
  if (SESSION_PARAM_METHODS.has(msg.method)) {
    const target = (msg.params as Record<string, unknown> | undefined)?.sessionId;
    if (typeof target === 'string' && !owns(target)) return errorReply(id, -32602, 'No session with given id', typeof sid === 'string' ? sid : undefined);
  }
  return null;
}
