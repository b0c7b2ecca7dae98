// The routes of /proxies. A key with a project sees only the proxies its project created (any
// other is 404, and lists leave them out); a key without a project sees every proxy. The limit on
// stored proxies is per project: MAX_PROXIES for each project, and MAX_PROXIES for the proxies
// created by keys without a project (one shared bucket).
import { randomUUID } from 'node:crypto';
import type { Identity } from '../http/auth.js';
import { LimitExceededError, NotFoundError } from '../core/errors.js';
import type { RequestContext, Route } from '../http/router.js';
import type { ProxyChecker } from './check.js';
import { checkBodySchema, createProxySchema, proxyListSchema, proxySchema } from './schema.js';
import { RESOLVE_GRACE_MS } from './resolve.js';
import { parseCheckUrl } from './ssrf.js';
import type { ProxyStore, StoredProxy } from './store.js';

/** The most proxies one project keeps (keys without a project share one such bucket). */
export const MAX_PROXIES = 1000;

export interface RouteDeps {
  store: ProxyStore;
  checker: ProxyChecker;
}

function identityOf(ctx: RequestContext): Identity {
  if (ctx.identity === null) throw new Error('proxy routes need an identity');
  return ctx.identity;
}

function visible(identity: Identity, p: StoredProxy): boolean {
  return identity.project === null || p.project === identity.project;
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
  if (p.status !== undefined) out.status = p.status;
  if (p.last_checked !== undefined) out.last_checked = p.last_checked;
  if (p.ip_address !== undefined) out.ip_address = p.ip_address;
  return out;
}

