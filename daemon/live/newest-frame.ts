// The newest-frame slot of one viewer: at most one frame is being written to its socket; frames
// that come meanwhile (or while more than the high-water mark waits in the socket) replace each
// other in one slot, and the one left there is sent once the write completes. A slow viewer sees
// fewer frames, always the newest; the daemon never holds more than one waiting frame per viewer.

/** What the slot needs of a socket (a ws WebSocket). */
export interface FrameSocket {
  readonly bufferedAmount: number;
  /** Whether the socket can still send. */
  readonly open: boolean;
  /** Sends `data`; `done` runs once it is written (or failed). */
  send(data: Buffer, done: () => void): void;
}

/** How soon a frame held back by the high-water mark alone (none in flight) is offered again. */
export const RETRY_MS = 50;

export class NewestFrame {
  private inFlight = false;
  private waiting: Buffer | null = null;
  private retry: NodeJS.Timeout | null = null;

  constructor(
    private readonly socket: FrameSocket,
    private readonly highWaterBytes: number,
  ) {}

  /** Offers a frame: sent now, or kept as the newest waiting one. */
  offer(frame: Buffer): void {
    if (!this.socket.open) return;
    if (this.inFlight || this.socket.bufferedAmount > this.highWaterBytes) {
      this.waiting = frame;
      // Nothing of ours in flight to say when the socket drained: look again soon.
      if (!this.inFlight && this.retry === null) this.retry = setTimeout(() => this.offerWaiting(), RETRY_MS).unref();
      return;
    }
    this.waiting = null; // older than this one
    this.inFlight = true;
    this.socket.send(frame, () => {
      this.inFlight = false;
      this.offerWaiting();
    });
  }

  /** Drops the waiting frame (the viewer left). */
  clear(): void {
    this.waiting = null;
    if (this.retry !== null) clearTimeout(this.retry);
    this.retry = null;
  }

  private offerWaiting(): void {
    if (this.retry !== null) clearTimeout(this.retry);
    this.retry = null;
    const next = this.waiting;
    this.waiting = null;
    if (next !== null) this.offer(next);
  }
}
