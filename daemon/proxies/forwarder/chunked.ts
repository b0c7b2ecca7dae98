// A decoder of the chunked transfer coding (RFC 9112 §7.1) that copies nothing: the data of each
// chunk is handed on as a view of the buffer it arrived in. Chunk extensions are skipped; the
// trailer section is read and dropped (the forwarder frames the answer to the browser anew).
// A chunk-size line or a trailer section past its limit, or anything that is not the coding,
// is a ChunkedError.

/** The longest chunk-size line (size, extensions, CRLF). */
export const MAX_CHUNK_LINE = 4096;
/** The longest trailer section. */
export const MAX_TRAILER_BYTES = 16 * 1024;
/** The most hex digits of a chunk size (2^48 bytes). */
const MAX_SIZE_DIGITS = 12;

export class ChunkedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ChunkedError';
  }
}

const enum State {
  Size,
  Extension,
  SizeLf,
  Data,
  DataCr,
  DataLf,
  TrailerLineStart,
  TrailerLine,
  TrailerLf,
  FinalLf,
  Done,
}

const CR = 13;
const LF = 10;

function hexValue(b: number): number {
  if (b >= 48 && b <= 57) return b - 48;
  if (b >= 97 && b <= 102) return b - 87;
  if (b >= 65 && b <= 70) return b - 55;
  return -1;
}

export class ChunkedDecoder {
  private state = State.Size;
  private size = 0;
  private digits = 0;
  private lineBytes = 0;
  private trailerBytes = 0;
  private left = 0;

  get done(): boolean {
    return this.state === State.Done;
  }

  /**
   * Decodes `buf`, calling `data` with each piece of chunk data (views of `buf`); returns how
   * many bytes of `buf` belong to the body (the rest follows it). Throws ChunkedError.
   */
  push(buf: Buffer, data: (piece: Buffer) => void): number {
    let i = 0;
    const n = buf.length;
    while (i < n && this.state !== State.Done) {
      if (this.state === State.Data) {
        const take = Math.min(this.left, n - i);
        data(buf.subarray(i, i + take));
        i += take;
        this.left -= take;
        if (this.left === 0) this.state = State.DataCr;
        continue;
      }
      const b = buf[i] as number;
      i++;
      switch (this.state) {
        case State.Size: {
          this.line();
          const v = hexValue(b);
          if (v !== -1) {
            if (++this.digits > MAX_SIZE_DIGITS) throw new ChunkedError(`a chunk size of more than ${MAX_SIZE_DIGITS} hex digits`);
            this.size = this.size * 16 + v;
          } else if (this.digits > 0 && (b === 59 || b === 32 || b === 9)) this.state = State.Extension; // ';' or whitespace before it
          else if (this.digits > 0 && b === CR) this.state = State.SizeLf;
          else throw new ChunkedError('not a chunk-size line');
          break;
        }
        case State.Extension:
          this.line();
          if (b === CR) this.state = State.SizeLf;
          else if (b === LF || b === 0) throw new ChunkedError('a malformed chunk extension');
          break;
        case State.SizeLf:
          if (b !== LF) throw new ChunkedError('a chunk-size line without CRLF');
          this.lineBytes = 0;
          this.digits = 0;
          if (this.size === 0) this.state = State.TrailerLineStart;
          else {
            this.left = this.size;
            this.size = 0;
            this.state = State.Data;
          }
          break;
        case State.DataCr:
          if (b !== CR) throw new ChunkedError('chunk data longer than its size');
          this.state = State.DataLf;
          break;
        case State.DataLf:
          if (b !== LF) throw new ChunkedError('chunk data without CRLF');
          this.state = State.Size;
          break;
        case State.TrailerLineStart:
          this.trailer();
          this.state = b === CR ? State.FinalLf : State.TrailerLine;
          break;
        case State.TrailerLine:
          this.trailer();
          if (b === CR) this.state = State.TrailerLf;
          break;
        case State.TrailerLf:
          this.trailer();
          if (b !== LF) throw new ChunkedError('a trailer line without CRLF');
          this.state = State.TrailerLineStart;
          break;
        case State.FinalLf:
          if (b !== LF) throw new ChunkedError('the chunked body does not end with CRLF');
          this.state = State.Done;
          break;
        default:
          break;
      }
    }
    return i;
  }

  private line(): void {
    if (++this.lineBytes > MAX_CHUNK_LINE) throw new ChunkedError(`a chunk-size line longer than ${MAX_CHUNK_LINE} bytes`);
  }

  private trailer(): void {
    if (++this.trailerBytes > MAX_TRAILER_BYTES) throw new ChunkedError(`a trailer section longer than ${MAX_TRAILER_BYTES} bytes`);
  }
}
