// The bytes the daemon holds unsent for CDP clients (messages from Chromium a client has not read
// yet), bounded per client (BROWSERD_CDP_CLIENT_QUEUE_BYTES) and over every client
// (BROWSERD_CDP_QUEUE_TOTAL_BYTES). Both are checked after each message sent, against what was
// unsent before it, so that one large message to a client that reads (a screenshot) never trips
// them: a client then holds at most its limit plus one message, and all of them the total plus one.
// Past the total, the client holding the most goes (the slowest reader), not the one that happened
// to be sent to.

/** A client as the budget sees it: its unsent bytes, and whether it is closing already. */
export interface QueuedClient {
  readonly bufferedAmount: number;
  /** true once a close was started (its bytes are still held until the socket is gone). */
  readonly closing: boolean;
}

export interface SendVerdict<T> {
  /** The client to close. */
  client: T;
  /** `slow_client`: it passed its own limit; `cdp_queue_full`: every client together passed the total. */
  code: 'slow_client' | 'cdp_queue_full';
  /** The close reason, its code first (fits a WebSocket close frame: at most 123 bytes). */
  reason: string;
}

export const CLIENT_QUEUE_SETTING = 'BROWSERD_CDP_CLIENT_QUEUE_BYTES';
export const QUEUE_TOTAL_SETTING = 'BROWSERD_CDP_QUEUE_TOTAL_BYTES';

export class SendBudget<T extends QueuedClient> {
  constructor(private readonly opts: { clientBytes: number; totalBytes: number }) {}

  /** Unsent bytes over `clients`. */
  static total(clients: Iterable<QueuedClient>): number {
    let n = 0;
    for (const c of clients) n += c.bufferedAmount;
    return n;
  }

  /**
   * After `sent` bytes were handed to `client`: the client to close, or null. `clients`: every
   * client still holding bytes (`client` among them).
   */
  check(client: T, sent: number, clients: Iterable<T>): SendVerdict<T> | null {
    const before = Math.max(0, client.bufferedAmount - sent);
    if (before > this.opts.clientBytes) {
      return { client, code: 'slow_client', reason: `slow_client: ${before} bytes unsent to this client (limit ${this.opts.clientBytes}, ${CLIENT_QUEUE_SETTING})` };
    }
    if (client.bufferedAmount === 0) return null; // all of it went to the socket: nothing more is held than before
    let total = 0;
    let most: T | null = null;
    for (const c of clients) {
      total += c.bufferedAmount;
      if (most === null || c.bufferedAmount > most.bufferedAmount) most = c;
    }
    if (most === null || total - sent <= this.opts.totalBytes) return null;
    return {
      client: most,
      code: 'cdp_queue_full',
      reason: `cdp_queue_full: ${total - sent} bytes unsent over all CDP clients (limit ${this.opts.totalBytes}, ${QUEUE_TOTAL_SETTING})`,
    };
  }
}