export function proxyRoutes(deps: RouteDeps): Route[] {
  const { store, checker } = deps;
  const find = (ctx: RequestContext): StoredProxy => {
    const id = ctx.params.id as string;
    const p = store.get(id);
    if (p === undefined || !visible(identityOf(ctx), p)) throw new NotFoundError(`no proxy ${id}`);
    return p;
  };

  return [
    {
      method: 'POST',
      path: '/proxies',
      scope: 'proxies:write',
      doc: {
        summary: 'Create a proxy',
        description:
          `Validated per \`type\`; \`config.password\` and \`config.ca_bundle\` (custom) are write-only. The proxy belongs to the project of the key that creates it. At most ${MAX_PROXIES} proxies per project, counted over the proxies created by keys of that project; the proxies created by keys without a project share one bucket of ${MAX_PROXIES} (429 limit_exceeded past it; deleting frees a place). The residential \`os\` field is deprecated: accepted, stored, logged, not used.`,
        body: createProxySchema,
        responses: { 201: { description: 'the proxy as stored (Location: /proxies/{id})', schema: proxySchema } },
        errors: [429],
      },
      handler: async (ctx) => {
        const input = await ctx.json(createProxySchema);
        const identity = identityOf(ctx);
        const record: StoredProxy = {
          id: randomUUID(),
          ...(input.name !== undefined ? { name: input.name } : {}),
          type: input.type,
          protocol: input.protocol,
          config: { ...input.config },
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
    },
    {
      method: 'GET',
      path: '/proxies',
      scope: 'proxies:read',
      doc: { summary: 'List the proxies this key may see, oldest first', responses: { 200: { description: 'the proxies', schema: proxyListSchema } } },
      handler: async (ctx) => {
        const identity = identityOf(ctx);
        return { status: 200, body: store.list().filter((p) => visible(identity, p)).map(toPublic) };
      },
    },
    {
      method: 'GET',
      path: '/proxies/{id}',
      scope: 'proxies:read',
      doc: { summary: 'One proxy', responses: { 200: { description: 'the proxy', schema: proxySchema } } },
      handler: async (ctx) => ({ status: 200, body: toPublic(find(ctx)) }),
    },
    {
      method: 'DELETE',
      path: '/proxies/{id}',
      scope: 'proxies:write',
      doc: { summary: 'Delete a proxy', responses: { 204: { description: 'deleted' } } },
      handler: async (ctx) => {
        const p = find(ctx);
        const removed = await store.remove(p.id);
        if (removed === undefined) throw new NotFoundError(`no proxy ${p.id}`);
        ctx.log.info({ event: 'proxy_deleted', proxy_id: p.id }, 'proxy deleted');
        return { status: 204 };
      },
    },
    {
      method: 'POST',
      path: '/proxies/{id}/check',
      scope: 'proxies:check',
      doc: {
        summary: 'Check a proxy by connecting through it',
        description: [
          'Connects to the proxy (TLS when its protocol is https, verified against its ca_bundle, else the system CAs), sends `CONNECT` with Basic proxy auth when it has credentials, then TLS with SNI to an https target or a plain HTTP/1.1 GET to an http target, through the tunnel in both cases. Managed types go through the gateway of their type in BROWSERD_PROXY_PROVIDERS_FILE, with the targeting appended to the gateway username as `-country-us-state-co-city-denver-zip-…-asn-<number>-carrier-…` (that order, values lower case); no gateway for the type → 422 with inner_error.code provider_not_configured.',
          'Without `url`: BROWSERD_PROXY_CHECK_URLS in turn until one answers 2xx with an IP address (the whole body, or JSON `ip`); a failure of the proxy itself ends the check early. `status` becomes available when a check URL answered 2xx through the proxy, else unavailable; `ip_address` is the IP seen (removed when none was); `last_checked` is set; the stored Proxy is returned (200 in both cases).',
          `With \`url\`: only http/https without credentials and not a \`localhost\` name (RFC 6761), and every address the host resolves to must be public: ipaddr.js \`unicast\`, and for IPv6 inside the global unicast block 2000::/3 and not IPv4-compatible (::/96) (else 400 bad_request). The host name is looked up in DNS (A and AAAA at once, through the servers of /etc/resolv.conf; /etc/hosts is not consulted; once one family answered, the other may take at most ${RESOLVE_GRACE_MS} ms more) under the check's deadline, after the check slot was taken: a name that does not resolve is 422 target_unreachable, no answer in time is 422 timeout naming the resolve phase. The tunnel is \`CONNECT <checked address>:<port>\` (the first address, IPv4 first), the host name goes only into SNI and Host. Any HTTP response of the target counts as reachable: 200 with the Proxy unchanged (status, last_checked and ip_address are not touched, the IP of a url check is not reported). A failure is 422 proxy_check_failed with inner_error.code proxy_unreachable, proxy_auth_failed, target_unreachable, tls_failed or timeout.`,
          'The whole check has BROWSERD_PROXY_CHECK_TIMEOUT_MS; each phase (name lookup of a url check, connect, CONNECT answer, TLS, response) waits at most what is left, and a timeout names the phase. A check is one proxy with one url (or with none): two requests for the same proxy and the same url (compared after URL normalization), or for the same proxy both without url, while one runs share that run and get its outcome; requests for one proxy with different urls are different checks and run on their own. At most BROWSERD_MAX_PROXY_CHECKS checks run at once (429 limit_exceeded past it, before any name is looked up; joining a running check takes no place).',
        ].join('\n\n'),
        body: checkBodySchema,
        bodyRequired: false,
        responses: { 200: { description: 'the proxy after the check', schema: proxySchema } },
        errors: [422, 429],
      },
      handler: async (ctx) => {
        const body = await ctx.json(checkBodySchema, { optional: true });
        const proxy = find(ctx);
        // The gateway first: a managed type without one fails before any name is resolved.
        const upstream = checker.upstream(proxy, ctx.log, body.url === undefined ? 'default' : 'url');
        if (body.url === undefined) {
          const updated = await checker.shared(`${proxy.id}\n`, ctx.log, async () => {
            const outcome = await checker.checkDefault(proxy, upstream, ctx.log);
            const now = new Date().toISOString();
            const rec = await store.update(proxy.id, (p) => {
              const { ip_address: _old, ...rest } = p;
              return { ...rest, status: outcome.available ? 'available' : 'unavailable', last_checked: now, ...(outcome.ip !== null ? { ip_address: outcome.ip } : {}) };
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
    },
  ];
}
