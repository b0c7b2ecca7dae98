// Receives a multipart upload with busboy: plain fields in memory (small), file parts streamed
// to files in the request's staging folder, never the whole upload in memory. Limits: the whole
// request (counted as it arrives), each archive (busboy `limit`: 413, never a short file), the
// number of parts. Resolves once every file is on disk; on failure every stream is stopped first.
import busboy from 'busboy';
import { createWriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import path from 'node:path';
import { Transform, type TransformCallback } from 'node:stream';
import { BadRequestError, InvalidRequestError, PayloadTooLargeError } from '../core/errors.js';
import { parseFieldName, type ReceivedPart } from './multipart-pairs.js';

export interface UploadLimits {
  maxItems: number;
  maxArchiveBytes: number;
  maxRequestBytes: number;
}

/** Longest accepted value of a plain field (names are at most 64 characters). */
const FIELD_VALUE_LIMIT = 1024;

class ByteCounter extends Transform {
  private seen = 0;
  constructor(private readonly limit: number) {
    super();
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.seen += chunk.length;
    if (this.seen > this.limit) cb(new PayloadTooLargeError('the request body', this.limit));
    else cb(null, chunk);
  }
}

export async function receiveMultipart(req: IncomingMessage, dir: string, limits: UploadLimits): Promise<ReceivedPart[]> {
  const type = req.headers['content-type'] ?? '';
  if (!/^multipart\/form-data\s*;/i.test(type)) {
    throw new InvalidRequestError(`the body must be multipart/form-data with a boundary, got ${type || 'no content type'}`);
  }
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limits.maxRequestBytes) {
    throw new PayloadTooLargeError('the request body', limits.maxRequestBytes);
  }
  let bb: busboy.Busboy;
  try {
    bb = busboy({
      headers: req.headers,
      limits: {
        fileSize: limits.maxArchiveBytes,
        files: limits.maxItems,
        fields: limits.maxItems,
        parts: limits.maxItems * 2,
        fieldSize: FIELD_VALUE_LIMIT,
        fieldNameSize: 200,
      },
    });
  } catch (err) {
    throw new InvalidRequestError(`the multipart body cannot be parsed: ${(err as Error).message}`);
  }
  await mkdir(dir, { recursive: true, mode: 0o700 });

  return new Promise<ReceivedPart[]>((resolve, reject) => {
    const parts: ReceivedPart[] = [];
    const writes: Promise<void>[] = [];
    const open = new Set<NodeJS.ReadableStream & { destroy(): void }>();
    const sinks = new Set<ReturnType<typeof createWriteStream>>();
    const counter = new ByteCounter(limits.maxRequestBytes);
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
      fail(new BadRequestError([`extensions: more parts than ${limits.maxItems} items allow (at most ${limits.maxItems} items per request)`]), true);

    bb.on('field', (fieldName, value, info) => {
      if (failed) return;
      parts.push({ fieldName, kind: 'field', value: info.valueTruncated ? `${value}…` : value });
    });
    bb.on('file', (fieldName, stream, _info) => {
      if (failed || parseFieldName(fieldName)?.field !== 'zip_file') {
        // Not an archive slot: record it for the 400, discard the bytes.
        if (!failed) parts.push({ fieldName, kind: 'file' });
        stream.resume();
        return;
      }
      const file = path.join(dir, `part-${files++}.zip`);
      const sink = createWriteStream(file, { flags: 'wx', mode: 0o600 });
      open.add(stream);
      sinks.add(sink);
      parts.push({ fieldName, kind: 'file', file });
      stream.on('limit', () => fail(new PayloadTooLargeError(`the archive of ${fieldName}`, limits.maxArchiveBytes), true));
      stream.on('end', () => open.delete(stream));
      writes.push(
        new Promise<void>((done) => {
          sink.on('close', () => {
            sinks.delete(sink);
            done();
          });
          sink.on('error', (err) => fail(err, false));
        }),
      );
      stream.pipe(sink);
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
    req.on('close', () => {
      if (!req.complete) fail(new InvalidRequestError('the request body ended early (the client went away)'), false);
    });
    req.pipe(counter).pipe(bb);
  });
}
