// The proxies, kept in one JSON file `<stateDir>/proxies.json` (mode 0600; it holds the
// write-only passwords and CA bundles, so it is as secret as the state dir), with the id of the
// browser's active proxy (`active`, PATCH /browsers/{id}) in the same file: one write changes both,
// so a proxy can never be deleted while it is active, whatever the daemon is killed in between.
//
// A core/json-store.ts JsonStore: every change is written atomically (a temp file in the same
// directory, fsync, rename over the old file, fsync the directory). A daemon killed at any moment leaves the old or the new content,
// never a mix. Changes are serialized: one write at a time, in the order they were asked for, and
// the in-memory list only changes once its write is on disk (a failed write changes nothing).
// A file that cannot be read as a store at start is renamed aside (`proxies.json.broken-<time>`)
// and reported (`proxy_store_broken`), never overwritten.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { z, type ZodType } from 'zod';
import { lazy } from '../../core/lazy.js';
import { JsonStore } from '../../core/json-store.js';
import type { Logger } from '../../core/log.js';
import type { CheckCause } from '../upstream/dial.js';
import type { ProxyType } from './schema.js';

export const STORE_FILE = 'proxies.json';
const STORE_VERSION = 1;

export interface StoredProxy {
  id: string;
  name?: string;
  type: ProxyType;
  protocol: 'http' | 'https';
  /** As validated at creation, write-only fields included. */
  config: Record<string, unknown>;
  /** The project of the key that created it; null for keys without a project. */
  project: string | null;
  created_at: string;
  status?: 'available' | 'unavailable';
  last_checked?: string;
  ip_address?: string;
  /** Hosts reached directly instead of through this proxy (stored form, bypass.ts). */
  bypass_hosts?: string[];
  /** Why the last check without url found it unavailable; absent while available or unchecked. */
  last_check_error?: { code: CheckCause; message: string };
}

// Structure only: the rules of each field are checked when a proxy is created, and a stricter
// rule in a later version must not make an older store unreadable.
const fileSchema = lazy(() => z.object({
  version: z.literal(STORE_VERSION),
  proxies: z.array(
    z.looseObject({
      id: z.string().min(1),
      name: z.string().optional(),
      type: z.enum(['datacenter', 'isp', 'residential', 'mobile', 'custom']),
      protocol: z.enum(['http', 'https']),
      config: z.record(z.string(), z.unknown()),
      project: z.string().nullable(),
      created_at: z.string(),
      status: z.enum(['available', 'unavailable']).optional(),
      last_checked: z.string().optional(),
      ip_address: z.string().optional(),
      bypass_hosts: z.array(z.string()).optional(),
      last_check_error: z.object({ code: z.string(), message: z.string() }).optional(),
    }),
  ),
  active: z.string().nullable().optional(),
}));

type ProxyFile = { version: typeof STORE_VERSION; proxies: readonly StoredProxy[]; active?: string | null };

export class ProxyStore {
  private constructor(
    readonly file: string,
    private readonly store: JsonStore<ProxyFile>,
  ) {}

  /**
   * Reads `<dir>/proxies.json` (creating `dir` 0700 when missing). A broken file is set aside. The
   * temps of unfinished writes in the state dir are removed at start, before this (core/boot.ts).
   */
  static open(dir: string, log: Logger): ProxyStore {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const file = path.join(dir, STORE_FILE);
    const store = JsonStore.open<ProxyFile>({
      file,
      schema: fileSchema as () => ZodType<ProxyFile>,
      empty: () => ({ version: STORE_VERSION, proxies: [] }),
      log,
      event: 'proxy_store',
      what: 'the proxy store',
      repair: (f) => {
        const active = f.active ?? null;
        if (active === null || f.proxies.some((p) => p.id === active)) return f;
        log.warn({ event: 'proxy_active_missing', proxy_id: active }, 'the stored active proxy is not in the store: the browser connects directly');
        return { ...f, active: null };
      },
      loaded: (f) => ({ proxies: f.proxies.length, active_proxy: f.active ?? null }),
    });
    return new ProxyStore(file, store);
  }

  list(): readonly StoredProxy[] {
    return this.store.value.proxies;
  }

  get(id: string): StoredProxy | undefined {
    return this.list().find((p) => p.id === id);
  }

  /** The id of the browser's active proxy (as last written), or null: direct. */
  active(): string | null {
    return this.store.value.active ?? null;
  }

  /**
   * Runs `change` on the current list (and active id) when every earlier change is on disk, writes
   * its result, then makes it current. `change` may throw to refuse (nothing is written then).
   */
  mutate<T>(
    change: (current: readonly StoredProxy[], active: string | null) => { next: readonly StoredProxy[]; active?: string | null; result: T },
  ): Promise<T> {
    return this.store.mutate((cur) => {
      const activeNow = this.active();
      const { next, active = activeNow, result } = change(cur.proxies, activeNow);
      if (next === cur.proxies && active === activeNow) return { next: cur, result };
      return { next: { version: STORE_VERSION, proxies: next, ...(active !== null ? { active } : {}) }, result };
    });
  }

  insert(record: StoredProxy): Promise<StoredProxy> {
    return this.mutate((cur) => ({ next: [...cur, record], result: record }));
  }

  /** The removed record, or undefined when there was none (nothing is written then). */
  remove(id: string): Promise<StoredProxy | undefined> {
    return this.mutate((cur) => {
      const found = cur.find((p) => p.id === id);
      return found ? { next: cur.filter((p) => p !== found), result: found } : { next: cur, result: undefined };
    });
  }

  /** Replaces one record by `fn(record)`; undefined when it is gone (nothing is written then). */
  update(id: string, fn: (p: StoredProxy) => StoredProxy): Promise<StoredProxy | undefined> {
    return this.mutate((cur) => {
      const i = cur.findIndex((p) => p.id === id);
      if (i < 0) return { next: cur, result: undefined };
      const updated = fn(cur[i] as StoredProxy);
      return { next: cur.map((p, j) => (j === i ? updated : p)), result: updated };
    });
  }

  /** Resolves once every change asked for so far is on disk (or failed). */
  idle(): Promise<void> {
    return this.store.idle();
  }
}
