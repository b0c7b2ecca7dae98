// The one table from error codes to HTTP: the status, whether a retry is safe (x-should-retry),
// Retry-After, and the headers some codes carry. Domain code throws core/errors.ts classes with
// codes; only this file knows their statuses.
import { BrowserdError, RangeNotSatisfiableError, toBrowserdError, type ErrorCode } from '../core/errors.js';

interface CodeFacts {
  status: number;
  /** A retry of the same request may succeed and does no work twice. */
  retry: boolean;
}

const HTTP_BY_CODE: Readonly<Record<ErrorCode, CodeFacts>> = {
  invalid_request: { status: 400, retry: false },
  bad_request: { status: 400, retry: false },
  unauthorized: { status: 401, retry: false },
  forbidden: { status: 403, retry: false },
  path_forbidden: { status: 403, retry: false },
  not_found: { status: 404, retry: false },
  method_not_allowed: { status: 405, retry: false },
  process_exited: { status: 409, retry: false },
  stdin_closed: { status: 409, retry: false },
  busy: { status: 409, retry: true },
  proxy_in_use: { status: 409, retry: false },
  not_a_tty: { status: 409, retry: false },
  not_a_directory: { status: 409, retry: false },
  is_a_directory: { status: 409, retry: false },
  already_exists: { status: 409, retry: false },
  directory_not_empty: { status: 409, retry: false },
  no_page: { status: 409, retry: false },
  executor_limit: { status: 409, retry: false },
  clipboard_unavailable: { status: 409, retry: false },
  replay_stopped: { status: 409, retry: false },
  payload_too_large: { status: 413, retry: false },
  range_not_satisfiable: { status: 416, retry: false },
  proxy_check_failed: { status: 422, retry: false },
  extension_rejected: { status: 422, retry: false },
  activation_failed: { status: 422, retry: false },
  archive_rejected: { status: 422, retry: false },
  unsupported_field: { status: 422, retry: false },
  setting_refused: { status: 422, retry: false },
  idempotency_key_reused: { status: 422, retry: false },
  fetch_failed: { status: 422, retry: false },
  limit_exceeded: { status: 429, retry: true },
  internal_error: { status: 500, retry: false },
  browser_unavailable: { status: 503, retry: true },
  dependency_missing: { status: 503, retry: false },
  timeout: { status: 504, retry: false },
  no_space: { status: 507, retry: false },
};

/** A known path asked with another method: HTTP's own error, so it lives here. */
export class MethodNotAllowedError extends BrowserdError {
  constructor(
    method: string,
    readonly allowed: string[],
  ) {
    super('method_not_allowed', `${method} is not allowed here; allowed: ${allowed.join(', ')}`);
  }
}

export interface HttpError {
  status: number;
  headers: Record<string, string>;
  body: ReturnType<BrowserdError['toBody']>;
  /** The error as thrown was not a BrowserdError (a bug: log its stack). */
  unexpected: boolean;
}

/** Status, headers and body of any thrown value. */
export function toHttpError(err: unknown): HttpError {
  const e = toBrowserdError(err);
  const facts = HTTP_BY_CODE[e.code];
  const retry = e.retryable ?? facts.retry;
  const headers: Record<string, string> = { 'x-should-retry': String(retry) };
  if (retry) {
    const ms = Math.max(0, Math.round(e.retryAfterMs ?? 1000));
    headers['retry-after'] = String(Math.max(1, Math.ceil(ms / 1000)));
    headers['retry-after-ms'] = String(ms);
  }
  if (e.code === 'unauthorized') headers['www-authenticate'] = 'Bearer';
  if (e instanceof MethodNotAllowedError) headers.allow = e.allowed.join(', ');
  if (e instanceof RangeNotSatisfiableError) headers['content-range'] = `bytes */${e.size}`;
  return { status: facts.status, headers, body: e.toBody(), unexpected: !(err instanceof BrowserdError) };
}

/** The statuses of these codes, for OpenAPI texts. */
export function statusOf(code: ErrorCode): number {
  return HTTP_BY_CODE[code].status;
}
