// Receives a multipart/form-data body with busboy: plain fields in memory (small), file parts
// streamed to files the caller names, never the whole upload in memory. Limits: the whole request
// (counted as it arrives), each file (busboy `limit`: 413, never a short file), the number of
// parts. Resolves once every file is on disk; on any failure every stream is stopped first and
// the promise rejects once. Every stream here has its 'error' listener: a body that ends inside a
// part (busboy destroys the part's stream with "Unexpected end of form"), a client that goes away,
// a full disk — each is an answer, never an uncaught exception.
import type busboy from 'busboy';
import { createWriteStream, type WriteStream } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { Transform, type Readable, type TransformCallback } from 'node:stream';
import { BadRequestError, InvalidRequestError, PayloadTooLargeError } from '../errors.js';

interface MultipartLimits {
  /** Most file parts and most plain fields (each). */
  maxParts: number;
  maxFileBytes: number;
  maxRequestBytes: number;
  /** The list the parts make, for the 400 past maxParts (`extensions`). */
  listName?: string;
  /** What a file part is, for the 413 (`archive`: "the archive of <field> is over ..."). */
  fileNoun?: string;
  /** Names the limit settings in 413 messages. */
  fileSetting?: string;
  requestSetting?: string;
}

export interface ReceivedPart {
  fieldName: string;
  kind: 'field' | 'file';
  /** The value of a plain field. */
  value?: string;
  /** Where a file part was stored (undefined for a file part that was not kept). */
  file?: string;
  /** Bytes of a stored file part. */
  size?: number;
}

/**
 * Where a file part goes (created with O_EXCL, mode 0600), or null to discard its bytes. `index`
 * counts the file parts of the body from 0; `received` is every part so far (the fields before
 * this file part, for a sink that places a file by a field sent before it). A promise holds the
 * part's bytes (busboy waits) until it settles; a rejection fails the whole body with that error.
 */
type FileSink = (fieldName: string, index: number, received: readonly ReceivedPart[]) => string | null | Promise<string | null>;

/** Longest accepted value of a plain field. */
const FIELD_VALUE_LIMIT = 4096;

class ByteCounter extends Transform {
  private seen = 0;
  constructor(
    private readonly limit: number,
    private readonly setting: string | undefined,
  ) {
    super();
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.seen += chunk.length;
    if (this.seen > this.limit) cb(new PayloadTooLargeError('the request body', this.limit, this.setting));
    else cb(null, chunk);
  }
}

function isMultipart(req: IncomingMessage): boolean {
  return /^multipart\/form-data\s*;/i.test(req.headers['content-type'] ?? '');
}

/** Checks the content type and declared length; throws before anything is read. */
function assertMultipart(req: IncomingMessage, limits: MultipartLimits): void {
  if (!isMultipart(req)) {
    throw new InvalidRequestError(`the body must be multipart/form-data with a boundary, got ${req.headers['content-type'] || 'no content type'}`);
  }
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limits.maxRequestBytes) {
    throw new PayloadTooLargeError('the request body', limits.maxRequestBytes, limits.requestSetting);
  }
}

/** RFC 2046: a boundary is 1 to 70 characters, so the body's first line `--<boundary>` ends within these bytes. */
const FIRST_LINE_MAX = 2 + 70 + 2;

/**
 * The boundary the body itself uses: its first line `--<boundary>` (multipart clients send no
 * preamble), or null when it does not start so. The bytes read are put back (`unshift`) before
 * anything else reads the request. Why: the SDK's direct routing (KERNEL_BROWSER_ROUTING_SUBRESOURCES,
 * browser-routing.ts) copies the Content-Type header of a first serialization of a FormData body and
 * sends a second one, with a boundary of its own; the header then names a boundary the body never
 * uses, and busboy finds no part ("Unexpected end of form").
 */
