// The shape of DevTools messages on the pipe, read and rewritten without parsing where Chromium's
// own layout allows: an answer starts `{"id":N,` and an event `{"method":"…",`; a message of a
// session ends `,"sessionId":"<hex>"}` (measured on Chromium 156; a message of any other shape is
// parsed and written again, so a layout change costs time, never correctness).

type Head = { kind: 'response'; id: number } | { kind: 'event'; method: string } | { kind: 'other' };

const HEAD_RE = /^\{"(?:id":(\d{1,15})[,}]|method":"([A-Za-z0-9_.]+)")/;
const TAIL_RE = /,"sessionId":"([0-9A-Za-z_-]{1,128})"\}$/;
const HEAD_SCAN = 64;
const TAIL_SCAN = 160;

function head(data: Buffer): string {
  return data.toString('latin1', 0, Math.min(data.length, HEAD_SCAN));
}

function tail(data: Buffer): string {
  return data.toString('latin1', Math.max(0, data.length - TAIL_SCAN));
}

/** What a message is, from its first bytes (parsed when the layout is not the usual one). */
export function parseHead(data: Buffer): Head {
  const m = HEAD_RE.exec(head(data));
  if (m !== null) return m[1] !== undefined ? { kind: 'response', id: Number(m[1]) } : { kind: 'event', method: m[2] as string };
  try {
    const msg = JSON.parse(data.toString('utf8')) as { id?: unknown; method?: unknown };
    if (typeof msg.id === 'number') return { kind: 'response', id: msg.id };
    if (typeof msg.method === 'string') return { kind: 'event', method: msg.method };
  } catch {
    // not JSON: nothing to route
  }
  return { kind: 'other' };
}

/** The top-level sessionId of a message, or null for the root session. */
export function parseTail(data: Buffer): string | null {
  const m = TAIL_RE.exec(tail(data));
  if (m !== null) return m[1] as string;
  if (HEAD_RE.test(head(data))) return null; // Chromium's layout without a session
  try {
    const sid = (JSON.parse(data.toString('utf8')) as { sessionId?: unknown }).sessionId;
    return typeof sid === 'string' ? sid : null;
  } catch {
    return null;
  }
}

/**
 * The message with its id replaced by `id` (when given) and its top-level sessionId removed when
 * it is `stripSession`; the bytes in between are never parsed. With `reuse` the caller gives `data`
 * up: the new head and tail are written into it where they fit (a view of it is returned, nothing
 * copied — a 10 MB screenshot is not copied again); else they are copied once.
 */
export function rewrite(data: Buffer, opts: { id?: number; stripSession?: string; reuse?: boolean }): Buffer {
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

function rewriteParsed(data: Buffer, opts: { id?: number; stripSession?: string }): Buffer {
  const msg = JSON.parse(data.toString('utf8')) as Record<string, unknown>;
  if (opts.id !== undefined) msg.id = opts.id;
  if (opts.stripSession !== undefined && msg.sessionId === opts.stripSession) delete msg.sessionId;
  return Buffer.from(JSON.stringify(msg));
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
