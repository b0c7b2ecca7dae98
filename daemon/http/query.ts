// Query parameters: each route declares its own as a zod object of the helpers below; the server
// validates every request's query against it (an unknown parameter is a bad_request detail like
// an unknown body field) and hands the parsed values to the handler as `ctx.query`.
import { z } from 'zod';
import { lazy } from '../core/lazy.js';

/** `true` / `false` (also 1 / 0). */
export const qBool = (description: string) =>
  z
    .enum(['true', 'false', '1', '0'], { message: 'must be true or false' })
    .transform((v) => v === 'true' || v === '1')
    .optional()
    .meta({ description });

/** A whole number within [min, max]. */
export const qInt = (description: string, min: number, max: number) =>
  z
    .string()
    .regex(/^\d{1,15}$/, `must be a whole number from ${min} to ${max}`)
    .transform(Number)
    .refine((n) => n >= min && n <= max, `must be a whole number from ${min} to ${max}`)
    .optional()
    .meta({ description, type: 'integer', minimum: min, maximum: max });

export const qString = (description: string, max = 4096) => z.string().max(max, `must be at most ${max} characters`).optional().meta({ description });

/** A required string parameter. */
export const qRequired = (description: string, max = 4096) =>
  z
    .string({ error: (iss) => (iss.input === undefined ? 'is required' : 'must be a string') })
    .min(1, 'must not be empty')
    .max(max, `must be at most ${max} characters`)
    .meta({ description });

export type QuerySchema = z.ZodObject<Record<string, z.ZodType>>;

/** The shared `wait` parameter of the routes that take the browser's lifecycle lock. */
export const waitQuery = lazy(() => z.strictObject({
  wait: qBool('false: answer 409 busy instead of queueing behind a running browser operation (restart, extension install); default true'),
}));

/** The query of a URL as a plain object; a parameter given twice is an array (refused by the string schemas). */
function queryObject(url: URL): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of url.searchParams) {
    const prev = out[k];
    out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  return out;
}

/** The query of a route that takes no parameters: only the empty one passes. */
const NO_PARAMS = lazy(() => z.strictObject({}));

/** The parsed query, or the problems of it as `bad_request` details (`<param>: <why>`). */
export function parseQuery(schema: QuerySchema | undefined, url: URL): { ok: true; value: Record<string, unknown> } | { ok: false; problems: string[] } {
  // Most requests have no query: nothing to parse for a route without parameters. (A zod object
  // built per request would be compiled anew by zod at each parse: that was ~10% of the CPU of a
  // small stdin write.)
  if (schema === undefined && url.search === '') return { ok: true, value: {} };
  const raw = queryObject(url);
  const parsed = (schema ?? NO_PARAMS()).safeParse(raw);
  if (parsed.success) return { ok: true, value: parsed.data };
  const problems: string[] = [];
  for (const issue of parsed.error.issues) {
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) problems.push(`${key}: is not a query parameter of this route${schema === undefined ? ' (it takes none)' : ` (it takes ${Object.keys(schema.shape).join(', ')})`}`);
    } else {
      const name = String(issue.path[0] ?? '(query)');
      problems.push(`${name}: ${Array.isArray(raw[name]) ? 'is given more than once' : issue.message}`);
    }
  }
  return { ok: false, problems };
}

/** The path's parameters as the route's `doc.params` parses them, or the problems (`<param>: <why>`). */
export function parseParams(schema: z.ZodObject<Record<string, z.ZodType>> | undefined, params: Record<string, string>): { ok: true; value: Record<string, unknown> } | { ok: false; problems: string[] } {
  if (schema === undefined) return { ok: true, value: params };
  const parsed = schema.safeParse(params);
  if (parsed.success) return { ok: true, value: parsed.data };
  return { ok: false, problems: parsed.error.issues.map((issue) => `${String(issue.path[0] ?? '(path)')}: ${issue.message}`) };
}
