// The telemetry routes under `/browsers/{id}/telemetry/…` (the SDK's control-plane paths), each
// also at `/telemetry/…` like every browser route (Kernel's in-VM server; the SDK's direct calls to
// the VM's base_url; http/route.ts's withRootPaths): the category switches, custom events, the SSE
// stream and the paged event list.
import { z } from 'zod';
import { lazy } from '../core/lazy.js';
import { BadRequestError } from '../core/errors.js';
import { Slots } from '../core/slots.js';
import { SSE_HEARTBEAT_MS } from '../core/streams/sse.js';
import { qInt, qString } from '../http/query.js';
import type { HttpRoute, Route, RouteDoc } from '../http/router.js';
import { routesIn } from '../http/route.js';
import type { CategorySwitches, Stored, TelemetryBus } from './bus.js';
import { CATEGORIES, DEFAULT_ON, type Category } from './event.js';
import { boundValue } from './redact.js';
import { streamTelemetry } from './sse.js';

const route = routesIn('daemon/telemetry/routes.ts');

/** A custom event's body at most. */
export const CUSTOM_EVENT_MAX_BYTES = 16 * 1024;
/** Events per page of GET …/telemetry/events at most (default 100). */
export const PAGE_MAX = 1000;

const categoryConfig = lazy(() => z.strictObject({ enabled: z.boolean().optional().meta({ description: 'Whether this category is captured' }) }));
const categoriesShape = lazy(() => Object.fromEntries(CATEGORIES.map((c) => [c, categoryConfig().optional()])) as Record<Category, z.ZodOptional<ReturnType<typeof categoryConfig>>>);
export const configBody = lazy(() => z
  .strictObject({ browser: z.strictObject(categoriesShape()).optional().meta({ description: 'Per-category switches' }) })
  .meta({ description: "The SDK's BrowserTelemetryConfig" }));
type ConfigBody = z.infer<ReturnType<typeof configBody>>;

export const customEventBody = lazy(() => z.strictObject({
  type: z
    .string()
    .regex(/^[a-z][a-z0-9_.:-]{0,63}$/, 'must be 1-64 characters: a lowercase letter, then lowercase letters, digits, _ . : -')
    .meta({ description: 'The event type (your own name: it does not have to be one of the SDK\'s)' }),
  category: z.enum(CATEGORIES).optional().meta({ description: 'The category it is filed under (default control); dropped while that category is off' }),
  data: z.record(z.string(), z.unknown()).optional().meta({ description: 'Any JSON object; strings cut at 2048 characters (truncated: true)' }),
}));

const streamQuery = lazy(() => z.strictObject({
  replay: qString('`all`: start with the oldest event the ring keeps; anything else: only new events. A Last-Event-ID header takes precedence (resume after that seq)', 16),
}));

const KNOWN_CATEGORIES: ReadonlySet<string> = new Set([...CATEGORIES, 'monitor']);
const DURATION = /^(\d{1,9})(ms|s|m|h|d)$/;
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const timeParam = (what: string) =>
  z
    .string()
    .max(64)
    .transform((v, ctx) => {
      const d = DURATION.exec(v);
      if (d !== null) return (Date.now() - Number(d[1]) * (UNIT_MS[d[2] as string] as number)) * 1000;
      const t = Date.parse(v);
      if (Number.isNaN(t) || !/^\d{4}-\d\d-\d\dT/.test(v)) {
        ctx.addIssue({ code: 'custom', message: 'must be an RFC 3339 time or a duration like 5m (ms, s, m, h, d)' });
        return z.NEVER;
      }
      return t * 1000;
    })
    .optional()
    .meta({ description: what, type: 'string' });
const eventsQuery = lazy(() => z.strictObject({
  offset: qInt('The cursor: the X-Next-Offset of the previous page (a seq). Ascending: events from this seq on; descending: events before it', 0, Number.MAX_SAFE_INTEGER),
  limit: qInt(`Events per page (default 100, at most ${PAGE_MAX})`, 1, PAGE_MAX),
  category: z
    .union([z.string().max(512), z.array(z.string().max(512)).max(16)])
    .transform((v, ctx) => {
      // The SDK sends a list comma-separated (category=console,network); repeating the parameter works too.
      const names = (Array.isArray(v) ? v : [v]).flatMap((x) => x.split(','));
      const bad = names.filter((n) => !KNOWN_CATEGORIES.has(n));
      if (bad.length > 0) {
        ctx.addIssue({ code: 'custom', message: `unknown category ${JSON.stringify(bad[0])} (${[...KNOWN_CATEGORIES].join(', ')})` });
        return z.NEVER;
      }
      return names;
    })
    .optional()
    .meta({ description: 'Only events of these categories (comma-separated, or the parameter repeated); applied within the page', type: 'string' }),
  order: z.enum(['asc', 'desc']).optional().meta({ description: 'asc (default): oldest first; desc: newest first' }),
  since: timeParam('Start of the window: RFC 3339 or a duration ago (5m); default 5m; ignored with offset; not with order=desc'),
  until: timeParam('End of the window (exclusive): RFC 3339 or a duration ago'),
}));

