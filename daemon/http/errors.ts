// The one error shape of the contract, as classes with stable codes (in the manner of undici).
// Every module throws these; the server turns them into
// {"code","message","details"?,"inner_error"?} with the status they carry.

export interface ErrorDetail {
  code: string;
  message: string;
}

export interface InnerError {
  code: string;
  message: string;
}

export interface ErrorBody {
  code: string;
  message: string;
  details?: ErrorDetail[];
  inner_error?: InnerError;
}

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details: ErrorDetail[] | undefined;
  readonly inner: InnerError | undefined;
  /** Extra response headers (for example `allow` on a 405). */
  readonly headers: Record<string, string>;

  constructor(
    status: number,
    code: string,
    message: string,
    opts: { details?: ErrorDetail[]; inner?: InnerError; headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = new.target.name;
    this.status = status;
    this.code = code;
    this.details = opts.details;
    this.inner = opts.inner;
    this.headers = opts.headers ?? {};
  }

  toBody(): ErrorBody {
    const body: ErrorBody = { code: this.code, message: this.message };
    if (this.details && this.details.length > 0) body.details = this.details;
    if (this.inner) body.inner_error = this.inner;
    return body;
  }
}

/** 400: the body is not JSON, has the wrong content type, or multipart cannot be parsed. */
export class InvalidRequestError extends ApiError {
  constructor(message: string) {
    super(400, 'invalid_request', message);
  }
}

/** 400: fields fail validation; one detail per problem, each `<field>: <why>`. */
export class BadRequestError extends ApiError {
  constructor(message: string, problems: string[]) {
    super(400, 'bad_request', message, {
      details: problems.map((p) => ({ code: 'invalid_input', message: p })),
    });
  }

  /** One field, one problem: `badField('data_b64', 'is not strict base64')`. */
  static field(field: string, why: string): BadRequestError {
    return new BadRequestError(`${field}: ${why}`, [`${field}: ${why}`]);
  }
}

export class UnauthorizedError extends ApiError {
  constructor(message = 'a valid bearer token is required') {
    super(401, 'unauthorized', message, { headers: { 'www-authenticate': 'Bearer' } });
  }
}

export class ForbiddenError extends ApiError {
  constructor(scope: string) {
    super(403, 'forbidden', `this token lacks the scope ${scope}`, {
      details: [{ code: 'missing_scope', message: scope }],
    });
  }
}

export class NotFoundError extends ApiError {
  constructor(message = 'not found') {
    super(404, 'not_found', message);
  }
}

export class MethodNotAllowedError extends ApiError {
  constructor(method: string, allowed: string[]) {
    super(405, 'method_not_allowed', `${method} is not allowed here; allowed: ${allowed.join(', ')}`, {
      headers: { allow: allowed.join(', ') },
    });
  }
}

/** 409: `process_exited`, `stdin_closed` or `busy`. */
export class ConflictError extends ApiError {
  constructor(code: 'process_exited' | 'stdin_closed' | 'busy', message: string) {
    super(409, code, message);
  }
}

export class PayloadTooLargeError extends ApiError {
  constructor(what: string, limitBytes: number) {
    super(413, 'payload_too_large', `${what} is over its limit of ${limitBytes} bytes`);
  }
}

/** 422: the request was valid but the operation failed; `inner` carries the cause. */
export class OperationFailedError extends ApiError {
  constructor(
    code: 'proxy_check_failed' | 'extension_rejected' | 'activation_failed',
    message: string,
    inner?: InnerError,
    details?: ErrorDetail[],
  ) {
    super(422, code, message, { inner, details });
  }
}

export class LimitExceededError extends ApiError {
  constructor(what: string, limit: number) {
    super(429, 'limit_exceeded', `too many ${what} at once (limit ${limit})`);
  }
}

export class InternalError extends ApiError {
  constructor() {
    super(500, 'internal_error', 'internal error; the daemon log has the details under this request id');
  }
}

export class BrowserUnavailableError extends ApiError {
  constructor(message = 'Chromium is not ready', inner?: InnerError) {
    super(503, 'browser_unavailable', message, { inner });
  }
}

export class TimeoutError extends ApiError {
  constructor(message: string) {
    super(504, 'timeout', message);
  }
}

/** Any thrown value as an ApiError; anything unknown becomes a 500 that says nothing internal. */
export function toApiError(err: unknown): ApiError {
  return err instanceof ApiError ? err : new InternalError();
}
