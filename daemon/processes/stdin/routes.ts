// The stdin route, and the reading of bodies that carry stdin data (stdin's data_b64, exec's
// stdin_b64): a body too large for its route is refused naming the stdin limit and its setting
// (BROWSERD_STDIN_LIMIT_BYTES), also when it is refused by its size before it is read.
import type { ZodType } from 'zod';
import { BadRequestError, BrowserdError, PayloadTooLargeError } from '../../core/errors.js';
import type { RequestContext, Route } from '../../http/router.js';
import { routesIn } from '../../http/route.js';
import type { ProcessRouteDeps } from '../routes.js';
import { PROCESS_BASE as P, stdinBody, stdinResult } from '../schemas.js';
import { STDIN_QUEUE_TOTAL_SETTING } from './stdin-budget.js';
import { STDIN_QUEUE_FACTOR } from './stdin-writer.js';
import { Base64Error, base64Length, decodeStrictBase64 } from '../../core/strict-base64.js';

const route = routesIn('daemon/processes/stdin/routes.ts');

const KiB = 1024;
const SETTING = 'BROWSERD_STDIN_LIMIT_BYTES';

/**
 * Reads a body carrying stdin data in `field`: at most the base64 of the stdin limit plus
 * `restBytes` for the other fields (stdin: 1 KiB; exec: BROWSERD_BODY_LIMIT_BYTES). Past it, 413
 * naming the stdin limit. `decoded`: the field's bytes when the reading already decoded them
 * (give it to decodeStdin).
 */
export async function readWithStdinLimit<T>(
  ctx: RequestContext,
  schema: ZodType<T>,
  stdinLimitBytes: number,
  rest: { bytes: number; setting?: string },
  field: string,
): Promise<{ body: T; decoded: Buffer | null }> {
  const restBytes = rest.bytes;
  const limit = base64Length(stdinLimitBytes) + restBytes;
  try {
    return await ctx.jsonBase64(schema, field, { limitBytes: limit });
  } catch (err) {
    if (!(err instanceof PayloadTooLargeError)) throw err;
    throw new BrowserdError(
      'payload_too_large',
      `${field} is over its limit of ${stdinLimitBytes} bytes (${SETTING}): the request body is over ${limit} bytes, the base64 of that ` +
        `limit plus ${restBytes} bytes${rest.setting === undefined ? '' : ` (${rest.setting})`} for the other fields`,
    );
  }
}

/**
 * Strict base64 within the stdin limit: 400 naming the field, or 413 naming the limit and its
 * setting. `decoded`: the decoding of `text` already made by readWithStdinLimit, if any.
 */
export function decodeStdin(field: string, text: string, stdinLimitBytes: number, decoded: Buffer | null = null): Buffer {
  let data: Buffer;
  try {
    data = decoded ?? decodeStrictBase64(text);
  } catch (err) {
    if (err instanceof Base64Error) throw BadRequestError.field(field, `not strict base64: ${err.message}`);
    throw err;
  }
  if (data.length > stdinLimitBytes) throw new PayloadTooLargeError(`${field} (${data.length} bytes decoded)`, stdinLimitBytes, SETTING);
  return data;
}

export function stdinRoutes(deps: ProcessRouteDeps): Route[] {
  const limit = deps.config.processes.stdinLimitBytes;
  return [
    route({
      method: 'POST',
      path: `${P}/{process_id}/stdin`,
      scope: 'processes:write',
      doc: () => ({
        summary: 'Write to the stdin of a spawned process; answered once the bytes are in the pipe (or terminal)',
        description:
          'Requests for one process are written one after another in the order accepted, each contiguous. The answer comes ' +
          'when every byte is in the kernel: in the pipe, or for a terminal (allocate_tty) in its input queue, where the line discipline takes over ' +
          '(echo, ^C as SIGINT to the foreground job, and in canonical mode the kernel cuts a line past 4095 bytes). A child that does not read within ' +
          'BROWSERD_STDIN_TIMEOUT_MS gets 504 timeout: the ' +
          'message says how many bytes of the request stay queued; they are not dropped and reach the child, in order, when it ' +
          'reads. 409 process_exited when the process has exited (also for bytes still queued when it exits), 409 stdin_closed ' +
          'after close: true or when the child closed its stdin (a terminal: close writes ^D and stdin stays open). A client that disconnects does not withdraw accepted bytes. ' +
          `The bytes queued for one process (accepted, not yet in the kernel) are limited to ${STDIN_QUEUE_FACTOR} × ` +
          `${SETTING} (429 limit_exceeded, inner_error stdin_queue_process), and the bytes queued over every process to ` +
          `${STDIN_QUEUE_TOTAL_SETTING} (429 limit_exceeded, inner_error stdin_queue_total): nothing of a refused request is queued, ` +
          `and a retry may succeed once the children read. data_b64 past ${SETTING} decoded ` +
          `(or a body past its base64 plus 1 KiB) is 413 naming ${SETTING}.`,
        body: stdinBody(),
        responses: { 200: { description: 'every byte is in the kernel', schema: stdinResult() } },
        errors: [409, 413, 429, 504],
      }),
      readsBody: true, // the base64 fast path (readWithStdinLimit)
      handler: async (ctx) => {
        const proc = deps.lookup(ctx);
        const { body, decoded } = await readWithStdinLimit(ctx, stdinBody(), limit, { bytes: KiB }, 'data_b64');
        const data = decodeStdin('data_b64', body.data_b64, limit, decoded);
        // Asked of the daemon's logger: ctx.log makes the request's child logger, which a line not written needs not.
        const debug = deps.log.isLevelEnabled('debug');
        const queuedBefore = debug ? proc.stdin.queuedBytes : 0;
        const writing = proc.writeStdin(data, body.close ?? false);
        if (debug) {
          ctx.log.debug(
            { event: 'stdin_queued', child_pid: proc.pid, process_id: proc.id, bytes: data.length, close: body.close ?? false, queued_before: queuedBefore },
            'stdin request queued',
          );
        }
        const written = await writing;
        return { status: 200, body: { written_bytes: written } };
      },
    }),
  ];
}
