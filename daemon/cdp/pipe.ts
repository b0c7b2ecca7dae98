// Chromium's DevTools over --remote-debugging-pipe: the daemon writes commands to the child's fd 3
// and reads answers and events from its fd 4, each message JSON ended by a NUL byte. No TCP port,
// nothing another local user can connect to; and a pipe-mode Chromium exits when the daemon does
// (its fd 3 reaches EOF). Messages are bounded: one larger than `maxMessageBytes` is skipped
// (its first bytes are reported, so its owner can be told), never buffered without end.
import type { Readable, Writable } from 'node:stream';

interface PipeHandlers {
  /** One whole message (without its NUL). The buffer is the caller's to keep. */
  message(data: Buffer): void;
  /** A message over the bound was skipped; `head` holds its first bytes (its id, to tell its owner). */
  tooBig(head: Buffer, bytes: number): void;
  /** The read side ended: Chromium exited or closed its end. */
  closed(): void;
}

/** Above this many unwritten bytes `send` reports backpressure. */
const PIPE_HIGH_WATER = 8 * 1024 * 1024;
const HEAD_BYTES = 256;
const NUL = Buffer.from([0]);

export class CdpPipe {
  private chunks: Buffer[] = [];
  private pendingBytes = 0;
  /** Bytes of a too-big message skipped so far, or -1 when not skipping. */
  private skipped = -1;
  private skippedHead: Buffer = Buffer.alloc(0);
  private isClosed = false;
  private readonly drainWaiters: (() => void)[] = [];

  constructor(
    private readonly out: Writable,
    private readonly input: Readable,
    private readonly maxMessageBytes: number,
    private readonly on: PipeHandlers,
  ) {
    out.on('error', () => this.close());
    out.on('drain', () => {
      for (const w of this.drainWaiters.splice(0)) w();
    });
    input.on('error', () => this.close());
    input.on('data', (chunk: Buffer) => this.onData(chunk));
    input.on('end', () => this.close());
    input.on('close', () => this.close());
  }

  get closed(): boolean {
    return this.isClosed;
  }

  /** Bytes written and not yet taken by Chromium. */
  get backlog(): number {
    return this.out.writableLength;
  }

  /** Writes one message; false when the backlog is above PIPE_HIGH_WATER (call whenDrained). */
  send(message: string | Buffer): boolean {
    if (this.isClosed) return false;
    // One write, one syscall: a separate NUL would wake Chromium's reader twice per message.
    if (typeof message === 'string') {
      this.out.write(`${message}\0`);
    } else {
      this.out.cork();
      this.out.write(message);
      this.out.write(NUL);
      this.out.uncork();
    }
    return this.out.writableLength < PIPE_HIGH_WATER;
  }

  /** Resolves once the backlog has been taken (at once when closed). */
  whenDrained(cb: () => void): void {
    if (this.isClosed || this.out.writableLength === 0) cb();
    else this.drainWaiters.push(cb);
  }

  /** Stops reading and writing (idempotent); `closed` is reported once. */
  close(): void {
    if (this.isClosed) return;
    this.isClosed = true;
    this.chunks = [];
    this.pendingBytes = 0;
    this.out.destroy();
    this.input.destroy();
    for (const w of this.drainWaiters.splice(0)) w();
    this.on.closed();
  }

  private onData(chunk: Buffer): void {
    let start = 0;
    while (start < chunk.length && !this.isClosed) {
      const nul = chunk.indexOf(0, start);
      const end = nul < 0 ? chunk.length : nul;
      const piece = chunk.subarray(start, end);
      if (this.skipped >= 0) {
        this.skipped += piece.length;
      } else if (this.pendingBytes + piece.length > this.maxMessageBytes) {
        this.skippedHead = Buffer.concat([...this.chunks, piece]).subarray(0, HEAD_BYTES);
        this.skipped = this.pendingBytes + piece.length;
        this.chunks = [];
        this.pendingBytes = 0;
      } else if (piece.length > 0) {
        this.chunks.push(piece);
        this.pendingBytes += piece.length;
      }
      if (nul < 0) break;
      this.finishMessage();
      start = nul + 1;
    }
  }

  private finishMessage(): void {
    if (this.skipped >= 0) {
      const head = Buffer.from(this.skippedHead);
      const bytes = this.skipped;
      this.skipped = -1;
      this.skippedHead = Buffer.alloc(0);
      this.on.tooBig(head, bytes);
      return;
    }
    const data = this.chunks.length === 1 ? Buffer.from(this.chunks[0] as Buffer) : Buffer.concat(this.chunks, this.pendingBytes);
    this.chunks = [];
    this.pendingBytes = 0;
    if (data.length > 0) this.on.message(data);
  }
}
