// The routes of /proxies, and the proxy's fields of PATCH /browsers/{id} (the browser's active proxy;
// the browser module owns the route: browserUpdatePart).
// A key with a project sees only the proxies its project created (any other is 404, and lists leave
// them out); a key without a project sees every proxy. The limit on stored proxies is per project:
// MAX_PROXIES for each project, and MAX_PROXIES for the proxies created by keys without a project
// (one shared bucket). The descriptions of every choice are in docs.ts.
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { lazy } from '../core/lazy.js';
import type { Identity } from '../http/auth.js';
import { LimitExceededError, NotFoundError, UnsupportedFieldError } from '../core/errors.js';
import { qInt, qString } from '../http/query.js';
import type { RequestContext, Route } from '../http/router.js';
import { routesIn } from '../http/route.js';
import type { BrowserUpdatePart } from '../chromium/types.js';
import type { ActiveControl } from './active.js';
import type { ProxyChecker } from './check/check.js';
import { BROWSER_UPDATE_DOC, CHECK_DOC, CREATE_DOC, DELETE_DOC, LIST_DOC, MAX_PROXIES, UPDATE_DOC } from './docs.js';
import { LIST_LIMITS, listPage, toPublic, visibleTo, type ListQuery } from './store/listing.js';
import { checkBodySchema, createProxySchema, proxyListSchema, proxySchema, updateProxySchema } from './store/schema.js';
import { parseCheckUrl } from './check/ssrf.js';
import type { ProxyStore, StoredProxy } from './store/store.js';

const route = routesIn('daemon/proxies/routes.ts');

export { MAX_PROXIES } from './docs.js';

export interface RouteDeps {
  store: ProxyStore;
  checker: ProxyChecker;
  active: ActiveControl;
}

const listQuery = lazy(() => z.strictObject({
  limit: qInt(`Page size, 1 to ${LIST_LIMITS.max} (default ${LIST_LIMITS.default})`, 1, LIST_LIMITS.max),
  offset: qInt('Matching proxies to skip, oldest first (default 0)', 0, LIST_LIMITS.maxOffset),
  name: qString('Exact name, case- and accent-insensitive', 255),
  query: qString('Case-insensitive substring of the name, host or exit IP; or the whole id', 255),
}));

function identityOf(ctx: RequestContext): Identity {
  if (ctx.identity === null) throw new Error('proxy routes need an identity');
  return ctx.identity;
}

/**
 * The proxy's fields of PATCH /browsers/{id} (the browser module owns the route): `proxy_id` sets
 * the active proxy, live; `disable_default_proxy: true` is a no-op, false is 422.
 */
export function browserUpdatePart(deps: { active: ActiveControl }): BrowserUpdatePart {
  return {
    fields: lazy(() => ({
      proxy_id: z
        .string({ error: 'must be a string or null' })
        .max(255, 'must be at most 255 characters')
        .nullable()
        .optional()
        .meta({ description: `The stored proxy the browser goes through; "" or null: none (direct); omitted: unchanged.\n\n${BROWSER_UPDATE_DOC}` }),
      disable_default_proxy: z.boolean({ error: 'must be a boolean' }).optional().meta({ description: 'true is accepted (there is no default proxy); false is 422 unsupported_field' }),
    })),
    check(body) {
      if (body.disable_default_proxy === false) throw new UnsupportedFieldError('disable_default_proxy', 'false is not supported: this daemon has no default proxy');
    },
    async apply(body, ctx) {
      const id = body.proxy_id as string | null | undefined;
      if (id !== undefined) await deps.active.set(id, identityOf(ctx).project, ctx.log);
    },
  };
}

