// The browser's active proxy: which stored proxy the forwarding proxy sends the browser's traffic
// through (none: direct). The choice is kept in the proxy store's file (`active`), written like every
// store change (atomic, fsynced) before the forwarder switches, and restored at start.
//
// Every change runs in one queue, in the order asked: set() (PATCH /browsers/{id}) and refresh()
// (a PATCH of the active proxy's bypass_hosts) never interleave, so the forwarder always ends on
// the last choice written. A switch closes every connection of the browser (forwarder.ts).
//
// A proxy that cannot be reached at all (a managed type whose gateway BROWSERD_PROXY_PROVIDERS_FILE
// does not name) is refused by set(); restored at start it fails closed: the forwarder answers
// 502 for every request that would go through it and sends nothing anywhere else.
import { SerialQueue } from '../core/serial-queue.js';
import type { ManagedProxyType, ProxyGateway } from '../core/config.js';
import { ConflictError, NotFoundError, OperationFailedError, UnsupportedFieldError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { ActiveProxy, Forwarder } from './forwarder/forwarder.js';
import type { ForwarderStatus } from './forwarder/stats.js';
import { visibleTo } from './store/listing.js';
import type { ProxyStore, StoredProxy } from './store/store.js';
import { upstreamFor } from './upstream/upstream.js';

export class ActiveControl {
  private readonly queue = new SerialQueue();

  constructor(
    private readonly store: ProxyStore,
    private readonly forwarder: Forwarder,
    private readonly providers: Partial<Record<ManagedProxyType, ProxyGateway>>,
    private readonly log: Logger,
    /** The browser's proxy changed (the telemetry's proxy_switched): ids only, never credentials. */
    private readonly onSwitch?: (s: { proxy_id: string | null; previous: string | null }) => void,
  ) {}

  /** Routes the forwarder through the stored active proxy (at start). */
  restore(): void {
    const id = this.store.active();
    const proxy = id === null ? undefined : this.store.get(id);
    const active = proxy === undefined ? null : this.activeOf(proxy);
    this.forwarder.use(active);
    if (active !== null) {
      this.log.info({ event: 'proxy_active_restored', proxy_id: active.proxy.id, usable: active.upstream !== null }, 'the browser goes through its stored proxy');
      if (active.upstream === null) this.log.error({ event: 'proxy_active_unusable', proxy_id: active.proxy.id, problem: active.problem }, `the browser's proxy cannot be used: ${active.problem}; nothing goes out until it is changed`);
    }
  }

  status(): ForwarderStatus | null {
    return this.forwarder.status();
  }

  /**
   * Makes `id` (null or '': none) the active proxy for a key of `project`: written to the store,
   * then the forwarder switched. 404 for a proxy the key may not see; 422 for one that cannot be reached.
   */
  set(id: string | null, project: string | null, log: Logger): Promise<void> {
    return this.serial(async () => {
      const wanted = id === '' ? null : id;
      let active: ActiveProxy | null = null;
      await this.store.mutate((cur) => {
        if (wanted !== null) {
          const proxy = cur.find((p) => p.id === wanted);
          if (proxy === undefined || !visibleTo(project, proxy)) throw new NotFoundError(`no proxy ${wanted}`);
          active = this.activeOf(proxy);
          if (active.upstream === null) throw new UnsupportedFieldError('proxy_id', active.problem ?? `proxy ${wanted} cannot be used`);
        }
        return { next: cur, active: wanted, result: undefined };
      });
      const before = this.forwarder.status()?.id ?? null;
      // The same proxy again changes nothing (its connections stay open).
      if (before === wanted) return;
      this.forwarder.use(active);
      log.info({ event: 'proxy_active_set', proxy_id: wanted ?? 'direct', previous: before ?? 'direct' }, wanted === null ? 'the browser goes direct' : 'the browser goes through a proxy');
      this.onSwitch?.({ proxy_id: wanted, previous: before });
    });
  }

  /** After a change of a stored proxy: when it is the active one, the forwarder takes the new record. */
  refresh(id: string, log: Logger): Promise<void> {
    return this.serial(async () => {
      const proxy = this.store.active() === id ? this.store.get(id) : undefined;
      if (proxy === undefined) return;
      this.forwarder.use(this.activeOf(proxy));
      log.info({ event: 'proxy_active_refreshed', proxy_id: id }, "the browser's proxy changed: its connections were closed");
    });
  }

  /** Deletes a proxy unless it is the active one (409 proxy_in_use); the removed record, or undefined. */
  remove(id: string): Promise<StoredProxy | undefined> {
    return this.store.mutate((cur, active) => {
      if (active === id) throw new ConflictError('proxy_in_use', `proxy ${id} is the browser's proxy; PATCH /browsers/{id} to another proxy (or to "" for none) first`);
      const found = cur.find((p) => p.id === id);
      return found ? { next: cur.filter((p) => p !== found), result: found } : { next: cur, result: undefined };
    });
  }

  /** Waits for every change asked for so far. */
  idle(): Promise<void> {
    return this.queue.drain();
  }

  private activeOf(proxy: StoredProxy): ActiveProxy {
    try {
      return { proxy, upstream: upstreamFor(proxy, this.providers) };
    } catch (err) {
      if (!(err instanceof OperationFailedError)) throw err;
      return { proxy, upstream: null, problem: err.inner?.message ?? err.message };
    }
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    return this.queue.run(fn);
  }
}
