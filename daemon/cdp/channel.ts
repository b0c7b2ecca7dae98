// One client of the multiplexer: its top session, the sessions it owns, where its messages go, and
// how it ends. A channel ends once; its sink hears why (Chromium gone, its page closed, a message
// too big, the client itself).
import type { MalformedReport } from './malformed.js';

export type ChannelKind = { kind: 'browser' } | { kind: 'target'; targetId: string };

export interface ChannelEnd {
  code: 'browser_gone' | 'restart' | 'stopping' | 'target_closed' | 'too_big' | 'client_closed';
  message: string;
}

export interface ChannelSink {
  /** A message for the client: JSON text in the client's own terms (its ids, no top-level session). */
  message(data: Buffer): void;
  /** The channel ended; nothing more comes. */
  ended(end: ChannelEnd): void;
}

interface ChannelOps {
  send(channel: Channel, data: Buffer | string): boolean;
  close(channel: Channel): void;
  whenWritable(cb: () => void): void;
  malformed(data: Buffer | string, report: MalformedReport): void;
  /** Commands every channel of the mux has sent to Chromium so far. */
  commands(): number;
}

export class Channel {
  /** Every session this channel owns: its top session and the children it attached. */
  readonly owned: Set<string>;
  private endedWith: ChannelEnd | null = null;

  constructor(
    readonly kind: ChannelKind,
    /** The channel's top session: messages without a sessionId go there. */
    readonly session: string,
    private readonly sink: ChannelSink,
    private readonly ops: ChannelOps,
  ) {
    this.owned = new Set([session]);
  }

  get isEnded(): boolean {
    return this.endedWith !== null;
  }

  get endReason(): ChannelEnd | null {
    return this.endedWith;
  }

  /** A command from the client (JSON text). false: the pipe is full, wait for whenWritable before sending more. */
  send(data: Buffer | string): boolean {
    if (this.endedWith !== null) return true;
    return this.ops.send(this, data);
  }

  /**
   * How many commands every channel of the browser (this one included) has sent so far: a number
   * that moves whenever a client may have changed the browser (a tab brought to the front, a page
   * resized), so that state learned from Chromium can be known to be still current.
   */
  browserCommands(): number {
    return this.ops.commands();
  }

  whenWritable(cb: () => void): void {
    this.ops.whenWritable(cb);
  }

  /** The client is done: its session is detached in Chromium. Idempotent. */
  close(): void {
    if (this.endedWith === null) this.ops.close(this);
  }

  /** From the client: a message it received was not a DevTools message (reported with Chromium's). */
  reportMalformed(data: Buffer | string, report: MalformedReport): void {
    this.ops.malformed(data, report);
  }

  /** From the mux: a message for the client. */
  deliver(data: Buffer): void {
    if (this.endedWith === null) this.sink.message(data);
  }

  /** From the mux: the channel is over. */
  end(why: ChannelEnd): void {
    if (this.endedWith !== null) return;
    this.endedWith = why;
    this.sink.ended(why);
  }
}
