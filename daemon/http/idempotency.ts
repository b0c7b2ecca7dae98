// Idempotency keys: a state-changing request (POST, PUT, PATCH, DELETE) that carries an
// `Idempotency-Key` header does its work once. A repeat with the same key (per API key, within the
// TTL) waits for the first to finish and gets its answer replayed; the same key with another
// request (method, route, path parameters, query or body) is 422 idempotency_key_reused. Answers a
// retry may safely redo (x-should-retry: true — 429, 503, 409 busy) are not kept: the retry runs.
//
// Memory is bounded: at most `maxKeys` keys and `maxBytes` of kept answers; a new key that finds the
// store full is 429 (retry once the oldest expires). An answer admitted is always kept whole, so the
// store may pass its byte bound by the answers still being produced. Keys expire in the order
// their answers came in (one TTL for all), so an expiry queue in that order makes the purge before
// every keyed request amortised O(1), and the oldest expiry (a full store's Retry-After) its head.
import { createHash, type Hash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { BadRequestError, LimitExceededError, OperationFailedError } from '../core/errors.js';
import type { Metrics } from '../core/metrics.js';

export interface StoredAnswer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

interface Entry {
  /** method, route and path parameters and query: the request without its body. */
  shape: string;
  /** sha256 of the body, or null when the body was not read whole (refused early). */
  digest: string | null;
  done: Promise<void>;
  finish: () => void;
  answer: StoredAnswer | null;
  /** Epoch ms after which the key is forgotten (set when the answer is in). */
  expires: number;
  bytes: number;
}

const KEY_RE = /^[\x21-\x7e]{1,255}$/;
export const IDEMPOTENCY_TTL_MS = 10 * 60 * 1000;

/** Hashes a request body as it is read, without changing how it flows (a tap on push). */
export class BodyTap {
  private readonly hash: Hash = createHash('sha256');
  private bytes = 0;

  constructor(private readonly req: IncomingMessage) {
    const push = req.push.bind(req);
    req.push = (chunk: unknown, encoding?: BufferEncoding): boolean => {
      if (chunk !== null && chunk !== undefined) {
        const b = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string, encoding);
        this.hash.update(b);
        this.bytes += b.length;
      }
      return push(chunk, encoding);
    };
  }

  /** The digest once the whole body was read, else null. */
  digest(): string | null {
    return this.req.complete ? `${this.bytes}:${this.hash.copy().digest('hex')}` : null;
  }

  /** Reads and drops the rest of the body (a repeat's body is only compared). */
  drain(limitBytes: number): Promise<string | null> {
    if (this.req.complete) return Promise.resolve(this.digest());
    return new Promise((resolve) => {
      let seen = 0;
      const done = (): void => resolve(this.digest());
      this.req.on('data', (c: Buffer) => {
        seen += c.length;
        if (seen > limitBytes) this.req.destroy();
      });
      this.req.once('end', done).once('close', done).once('error', done);
      this.req.resume();
    });
  }
}

/** An answered key in the expiry queue. */
interface Expiry {
  id: string;
  entry: Entry;
}

export class IdempotencyStore {
  private readonly entries = new Map<string, Entry>();
  /** Answered keys in the order they expire (answer order; one TTL): the live part starts at `head`. */
  private expiries: Expiry[] = [];
  private head = 0;
  private bytes = 0;

  constructor(
    private readonly opts: { maxKeys: number; maxBytes: number; ttlMs?: number; metrics: Metrics },
  ) {}

  /** The header's key, checked; null without one. */
  static keyOf(req: IncomingMessage): string | null {
    const raw = req.headers['idempotency-key'];
    if (raw === undefined) return null;
    const key = Array.isArray(raw) ? raw[0] : raw;
    if (key === undefined || !KEY_RE.test(key)) throw BadRequestError.field('Idempotency-Key', 'must be 1 to 255 printable ASCII characters without spaces');
    return key;
  }

  /**
   * A new key: the caller runs the request and calls `settle` with its answer (or null when the
   * answer may not be kept). A known key: the first request's answer, once it is in (null when it
   * was not kept: then the repeat claims the key again and runs).
   */
  claim(
    scope: string,
    key: string,
    shape: string,
  ): { kind: 'first'; settle(answer: StoredAnswer | null, digest: string | null): void } | { kind: 'repeat'; wait(digest: string | null): Promise<StoredAnswer | null> } {
    this.purge();
    const id = `${scope}\n${key}`;
    const existing = this.entries.get(id);
    if (existing !== undefined) {
      return {
        kind: 'repeat',
        wait: async (digest) => {
          await existing.done;
          if (existing.shape !== shape || (existing.digest !== null && digest !== null && existing.digest !== digest)) {
            throw new OperationFailedError('idempotency_key_reused', `the Idempotency-Key "${key}" was used for another request in the last ${this.ttl() / 60_000} minutes; use a new key for a new request`);
          }
          if (existing.answer === null) return null; // the first's answer may be redone (a 429, 503, busy): this one runs
          this.opts.metrics.idempotencyReplays.inc();
          return existing.answer;
        },
      };
    }
    if (this.entries.size >= this.opts.maxKeys || this.bytes >= this.opts.maxBytes) {
      const oldest = this.expiries[this.head]?.entry.expires ?? Number.POSITIVE_INFINITY;
      throw new LimitExceededError('idempotency keys', this.opts.maxKeys, {
        message: `too many idempotency keys are kept (${this.entries.size} keys, ${this.bytes} bytes of answers; limits ${this.opts.maxKeys} keys, ${this.opts.maxBytes} bytes): retry later or send the request without Idempotency-Key`,
        retryAfterMs: Number.isFinite(oldest) ? Math.max(1000, oldest - Date.now()) : 1000,
      });
    }
    let finish = (): void => {};
    const entry: Entry = { shape, digest: null, done: new Promise<void>((r) => (finish = r)), finish: () => finish(), answer: null, expires: Number.POSITIVE_INFINITY, bytes: 0 };
    this.entries.set(id, entry);
    this.gauge();
    return {
      kind: 'first',
      settle: (answer, digest) => {
        if (answer === null) {
          this.entries.delete(id);
        } else {
          entry.answer = answer;
          entry.digest = digest;
          entry.bytes = answer.body.length + 512;
          // Never before the last one queued: the queue stays in expiry order if the clock steps back.
          entry.expires = Math.max(Date.now() + this.ttl(), this.expiries[this.expiries.length - 1]?.entry.expires ?? 0);
          this.bytes += entry.bytes;
          this.expiries.push({ id, entry });
        }
        entry.finish();
        this.gauge();
      },
    };
  }

  private ttl(): number {
    return this.opts.ttlMs ?? IDEMPOTENCY_TTL_MS;
  }

  /** Forgets the keys whose TTL is over: only the expired head of the queue is looked at. */
  private purge(): void {
    const now = Date.now();
    let purged = false;
    while (this.head < this.expiries.length) {
      const first = this.expiries[this.head] as Expiry;
      if (first.entry.expires > now) break;
      this.expiries[this.head] = undefined as unknown as Expiry;
      this.head++;
      if (this.entries.get(first.id) === first.entry) this.entries.delete(first.id);
      this.bytes -= first.entry.bytes;
      purged = true;
    }
    if (this.head > 1024 && this.head * 2 > this.expiries.length) {
      this.expiries = this.expiries.slice(this.head);
      this.head = 0;
    }
    if (purged) this.gauge();
  }

  private gauge(): void {
    this.opts.metrics.idempotencyKeys.set(this.entries.size);
    this.opts.metrics.idempotencyBytes.set(this.bytes);
  }
}