export function proxyRoutes(deps: RouteDeps): Route[] {
  const { store, checker, active } = deps;
  const find = (ctx: RequestContext): StoredProxy => {
    const id = ctx.params.id as string;
    const p = store.get(id);
    if (p === undefined || !visibleTo(identityOf(ctx).project, p)) throw new NotFoundError(`no proxy ${id}`);
    return p;
  };

  return [
    route({
      method: 'POST',
      path: '/proxies',
      scope: 'proxies:write',
      doc: () => ({
        summary: 'Create a proxy',
        description: CREATE_DOC,
        body: createProxySchema(),
        responses: { 201: { description: 'the proxy as stored (Location: /proxies/{id})', schema: proxySchema() } },
        errors: [429],
      }),
      handler: async (ctx) => {
        const input = ctx.body;
        const identity = identityOf(ctx);
        const record: StoredProxy = {
          id: randomUUID(),
          ...(input.name !== undefined ? { name: input.name } : {}),
          type: input.type,
          protocol: input.protocol,
          config: { ...input.config },
          ...(input.bypass_hosts !== undefined && input.bypass_hosts.length > 0 ? { bypass_hosts: input.bypass_hosts } : {}),
          project: identity.project,
          created_at: new Date().toISOString(),
        };
        await store.mutate((cur) => {
          if (cur.filter((p) => p.project === record.project).length >= MAX_PROXIES) {
            throw new LimitExceededError(record.project === null ? 'proxies without a project' : `proxies of project ${record.project}`, MAX_PROXIES);
          }
          return { next: [...cur, record], result: record };
        });
        if (input.type === 'residential' && input.config.os !== undefined) {
          ctx.log.warn({ event: 'deprecated_field', field: 'config.os', proxy_id: record.id }, 'config.os of residential proxies is deprecated and not used for targeting');
        }
        ctx.log.info({ event: 'proxy_created', proxy_id: record.id, type: record.type, project: record.project }, 'proxy created');
        return { status: 201, body: toPublic(record), headers: { location: `/proxies/${record.id}` } };
      },
    }),
    route({
      method: 'GET',
      path: '/proxies',
      scope: 'proxies:read',
      doc: () => ({
        summary: 'List the proxies this key may see, oldest first, one page',
        description: LIST_DOC,
        query: listQuery(),
        responses: { 200: { description: 'one page of proxies (headers x-has-more, x-next-offset)', schema: proxyListSchema() } },
        errors: [400],
      }),
      handler: async (ctx) => {
        const page = listPage(store.list(), identityOf(ctx).project, ctx.query as ListQuery);
        return { status: 200, body: page.items.map(toPublic), headers: { 'x-has-more': String(page.hasMore), 'x-next-offset': String(page.nextOffset) } };
      },
    }),
    route({
      method: 'GET',
      path: '/proxies/{id}',
      scope: 'proxies:read',
      doc: () => ({ summary: 'One proxy', responses: { 200: { description: 'the proxy', schema: proxySchema() } } }),
      handler: async (ctx) => ({ status: 200, body: toPublic(find(ctx)) }),
    }),
    route({
      method: 'PATCH',
      path: '/proxies/{id}',
      scope: 'proxies:write',
      doc: () => ({ summary: "Rename a proxy or change its bypass_hosts", description: UPDATE_DOC, body: updateProxySchema(), responses: { 200: { description: 'the proxy as stored', schema: proxySchema() } } }),
      handler: async (ctx) => {
        const input = ctx.body;
        const p = find(ctx);
        const updated = await store.update(p.id, (cur) => {
          const { bypass_hosts: oldBypass, ...rest } = cur;
          const bypass = input.bypass_hosts ?? oldBypass ?? [];
          return { ...rest, ...(input.name !== undefined ? { name: input.name } : {}), ...(bypass.length > 0 ? { bypass_hosts: bypass } : {}) };
        });
        if (updated === undefined) throw new NotFoundError(`no proxy ${p.id}`);
        ctx.log.info({ event: 'proxy_updated', proxy_id: p.id, fields: Object.keys(input) }, 'proxy updated');
        if (JSON.stringify(p.bypass_hosts ?? []) !== JSON.stringify(updated.bypass_hosts ?? [])) await active.refresh(p.id, ctx.log);
        return { status: 200, body: toPublic(updated) };
      },
    }),
    route({
      method: 'DELETE',
      path: '/proxies/{id}',
      scope: 'proxies:write',
      doc: () => ({ summary: 'Delete a proxy', description: DELETE_DOC, responses: { 204: { description: 'deleted' } }, errors: [409] }),
      handler: async (ctx) => {
        const p = find(ctx);
        const removed = await active.remove(p.id);
        if (removed === undefined) throw new NotFoundError(`no proxy ${p.id}`);
        ctx.log.info({ event: 'proxy_deleted', proxy_id: p.id }, 'proxy deleted');
        return { status: 204 };
      },
    }),
    route({
      method: 'POST',
      path: '/proxies/{id}/check',
      scope: 'proxies:check',
      doc: () => ({
        summary: 'Check a proxy by connecting through it',
        description: CHECK_DOC,
        body: checkBodySchema(),
        bodyRequired: false,
        responses: { 200: { description: 'the proxy after the check', schema: proxySchema() } },
        errors: [422, 429],
      }),
      handler: async (ctx) => {
        const body = ctx.body;
        const proxy = find(ctx);
        // The gateway first: a managed type without one fails before any name is resolved.
        const upstream = checker.upstream(proxy, ctx.log, body.url === undefined ? 'default' : 'url');
        if (body.url === undefined) {
          const updated = await checker.shared(`${proxy.id}\n`, ctx.log, async () => {
            const outcome = await checker.checkDefault(proxy, upstream, ctx.log);
            const now = new Date().toISOString();
            const rec = await store.update(proxy.id, (p) => {
              const { ip_address: _ip, last_check_error: _err, ...rest } = p;
              return {
                ...rest,
                status: outcome.available ? 'available' : 'unavailable',
                last_checked: now,
                ...(outcome.ip !== null ? { ip_address: outcome.ip } : {}),
                ...(!outcome.available && outcome.failure !== null ? { last_check_error: outcome.failure } : {}),
              };
            });
            if (rec === undefined) throw new NotFoundError(`no proxy ${proxy.id}: it was deleted during the check`);
            return rec;
          });
          return { status: 200, body: toPublic(updated) };
        }
        // What needs no lookup is refused at once; the lookup itself runs in the check's slot and under its deadline.
        const target = parseCheckUrl(body.url);
        await checker.shared(`${proxy.id}\n${target.url.href}`, ctx.log, () => checker.checkUrl(proxy, upstream, target, ctx.log));
        return { status: 200, body: toPublic(find(ctx)) };
      },
    }),
  ];
}
