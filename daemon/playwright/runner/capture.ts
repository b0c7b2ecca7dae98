// The code's output and its result. While an execution runs, whatever is written to
// process.stdout and process.stderr (console.* included: the global console writes there) is
// forwarded to the daemon as it is written, up to the output limit per stream (the rest is
// counted); outside an execution it goes to the real fds (the daemon logs it at debug). The
// result must be JSON: a function, a symbol, a BigInt or a cycle anywhere in it fails the
// execution, naming the problem.

interface OutputSink {
  /** Forwards `data` of the current execution. */
  forward(stream: 'stdout' | 'stderr', data: string): void;
}

/** The output of one execution: bytes forwarded and bytes dropped, per stream. */
export class Capture {
  private readonly kept = { stdout: 0, stderr: 0 };
  readonly truncated = { stdout: 0, stderr: 0 };

  constructor(
    private readonly limit: number,
    private readonly sink: OutputSink,
  ) {}

  write(stream: 'stdout' | 'stderr', chunk: string | Uint8Array, encoding?: BufferEncoding): void {
    let text = typeof chunk === 'string' ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString('utf8');
    if (typeof chunk === 'string' && encoding !== undefined && encoding !== 'utf8' && encoding !== 'utf-8') text = Buffer.from(chunk, encoding).toString('utf8');
    const bytes = Buffer.byteLength(text);
    const room = this.limit - this.kept[stream];
    if (bytes <= room) {
      this.kept[stream] += bytes;
      this.sink.forward(stream, text);
      return;
    }
    if (room > 0) {
      // Cut on a character boundary: the forwarded part is whole UTF-8.
      const part = Buffer.from(text).subarray(0, room).toString('utf8').replace(/\uFFFD$/, '');
      this.truncated[stream] += bytes - Buffer.byteLength(part);
      if (part !== '') this.sink.forward(stream, part);
      this.kept[stream] = this.limit; // full: nothing more is forwarded
      return;
    }
    this.truncated[stream] += bytes;
  }
}

type WriteFn = typeof process.stdout.write;

/** Routes process.stdout/stderr writes to the current capture (when there is one). Call once. */
export function routeProcessOutput(current: () => Capture | null): void {
  for (const name of ['stdout', 'stderr'] as const) {
    const stream = process[name];
    const original = stream.write.bind(stream) as WriteFn;
    stream.write = function write(chunk: string | Uint8Array, encoding?: BufferEncoding | ((err?: Error | null) => void), cb?: (err?: Error | null) => void): boolean {
      const capture = current();
      if (capture === null) return (original as (c: unknown, e?: unknown, cb?: unknown) => boolean)(chunk, encoding, cb);
      capture.write(name, chunk, typeof encoding === 'string' ? encoding : undefined);
      const callback = typeof encoding === 'function' ? encoding : cb;
      if (callback !== undefined) process.nextTick(callback);
      return true;
    } as WriteFn;
  }
}

/** The result is not JSON. */
export class ResultError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ResultError';
  }
}

function where(key: string): string {
  return key === '' ? '' : ` (at key "${key.slice(0, 100)}")`;
}

/** The JSON text of `value`, or undefined for undefined; throws ResultError naming why not. */
export function resultJson(value: unknown, limitBytes: number): string | undefined {
  if (value === undefined) return undefined;
  let text: string | undefined;
  try {
    text = JSON.stringify(value, (key, v: unknown) => {
      if (typeof v === 'function') throw new ResultError(`the returned value holds a function${where(key)}, which JSON cannot carry`);
      if (typeof v === 'symbol') throw new ResultError(`the returned value holds a symbol${where(key)}, which JSON cannot carry`);
      if (typeof v === 'bigint') throw new ResultError(`the returned value holds a BigInt${where(key)}; convert it (String(n)) first`);
      return v;
    });
  } catch (err) {
    if (err instanceof ResultError) throw err;
    throw new ResultError(`the returned value is not JSON-serialisable: ${(err as Error).message.split('\n')[0]}`);
  }
  if (text === undefined) return undefined;
  const bytes = Buffer.byteLength(text);
  if (bytes > limitBytes) throw new ResultError(`the returned value is ${bytes} bytes of JSON, over the limit of ${limitBytes} (BROWSERD_PLAYWRIGHT_RESULT_LIMIT_BYTES)`);
  return text;
}
