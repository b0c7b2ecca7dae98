// The head of an HTTP/1.x answer read off a raw upstream connection (the forwarder's exchanges
// and the CONNECT of a dial): the status line and the header fields, up to the empty line
// (RFC 9112 §4, §5). Bytes after the head are the body's (or the tunnel's) and are handed back
// untouched. Strict: a status line that is not `HTTP/1.x NNN reason`, a field line without a
// colon, a name with characters outside tchar, obs-fold, a NUL/CR/LF inside a value, or a head
// past MAX_HEAD_BYTES is an error (the exchange answers the browser 502 naming it).

/** The longest answer head read (status line + fields + CRLFs): node:http's own default limit. */
export const MAX_HEAD_BYTES = 16 * 1024;
/** At most this many header fields in a head. */
export const MAX_HEAD_FIELDS = 200;

export interface ResponseHead {
  status: number;
  reason: string;
  /** Minor version: 1 for HTTP/1.1, 0 for HTTP/1.0. */
  minor: number;
  /** name, value, name, value… as received (rawHeaders' shape). */
  raw: string[];
}

export class HeadError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'HeadError';
  }
}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
// A reason phrase and field values: HTAB, SP, VCHAR, obs-text (RFC 9110 §5.5), as node:http will write them again.
const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})(?: ([\t\x20-\x7e\x80-\xff]*))?$/;
const BAD_VALUE = /[^\t\x20-\x7e\x80-\xff]/;

/** Accumulates bytes until a whole head arrived. */
export class HeadReader {
  private chunks: Buffer[] = [];
  private length = 0;

  /**
   * Feeds `data`; returns the head and the bytes after it once the empty line arrived, null
   * while more is needed. Throws HeadError on a malformed or too long head.
   */
  push(data: Buffer): { head: ResponseHead; rest: Buffer } | null {
    // Look for CRLFCRLF across the boundary: search from 3 bytes before the new data.
    const before = this.length;
    this.chunks.push(data);
    this.length += data.length;
    const all = this.chunks.length === 1 ? data : Buffer.concat(this.chunks, this.length);
    const end = all.indexOf('\r\n\r\n', Math.max(0, before - 3), 'latin1');
    if (end === -1) {
      if (this.length > MAX_HEAD_BYTES) throw new HeadError(`an answer head longer than ${MAX_HEAD_BYTES} bytes`);
      // Kept as a copy: `data` may be a reused read buffer (reads.ts).
      this.chunks = [all === data ? Buffer.from(data) : all];
      return null;
    }
    if (end + 4 > MAX_HEAD_BYTES) throw new HeadError(`an answer head longer than ${MAX_HEAD_BYTES} bytes`);
    const head = parseResponseHead(all.toString('latin1', 0, end));
    this.chunks = [];
    this.length = 0;
    return { head, rest: all.subarray(end + 4) };
  }
}

/** Parses the head's text (without the final CRLFCRLF). */
export function parseResponseHead(text: string): ResponseHead {
  const lines = text.split('\r\n');
  const m = STATUS_LINE.exec(lines[0] ?? '');
  if (m === null) throw new HeadError(`not an HTTP/1.x status line: ${JSON.stringify((lines[0] ?? '').slice(0, 80))}`);
  if (lines.length - 1 > MAX_HEAD_FIELDS) throw new HeadError(`more than ${MAX_HEAD_FIELDS} header fields`);
  const raw: string[] = [];
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i] as string;
    const colon = line.indexOf(':');
    const name = colon === -1 ? '' : line.slice(0, colon);
    if (!TOKEN.test(name)) throw new HeadError(`a malformed header field: ${JSON.stringify(line.slice(0, 80))}`);
    const value = line.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, '');
    if (BAD_VALUE.test(value)) throw new HeadError(`a header value with a control character: ${name}`);
    raw.push(name, value);
  }
  return { status: Number(m[2]), reason: m[3] ?? '', minor: Number(m[1]), raw };
}

/** The values of header `name` (case-insensitive) in a rawHeaders list. */
export function fieldValues(raw: readonly string[], name: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) if ((raw[i] as string).toLowerCase() === name) out.push(raw[i + 1] as string);
  return out;
}

/** How an answer's body ends (RFC 9112 §6.3). */
export type BodyFraming = { kind: 'none' } | { kind: 'length'; length: number } | { kind: 'chunked' } | { kind: 'close' };

/** The framing of an answer to a request of `method`; throws HeadError when it is ambiguous or invalid. */
export function answerFraming(method: string, head: ResponseHead): BodyFraming {
  const { status, raw } = head;
  if (method === 'HEAD' || status === 204 || status === 304 || (status >= 100 && status < 200)) return { kind: 'none' };
  const te = fieldValues(raw, 'transfer-encoding');
  const cl = fieldValues(raw, 'content-length');
  if (te.length > 0) {
    if (cl.length > 0) throw new HeadError('an answer with both Transfer-Encoding and Content-Length');
    const codings = te.join(',').split(',').map((c) => c.trim().toLowerCase()).filter((c) => c !== '');
    // chunked last: its end frames the body; any other final coding runs until the connection closes (HTTP/1.1 only has chunked as framing).
    return codings[codings.length - 1] === 'chunked' ? { kind: 'chunked' } : { kind: 'close' };
  }
  if (cl.length > 0) {
    const values = new Set(cl.join(',').split(',').map((v) => v.trim()));
    const [only] = values;
    if (values.size !== 1 || only === undefined || !/^\d{1,15}$/.test(only)) throw new HeadError(`an invalid Content-Length: ${JSON.stringify(cl.join(', ').slice(0, 40))}`);
    return { kind: 'length', length: Number(only) };
  }
  return { kind: 'close' };
}
