// The errors every module throws, in the manner of undici's lib/core/errors.js: classes with a
// stable `code` and nothing of HTTP. http/errors.ts maps each code to its status, its retry advice
// and its headers in one table; domain code never names a status.

export interface ErrorDetail {
  code: string;
  message: string;
}

interface InnerError {
  code: string;
  message: string;
}

interface ErrorBody {
  code: string;
  message: string;
  details?: ErrorDetail[];
  inner_error?: InnerError;
}

/** Every code an answer can carry; http/errors.ts gives each its status. */
export const ERROR_CODES = [
  'invalid_request',
  'bad_request',
  'unauthorized',
  'forbidden',
  'path_forbidden',
  'not_found',
  'method_not_allowed',
  'process_exited',
  'stdin_closed',
  'busy',
  'proxy_in_use',
  'not_a_tty',
  'not_a_directory',
  'is_a_directory',
  'already_exists',
  'directory_not_empty',
  'no_page',
  'executor_limit',
  'clipboard_unavailable',
  'replay_stopped',
  'payload_too_large',
  'range_not_satisfiable',
  'proxy_check_failed',
  'extension_rejected',
  'activation_failed',
  'archive_rejected',
  'unsupported_field',
  'setting_refused',
  'idempotency_key_reused',
  'fetch_failed',
  'limit_exceeded',
  'internal_error',
  'browser_unavailable',
  'dependency_missing',
  'timeout',
  'no_space',
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

interface ErrorOptions {
  details?: ErrorDetail[];
  inner?: InnerError;
  cause?: unknown;
  /** Whether the same request may succeed later (overrides the code's default). */
  retryable?: boolean;
  /** When a retry makes sense, in ms (Retry-After). */
  retryAfterMs?: number;
}

export class BrowserdError extends Error {
  readonly code: ErrorCode;
  readonly details: ErrorDetail[] | undefined;
  readonly inner: InnerError | undefined;
  readonly retryable: boolean | undefined;
  readonly retryAfterMs: number | undefined;

  constructor(code: ErrorCode, message: string, opts: ErrorOptions = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = new.target.name;
    this.code = code;
    this.details = opts.details;
    this.inner = opts.inner;
    this.retryable = opts.retryable;
    this.retryAfterMs = opts.retryAfterMs;
  }

  toBody(): ErrorBody {
    const body: ErrorBody = { code: this.code, message: this.message };
    if (this.details && this.details.length > 0) body.details = this.details;
    if (this.inner) body.inner_error = this.inner;
    return body;
  }
}

/** The body is not JSON, has the wrong content type, or multipart cannot be parsed. */
export class InvalidRequestError extends BrowserdError {
  constructor(message: string) {
    super('invalid_request', message);
  }
}

/**
 * Fields fail validation; one detail per problem, each `<field>: <why>`. The message stands alone:
 * it is the first problem (and how many more there are), so a client that shows only the message
 * still shows the cause.
 */
export class BadRequestError extends BrowserdError {
  constructor(problems: string[], message?: string) {
    const first = problems[0] ?? 'the request is invalid';
    const more = problems.length > 1 ? ` (and ${problems.length - 1} more problem${problems.length > 2 ? 's' : ''} in details)` : '';
    super('bad_request', message ?? `${first}${more}`, { details: problems.map((p) => ({ code: 'invalid_input', message: p })) });
  }

  /** One field, one problem: `BadRequestError.field('data_b64', 'is not strict base64')`. */
  static field(field: string, why: string): BadRequestError {
    return new BadRequestError([`${field}: ${why}`]);
  }
}

export class UnauthorizedError extends BrowserdError {
  constructor(message = 'a valid bearer token is required') {
    super('unauthorized', message);
  }
}

export class ForbiddenError extends BrowserdError {
  constructor(scope: string) {
    super('forbidden', `this token lacks the scope ${scope}`, { details: [{ code: 'missing_scope', message: scope }] });
  }
}

/**
 * A path the files API never touches; `rule` (inner_error.code) names why: `state_dir`,
 * `special_filesystem`, `protected_file`, `permission_denied` (the kernel refused), `read_only`.
 */
export class PathForbiddenError extends BrowserdError {
  constructor(rule: string, message: string) {
    super('path_forbidden', message, { inner: { code: rule, message } });
  }
}

export class NotFoundError extends BrowserdError {
  constructor(message = 'not found') {
    super('not_found', message);
  }
}

export type ConflictCode = 'process_exited' | 'stdin_closed' | 'busy' | 'proxy_in_use' | 'not_a_tty' | 'not_a_directory' | 'is_a_directory' | 'already_exists' | 'directory_not_empty' | 'no_page' | 'executor_limit' | 'clipboard_unavailable' | 'replay_stopped';

/** The resource is in a state that does not allow the operation; `busy` may be retried. */
export class ConflictError extends BrowserdError {
  constructor(code: ConflictCode, message: string, opts: ErrorOptions = {}) {
    super(code, message, opts);
  }
}

export class PayloadTooLargeError extends BrowserdError {
  constructor(what: string, limitBytes: number, setting?: string) {
    super('payload_too_large', `${what} is over its limit of ${limitBytes} bytes${setting === undefined ? '' : ` (${setting})`}`);
  }
}

/** A `Range` that starts past the end of the file; `size` is the file's (Content-Range: bytes *\/size). */
export class RangeNotSatisfiableError extends BrowserdError {
  constructor(readonly size: number) {
    super('range_not_satisfiable', `the range starts past the end of the file (${size} bytes)`);
  }
}

/** The file system is full (ENOSPC, EDQUOT). */
export class NoSpaceError extends BrowserdError {
  constructor(what: string) {
    super('no_space', `no space left on the file system for ${what}`);
  }
}

export type FailureCode = 'proxy_check_failed' | 'extension_rejected' | 'activation_failed' | 'archive_rejected' | 'unsupported_field' | 'setting_refused' | 'idempotency_key_reused' | 'fetch_failed';

/** The request was valid but the operation failed (or cannot be done); `inner` carries the cause. */
export class OperationFailedError extends BrowserdError {
  constructor(code: FailureCode, message: string, inner?: InnerError, details?: ErrorDetail[]) {
    super(code, message, { inner, details });
  }
}

/** A field the request may carry (the SDK declares it) that this daemon cannot honour. */
export class UnsupportedFieldError extends OperationFailedError {
  constructor(field: string, why: string) {
    super('unsupported_field', `${field}: ${why}`, { code: field, message: why });
  }
}

/**
 * Browser settings that cannot be applied: `refused` ones the daemon relies on (a policy, a flag),
 * `invalid` ones that fail validation, `missing` references to what does not exist (configure's
 * extension or profile). Any invalid one makes it a 400 bad_request, else a 422 setting_refused;
 * `details` lists every problem either way (`invalid_input` / `refused` / `not_found`). Not
 * retryable: the same request fails the same way.
 */
export function settingsError(invalid: string[], refused: string[], missing: string[] = []): BrowserdError {
  const details = [
    ...invalid.map((m) => ({ code: 'invalid_input', message: m })),
    ...refused.map((m) => ({ code: 'refused', message: m })),
    ...missing.map((m) => ({ code: 'not_found', message: m })),
  ];
  const all = [...invalid, ...refused, ...missing];
  const message = `${all[0] ?? 'invalid settings'}${all.length > 1 ? ` (and ${all.length - 1} more problem${all.length > 2 ? 's' : ''})` : ''}`;
  if (invalid.length > 0) return new BrowserdError('bad_request', message, { details });
  return new OperationFailedError('setting_refused', message, undefined, details);
}

export class LimitExceededError extends BrowserdError {
  /** `retryable: false` when waiting cannot help (a tree larger than a limit, not a count of things at once). */
  /** `inner`: which limit, when a resource has more than one (`stdin_queue_total`, `stdin_queue_process`). */
  constructor(what: string, limit: number, opts: { message?: string; retryAfterMs?: number; retryable?: boolean; inner?: InnerError } = {}) {
    super('limit_exceeded', opts.message ?? `too many ${what} at once (limit ${limit})`, { retryAfterMs: opts.retryAfterMs ?? 1000, retryable: opts.retryable, inner: opts.inner });
  }
}

export class InternalError extends BrowserdError {
  constructor() {
    super('internal_error', 'internal error; the daemon log has the details under this request id');
  }
}

/** Chromium is not ready; `retryable: false` when it will not become ready without an operator (failed). */
export class BrowserUnavailableError extends BrowserdError {
  constructor(message = 'Chromium is not ready', opts: { inner?: InnerError; retryable?: boolean; retryAfterMs?: number } = {}) {
    super('browser_unavailable', message, { inner: opts.inner, retryable: opts.retryable, retryAfterMs: opts.retryAfterMs ?? 1000 });
  }
}

/** A program the operation needs is not installed on this VM (ffmpeg for recordings); retrying cannot help. */
export class DependencyMissingError extends BrowserdError {
  constructor(what: string, message: string) {
    super('dependency_missing', message, { inner: { code: what, message } });
  }
}

export class TimeoutError extends BrowserdError {
  constructor(message: string) {
    super('timeout', message);
  }
}

/** Any thrown value as a BrowserdError; anything unknown becomes internal_error, which says nothing internal. */
export function toBrowserdError(err: unknown): BrowserdError {
  return err instanceof BrowserdError ? err : new InternalError();
}