const configResponse = lazy(() => ({ 200: { description: 'the active switches (BrowserTelemetryConfig)', schema: configBody() } }));

export interface TelemetryRouteDeps {
  bus: TelemetryBus;
  maxStreams: number;
  /** BROWSERD_SSE_STALL_MS: a reader that takes none of a write for this long is dropped. */
  stallMs: number;
  /** A reader dropped for falling behind (the metric counts it). */
  onDrop(): void;
}

function configOf(s: CategorySwitches): ConfigBody {
  return { browser: Object.fromEntries(CATEGORIES.map((c) => [c, { enabled: s[c] }])) };
}

function switchesOf(body: ConfigBody, base: 'defaults' | null): Partial<CategorySwitches> {
  const out: Partial<CategorySwitches> = {};
  if (base === 'defaults') for (const c of CATEGORIES) out[c] = DEFAULT_ON.has(c);
  for (const c of CATEGORIES) {
    const v = body.browser?.[c]?.enabled;
    if (v !== undefined) out[c] = v;
  }
  return out;
}

/** The seq after `Last-Event-ID`, or null when there is none; a bad one is 400. */
function lastEventId(raw: string | string[] | undefined): number | null {
  if (raw === undefined) return null;
  const v = Array.isArray(raw) ? raw[0] : raw;
  if (v === undefined || !/^\d{1,15}$/.test(v.trim())) throw BadRequestError.field('Last-Event-ID', 'must be the seq of an event (a whole number)');
  return Number(v.trim());
}

