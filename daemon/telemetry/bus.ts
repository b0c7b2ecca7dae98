// The telemetry bus: every event gets the next seq (from 1, monotonic for the daemon's life) and
// goes into a ring bounded both by count and by bytes (the envelope's JSON, made once here and sent
// as is to every reader; the ring is core/seq-ring.ts). A reader holds only the seq it wants next: it reads what the ring has,
// waits for more, and learns how many it lost when the ring moved past it (it read too slowly, or
// resumed from too far back). Publishing never waits for a reader, and no reader holds a queue.
import { SeqRing } from '../core/seq-ring.js';
import { CATEGORIES, DEFAULT_ON, nowMicros, type Category, type EventCategory, type EventSource, type TelemetryEvent } from './event.js';

export interface Stored {
  seq: number;
  category: EventCategory;
  ts: number;
  /** The envelope as JSON. */
  json: string;
  /** Its size in bytes. */
  bytes: number;
}

export interface BusLimits {
  /** Events kept at most. */
  maxEvents: number;
  /** Bytes of envelope JSON kept at most. */
  maxBytes: number;
  /** One event's envelope JSON at most: past it, its data is dropped and `truncated: true`. */
  maxEventBytes: number;
}

export type CategorySwitches = Record<Category, boolean>;

export class TelemetryBus {
  private readonly ring: SeqRing<Stored>;
  private readonly switches: CategorySwitches;
  private readonly switchListeners: ((s: CategorySwitches) => Promise<void> | void)[] = [];

  constructor(readonly limits: BusLimits) {
    this.ring = new SeqRing({ maxItems: limits.maxEvents, maxBytes: limits.maxBytes, firstSeq: 1 });
    this.switches = Object.fromEntries(CATEGORIES.map((c) => [c, DEFAULT_ON.has(c)])) as CategorySwitches;
  }

  /** Whether events of `category` are captured now (`monitor`: whenever a CDP category is). */
  enabled(category: EventCategory): boolean {
    if (category === 'monitor') return this.switches.console || this.switches.network || this.switches.page || this.switches.interaction;
    return this.switches[category];
  }

  categories(): CategorySwitches {
    return { ...this.switches };
  }

  /**
   * Sets some switches (the others stay); listeners hear of the new set. Resolves once every
   * listener has applied it (the monitor's domains enabled or disabled on every page: an event a
   * page makes after that is captured, or not, by the new switches). Never rejects.
   */
  async setCategories(patch: Partial<CategorySwitches>): Promise<CategorySwitches> {
    let changed = false;
    for (const c of CATEGORIES) {
      const v = patch[c];
      if (v !== undefined && v !== this.switches[c]) {
        this.switches[c] = v;
        changed = true;
      }
    }
    const now = this.categories();
    if (changed) await Promise.allSettled(this.switchListeners.map(async (l) => l(now)));
    return now;
  }

  /** `listener` applies a new set of switches; setCategories waits for the promise it returns (which must settle: bound its work). */
  onSwitch(listener: (s: CategorySwitches) => Promise<void> | void): void {
    this.switchListeners.push(listener);
  }

  /** Publishes an event of an enabled category (else drops it); returns its seq, or null. */
  emit(type: string, category: EventCategory, source: EventSource, data?: Record<string, unknown>, opts: { truncated?: boolean; ts?: number } = {}): number | null {
    if (!this.enabled(category)) return null;
    const event: TelemetryEvent = { ts: opts.ts ?? nowMicros(), type, category, source };
    if (data !== undefined) event.data = data;
    if (opts.truncated === true) event.truncated = true;
    const seq = this.ring.end;
    let json = JSON.stringify({ seq, event });
    let bytes = Buffer.byteLength(json);
    if (bytes > this.limits.maxEventBytes) {
      delete event.data;
      event.truncated = true;
      json = JSON.stringify({ seq, event });
      bytes = Buffer.byteLength(json);
    }
    this.ring.push({ seq, category, ts: event.ts, json, bytes }, bytes);
    return seq;
  }

  /** The seq of the oldest event kept (end() when none is). */
  get first(): number {
    return this.ring.first;
  }

  /** The seq the next event will get. */
  get end(): number {
    return this.ring.end;
  }

  get size(): number {
    return this.ring.size;
  }

  /** Up to `max` events from seq `from` on (or from the oldest kept, counting the ones lost before it). */
  read(from: number, max: number): { events: Stored[]; lost: number; next: number } {
    const { items, lost, next } = this.ring.read(from, max);
    return { events: items, lost, next };
  }

  /** Events before seq `before`, newest first, up to `max` (paging downwards). */
  readBack(before: number, max: number): Stored[] {
    return this.ring.readBack(before, max);
  }

  /** Resolves once an event numbered `from` or later exists, or `signal` aborts. */
  wait(from: number, signal: AbortSignal): Promise<void> {
    return this.ring.wait(from, signal);
  }
}
