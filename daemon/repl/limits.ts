// The REPL's limits, named in its errors and in docs/repl.md.

/** Text one call answers with, all channels together; the rest is cut (content_truncated: true). */
export const REPL_TEXT_LIMIT_BYTES = 256 * 1024;
/** Images one call answers with, together (decoded bytes); repl.emitImage past it throws. */
export const REPL_IMAGE_LIMIT_BYTES = 8 * 1024 * 1024;
/** A call's answer line from the worker, at most (text and images in base64, with room). */
export const REPL_ANSWER_LIMIT_BYTES = 16 * 1024 * 1024;
/** The worker's V8 heap (--max-old-space-size): past it the worker dies and the call answers repl_terminated. */
export const REPL_MAX_HEAP_MB = 512;
export const REPL_DEFAULT_TIMEOUT_SEC = 60;
export const REPL_MAX_TIMEOUT_SEC = 300;
