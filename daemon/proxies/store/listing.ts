// What the routes show of a stored proxy, and GET /proxies: who sees what, the filters and the pages.
//
// Visibility: a key with a project sees only the proxies its project created; a key without one
// sees every proxy. The list is oldest first (creation order). Filters, then the page:
//   name    exact match of the whole name, case- and accent-insensitive (Unicode collation at base
//           strength, as the SDK says the production database matches: `Café` = `cafe` = `CAFE`);
//           the value is trimmed like stored names; empty: no filter
//   query   case-insensitive substring of the name, the custom proxy's host, or the exit IP
//           (ip_address); or the whole id, exactly; empty: no filter
//   offset, limit   the page: skip `offset` matching proxies, return at most `limit`
// The page's headers, as the SDK's OffsetPagination reads them: `x-has-more` (true|false) and
// `x-next-offset`: the offset of the next page, or 0 on the last page (the stop sentinel).
import type { StoredProxy } from './store.js';

/** Page size limits of GET /proxies (MAX equals the per-project proxy limit: one page can hold them all). */
export const LIST_LIMITS = { default: 100, max: 1000, maxOffset: 1_000_000_000 } as const;

// Made at the first filtered listing, not at import: a collator reads ICU's collation data, ~3 MiB of
// the daemon's resident memory from its start on (bench/ANALYSIS.md §7).
let collator: Intl.Collator | undefined;
const nameCollator = (): Intl.Collator => (collator ??= new Intl.Collator('und', { sensitivity: 'base', usage: 'search' }));

export interface ListQuery {
  limit?: number;
  offset?: number;
  name?: string;
  query?: string;
}

export interface Page {
  items: StoredProxy[];
  hasMore: boolean;
  nextOffset: number;
}

export function visibleTo(project: string | null, p: StoredProxy): boolean {
  return project === null || p.project === project;
}

function matches(p: StoredProxy, q: ListQuery): boolean {
  const name = q.name?.trim() ?? '';
  if (name !== '' && (p.name === undefined || nameCollator().compare(p.name, name) !== 0)) return false;
  const query = q.query?.trim() ?? '';
  if (query === '') return true;
  if (p.id === query) return true;
  const needle = query.toLowerCase();
  const host = p.type === 'custom' && typeof p.config.host === 'string' ? p.config.host : undefined;
  return [p.name, host, p.ip_address].some((v) => v !== undefined && v.toLowerCase().includes(needle));
}

/** The page of the proxies `project` may see that match `q`. */
export function listPage(all: readonly StoredProxy[], project: string | null, q: ListQuery): Page {
  const matching = all.filter((p) => visibleTo(project, p) && matches(p, q));
  const offset = q.offset ?? 0;
  const limit = q.limit ?? LIST_LIMITS.default;
  const items = matching.slice(offset, offset + limit);
  const hasMore = offset + items.length < matching.length;
  return { items, hasMore, nextOffset: hasMore ? offset + items.length : 0 };
}

/** The Proxy as every route returns it: no password, no CA bundle, no project. */
export function toPublic(p: StoredProxy): Record<string, unknown> {
  const out: Record<string, unknown> = { id: p.id };
  if (p.name !== undefined) out.name = p.name;
  out.type = p.type;
  out.protocol = p.protocol;
  if (p.type === 'custom') {
    const c = p.config;
    out.config = {
      host: c.host,
      port: c.port,
      ...(typeof c.username === 'string' ? { username: c.username } : {}),
      has_password: typeof c.password === 'string' && c.password !== '',
      has_ca_bundle: typeof c.ca_bundle === 'string' && c.ca_bundle !== '',
    };
  } else {
    out.config = { ...p.config };
  }
  if (p.bypass_hosts !== undefined && p.bypass_hosts.length > 0) out.bypass_hosts = [...p.bypass_hosts];
  if (p.status !== undefined) out.status = p.status;
  if (p.last_checked !== undefined) out.last_checked = p.last_checked;
  if (p.ip_address !== undefined) out.ip_address = p.ip_address;
  if (p.last_check_error !== undefined) out.last_check_error = { ...p.last_check_error };
  return out;
}