async function firstLineBoundary(req: IncomingMessage): Promise<string | null> {
  let head: Buffer = Buffer.alloc(0);
  while (head.length < FIRST_LINE_MAX && !head.includes('\r\n')) {
    const chunk = req.read() as Buffer | null;
    if (chunk !== null) {
      head = head.length === 0 ? chunk : Buffer.concat([head, chunk]);
      continue;
    }
    if (req.readableEnded || req.destroyed) break;
    const more = await new Promise<boolean>((resolve) => {
      const done = (ok: boolean) => (): void => {
        req.off('readable', onReadable);
        req.off('end', onEnd);
        req.off('close', onEnd);
        req.off('error', onEnd);
        resolve(ok);
      };
      const onReadable = done(true);
      const onEnd = done(false);
      req.once('readable', onReadable);
      req.once('end', onEnd);
      req.once('close', onEnd);
      req.once('error', onEnd);
    });
    if (!more) break;
  }
  if (head.length > 0) req.unshift(head);
  const crlf = head.indexOf('\r\n');
  if (crlf < 3 || crlf > FIRST_LINE_MAX - 2 || head[0] !== 0x2d || head[1] !== 0x2d) return null;
  const boundary = head.subarray(2, crlf).toString('latin1');
  return /^[0-9A-Za-z'()+_,\-./:=?]{1,70}$/.test(boundary) ? boundary : null;
}

/** The request's headers, with the body's own boundary where the declared one is not the body's. */
async function headersForBody(req: IncomingMessage): Promise<IncomingMessage['headers']> {
  const declared = /;\s*boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(req.headers['content-type'] ?? '');
  const line = await firstLineBoundary(req);
  if (line === null) return req.headers;
  // A body of no part is its close delimiter alone: `--<boundary>--`.
  const inBody = line.endsWith('--') && line.length > 2 ? line.slice(0, -2) : line;
  const named = declared?.[1] ?? declared?.[2];
  if (line === named || inBody === named) return req.headers;
  return { ...req.headers, 'content-type': `multipart/form-data; boundary=${inBody}` };
}

/**
 * busboy, evaluated at the first multipart body rather than at the daemon's start (~10 ms of every
 * start, bench/ANALYSIS.md §7); the bundle keeps it inline, so this is a microtask, not a file read.
 */
let busboyModule: Promise<typeof busboy> | undefined;
const loadBusboy = (): Promise<typeof busboy> => (busboyModule ??= import('busboy').then((m) => m.default));

export async function receiveMultipart(req: IncomingMessage, limits: MultipartLimits, sink: FileSink): Promise<ReceivedPart[]> {
  assertMultipart(req, limits);
  const makeBusboy = await loadBusboy();
  const headers = await headersForBody(req);
  let bb: busboy.Busboy;
  try {
    bb = makeBusboy({
      headers,
      limits: {
        fileSize: limits.maxFileBytes,
        files: limits.maxParts,
        fields: limits.maxParts,
        // busboy emits partsLimit when the count *reaches* the limit (files and fields: when one more arrives).
        parts: limits.maxParts * 2 + 1,
        fieldSize: FIELD_VALUE_LIMIT,
        fieldNameSize: 200,
      },
    });
  } catch (err) {
    throw new InvalidRequestError(`the multipart body cannot be parsed: ${(err as Error).message}`);
  }

  return new Promise<ReceivedPart[]>((resolve, reject) => {
    const parts: ReceivedPart[] = [];
    const writes: Promise<void>[] = [];
    const open = new Set<Readable>();
    const sinks = new Set<WriteStream>();
    const counter = new ByteCounter(limits.maxRequestBytes, limits.requestSetting);
    let failed = false;
    let files = 0;

    const stopReading = (): void => {
      req.unpipe(counter);
      req.pause();
    };
    /**
     * Stops parsing and every file write. With `drain`, the rest of the body is read and dropped
     * (still within the request limit) before the error is answered, so that the client reads the
     * answer instead of a reset connection; else the server closes the connection after it.
     */
    const fail = (err: Error, drain: boolean): void => {
      if (failed) return;
      failed = true;
      counter.unpipe(bb);
      for (const s of open) s.destroy();
      for (const w of sinks) w.destroy();
      const answer = (): void => void Promise.allSettled(writes).then(() => reject(err));
      if (!drain || req.complete || req.destroyed) {
        if (!req.complete) stopReading();
        answer();
        return;
      }
      counter.removeAllListeners('error');
      counter.once('error', () => {
        stopReading();
        answer();
      });
      counter.once('end', answer);
      req.once('close', () => {
        if (!req.complete) answer();
      });
      counter.resume();
    };
    const tooMany = (): void =>
      fail(new BadRequestError([`${limits.listName ?? '(body)'}: more parts than ${limits.maxParts} items allow (at most ${limits.maxParts} items per request)`]), true);
    const broken = (err: Error): void => fail(new InvalidRequestError(`the multipart body cannot be parsed: ${err.message}`), false);

    bb.on('field', (fieldName, value, info) => {
      if (failed) return;
      parts.push({ fieldName, kind: 'field', value: info.valueTruncated ? `${value}…` : value });
    });
    /** Streams one file part to `target` (or drops its bytes when null, or once the body failed). */
    const store = (part: ReceivedPart, stream: Readable, target: string | null): Promise<void> => {
      if (target === null || failed) {
        if (failed) stream.destroy();
        else stream.resume();
        return Promise.resolve();
      }
      const out = createWriteStream(target, { flags: 'wx', mode: 0o600 });
      part.file = target;
      part.size = 0;
      open.add(stream);
      sinks.add(out);
      stream.on('data', (d: Buffer) => (part.size = (part.size ?? 0) + d.length));
      stream.on('end', () => open.delete(stream));
      const written = new Promise<void>((done) => {
        out.on('close', () => {
          sinks.delete(out);
          done();
        });
        out.on('error', (err) => fail(err, false));
      });
      stream.pipe(out);
      return written;
    };
    bb.on('file', (fieldName, stream) => {
      // busboy destroys a part's stream when the body ends inside it: the listener turns that into a 400.
      stream.on('error', broken);
      // At once, not once the sink has decided: busboy cuts a small part and emits this before anyone reads it.
      stream.on('limit', () => fail(new PayloadTooLargeError(`the ${limits.fileNoun ?? 'file part'} of ${fieldName}`, limits.maxFileBytes, limits.fileSetting), true));
      if (failed) {
        stream.resume();
        return;
      }
      const part: ReceivedPart = { fieldName, kind: 'file' };
      parts.push(part);
      let target: ReturnType<FileSink>;
      try {
        target = sink(fieldName, files++, parts);
      } catch (err) {
        fail(err as Error, true);
        stream.resume();
        return;
      }
      if (target === null || typeof target === 'string') {
        writes.push(store(part, stream, target));
        return;
      }
      open.add(stream); // destroyed by fail() while the sink decides
      writes.push(
        target.then(
          (t) => {
            open.delete(stream);
            return store(part, stream, t);
          },
          (err: unknown) => {
            open.delete(stream);
            stream.destroy();
            fail(err as Error, true);
          },
        ),
      );
    });
    bb.on('filesLimit', tooMany);
    bb.on('fieldsLimit', tooMany);
    bb.on('partsLimit', tooMany);
    bb.on('error', (err: Error) => fail(new InvalidRequestError(`the multipart body cannot be parsed: ${err.message}`), true));
    bb.on('close', () => {
      void Promise.all(writes).then(() => {
        if (!failed) resolve(parts);
      });
    });
    counter.on('error', (err) => fail(err, false));
    req.on('error', (err) => fail(new InvalidRequestError(`the request body could not be read: ${err.message}`), false));
    req.on('close', () => {
      if (!req.complete) fail(new InvalidRequestError('the request body ended early (the client went away)'), false);
    });
    req.pipe(counter).pipe(bb);
  });
}
