// Request bodies: read with a size limit (413 past it, without buffering the rest), parse JSON,
// validate with zod into the contract's `bad_request` with one detail per problem.
import type { IncomingMessage } from 'node:http';
import type { ZodType, core } from 'zod';
import { BadRequestError, InvalidRequestError, PayloadTooLargeError } from './errors.js';

/** Marks a request whose body was refused before it was fully read: the server then closes the socket. */
export const UNREAD_BODY = Symbol('browserd.unreadBody');

export async function readBody(req: IncomingMessage, limitBytes: number): Promise<Buffer> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limitBytes) {
    (req as unknown as Record<symbol, boolean>)[UNREAD_BODY] = true;
    throw new PayloadTooLargeError('the request body', limitBytes);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limitBytes) {
      (req as unknown as Record<symbol, boolean>)[UNREAD_BODY] = true;
      req.pause();
      throw new PayloadTooLargeError('the request body', limitBytes);
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks, size);
}

export function isJsonContentType(header: string | undefined): boolean {
  if (header === undefined) return false;
  const type = header.split(';')[0]?.trim().toLowerCase();
  return type === 'application/json' || (type !== undefined && /^application\/[a-z0-9.+-]+\+json$/.test(type));
}

/**
 * The body as JSON validated by `schema`. An empty body is `{}` when `optional` (routes whose
 * body may be left out); otherwise it must be JSON with a JSON content type.
 */
export async function readJson<T>(
  req: IncomingMessage,
  schema: ZodType<T>,
  opts: { limitBytes: number; optional?: boolean },
): Promise<T> {
  const hasBody = req.headers['content-length'] !== undefined ? Number(req.headers['content-length']) > 0 : req.headers['transfer-encoding'] !== undefined;
  let value: unknown;
  if (!hasBody && opts.optional) {
    value = {};
  } else {
    if (!isJsonContentType(req.headers['content-type'])) {
      throw new InvalidRequestError(`the body must be application/json, got ${req.headers['content-type'] ?? 'no content type'}`);
    }
    const raw = await readBody(req, opts.limitBytes);
    if (raw.length === 0 && opts.optional) {
      value = {};
    } else {
      try {
        value = JSON.parse(raw.toString('utf8'));
      } catch (err) {
        throw new InvalidRequestError(`the body is not JSON: ${(err as Error).message}`);
      }
    }
  }
  return validate(schema, value);
}

export function validate<T>(schema: ZodType<T>, value: unknown): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  throw new BadRequestError('the request has invalid fields', issuesToProblems(parsed.error.issues));
}

export function issuesToProblems(issues: readonly core.$ZodIssue[]): string[] {
  return issues.map((issue) => `${issue.path.length > 0 ? issue.path.join('.') : '(body)'}: ${issue.message}`);
}