export function telemetryRoutes(deps: TelemetryRouteDeps): Route[] {
  const { bus, maxStreams } = deps;
  const streams = new Slots({ what: 'telemetry streams', max: maxStreams, message: `${maxStreams} telemetry streams are open already (BROWSERD_TELEMETRY_MAX_STREAMS)` });
  const telemetryRoute = (r: Omit<HttpRoute, 'path' | 'source' | 'doc'> & { sub: string; doc: () => RouteDoc }): Route[] => {
    const { sub, ...rest } = r;
    return [route({ ...rest, path: `/browsers/{id}/telemetry${sub}` })];
  };
  const config = (method: 'PUT' | 'PATCH'): Route[] =>
    telemetryRoute({
      method,
      sub: '',
      scope: 'telemetry:write',
      doc: () => ({
        summary: method === 'PUT' ? 'Set every category switch (unnamed ones back to their defaults)' : 'Change the named category switches',
        description:
          'The body is the SDK\'s BrowserTelemetryConfig: `{"browser":{"console":{"enabled":true},…}}`. ' +
          'Operational categories (control, connection, system, captcha) are on by default; the CDP ones (console, network, page, interaction) and screenshot are off. ' +
          'Turning a CDP category on enables its DevTools domains on every page at once; off disables them. The answer comes once every page has them (each page answers within 10 s or is left as it is): events a page makes after the answer follow the new switches.',
        body: configBody(),
        responses: configResponse(),
        errors: [400],
      }),
      handler: async (ctx) => {
        const body = ctx.body as ConfigBody;
        return { status: 200, body: configOf(await bus.setCategories(switchesOf(body, method === 'PUT' ? 'defaults' : null))) };
      },
    });

  return [
    ...telemetryRoute({
      method: 'GET',
      sub: '',
      scope: 'telemetry:read',
      doc: () => ({ summary: 'The telemetry category switches', responses: configResponse() }),
      handler: async () => ({ status: 200, body: configOf(bus.categories()) }),
    }),
    ...config('PUT'),
    ...config('PATCH'),
    ...telemetryRoute({
      method: 'POST',
      sub: '/events',
      scope: 'telemetry:write',
      bodyLimitBytes: CUSTOM_EVENT_MAX_BYTES,
      doc: () => ({
        summary: 'Publish a custom event',
        description:
          `A JSON body of at most ${CUSTOM_EVENT_MAX_BYTES} bytes: \`{"type","category"?,"data"?}\`. It gets the next seq, source \`{"kind":"kernel_api","event":"custom"}\`, ` +
          'and the time of arrival. 201 `{"seq"}`; 202 `{"seq":null}` when its category is off (nothing was recorded).',
        body: customEventBody(),
        responses: { 201: { description: 'recorded', schema: z.object({ seq: z.number().nullable() }) }, 202: { description: 'not recorded: its category is off' } },
        errors: [400, 413],
      }),
      handler: async (ctx) => {
        const body = ctx.body as z.infer<ReturnType<typeof customEventBody>>;
        const cut = { truncated: false };
        const data = body.data === undefined ? undefined : (boundValue(body.data, cut) as Record<string, unknown>);
        const seq = bus.emit(body.type, body.category ?? 'control', { kind: 'kernel_api', event: 'custom' }, data, { truncated: cut.truncated });
        return { status: seq === null ? 202 : 201, body: { seq } };
      },
    }),
    ...telemetryRoute({
      method: 'GET',
      sub: '/stream',
      scope: 'telemetry:read',
      doc: () => ({
        summary: 'Server-Sent Events: every telemetry event as it happens',
        description:
          'Each frame: `id: <seq>` and `data: {"seq","event":{ts,type,category,source,data?,truncated?}}` (the SDK\'s TelemetryStreamResponse); no `event:` line. ' +
          `A comment line every ${SSE_HEARTBEAT_MS / 1000} s of silence. New readers see only new events; \`replay=all\` starts with the oldest event kept; ` +
          'a `Last-Event-ID` header resumes right after that seq (and wins over replay). When events were lost (the reader fell behind the ring, ' +
          'or resumed from before its oldest event) one frame says so: type `events_dropped`, category `monitor`, data `{count, from_seq, to_seq}`, ' +
          'id and seq the last seq lost; the stream goes on with the oldest event kept. A `Last-Event-ID` ahead of the newest event (the daemon restarted: seqs began again) gets one frame ' +
          'of type `cursor_ahead` (data `{last_event_id, next_seq, reason}`), then the new events. A reader that takes none of a write (at most 256 KiB) for BROWSERD_SSE_STALL_MS (30 s by default) gets a last frame of type ' +
          '`stream_dropped` (data `{reason, next_seq}`: resume with Last-Event-ID) and is dropped (docs/memory.md). ' +
          `At most BROWSERD_TELEMETRY_MAX_STREAMS streams at once (${maxStreams} here; 429 past it).`,
        query: streamQuery(),
        responses: { 200: { description: 'the event stream', mediaType: 'text/event-stream', schema: { type: 'string' } } },
        errors: [400, 429],
      }),
      handler: async (ctx) => {
        const q = ctx.query as z.infer<ReturnType<typeof streamQuery>>;
        const last = lastEventId(ctx.req.headers['last-event-id']);
        const from = last !== null ? last + 1 : q.replay === 'all' ? bus.first : bus.end;
        await streams.run(() => streamTelemetry(ctx.res, bus, from, { signal: ctx.signal, stallMs: deps.stallMs, onDrop: deps.onDrop }));
        return null;
      },
    }),
    ...telemetryRoute({
      method: 'GET',
      sub: '/events',
      scope: 'telemetry:read',
      doc: () => ({
        summary: 'One page of the events the ring keeps',
        description:
          'A JSON array of envelopes `{"seq","event"}`, with headers `X-Next-Offset` (the cursor of the next page) and `X-Has-More`. ' +
          'Ascending (default): from `offset` on, or from the first event at or after `since` (default 5m ago). Descending: the newest events before `offset` (or all), ' +
          '`since` refused. `until` ends the window (exclusive). `category` (comma-separated, or repeated) filters within the page: a page may be empty while X-Has-More is true. ' +
          'Only what the ring keeps is listed (BROWSERD_TELEMETRY_RING events / BROWSERD_TELEMETRY_RING_BYTES).',
        query: eventsQuery(),
        responses: { 200: { description: 'one page of events (headers x-next-offset, x-has-more)', schema: { type: 'array', items: { type: 'object' } } } },
        errors: [400],
      }),
      handler: async (ctx) => {
        const q = ctx.query as z.infer<ReturnType<typeof eventsQuery>>;
        const limit = q.limit ?? 100;
        const cats = q.category === undefined ? null : new Set<string>(q.category);
        const until = q.until ?? Infinity;
        let page: Stored[];
        let hasMore: boolean;
        let nextOffset: number;
        if (q.order === 'desc') {
          if (q.since !== undefined) throw BadRequestError.field('since', 'cannot be combined with order=desc');
          let before = q.offset ?? bus.end;
          if (q.offset === undefined && until !== Infinity) {
            // The newest event before `until`.
            const all = bus.read(bus.first, bus.size).events;
            const firstAfter = all.find((e) => e.ts >= until);
            if (firstAfter !== undefined) before = firstAfter.seq;
          }
          page = bus.readBack(before, limit);
          const lowest = page.length > 0 ? (page[page.length - 1] as Stored).seq : bus.first;
          hasMore = lowest > bus.first;
          nextOffset = hasMore ? lowest : 0;
        } else {
          let start = q.offset;
          if (start === undefined) {
            const since = q.since ?? (Date.now() - 5 * 60_000) * 1000;
            const all = bus.read(bus.first, bus.size).events;
            start = all.find((e) => e.ts >= since)?.seq ?? bus.end;
          }
          const read = bus.read(start, limit);
          page = read.events;
          const cutAt = page.findIndex((e) => e.ts >= until);
          const ended = cutAt >= 0;
          if (ended) page = page.slice(0, cutAt);
          nextOffset = page.length > 0 ? (page[page.length - 1] as Stored).seq + 1 : Math.max(start, bus.first);
          hasMore = !ended && read.next < bus.end;
        }
        const items = page.filter((e) => cats === null || cats.has(e.category));
        const text = `[${items.map((e) => e.json).join(',')}]`;
        ctx.res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), 'x-next-offset': String(nextOffset), 'x-has-more': String(hasMore) });
        ctx.res.end(text);
        return null;
      },
    }),
  ];
}
