// The output stream route: Server-Sent Events of a process's output (sse.ts), with the replay and
// resumption rules.
import { BadRequestError } from '../../core/errors.js';
import { SSE_HEARTBEAT_MS } from '../../core/streams/sse.js';
import type { Route } from '../../http/router.js';
import { routesIn } from '../../http/route.js';
import type { ProcessRouteDeps } from '../routes.js';
import { PROCESS_BASE as P } from '../schemas.js';
import { streamOutput } from './sse.js';

const route = routesIn('daemon/processes/output/routes.ts');

export function outputRoutes(deps: ProcessRouteDeps): Route[] {
  return [
    route({
      method: 'GET',
      path: `${P}/{process_id}/stdout/stream`,
      scope: 'browser:read',
      doc: () => ({
        summary: 'Server-Sent Events: the output of a process since its start (replay), then live, then its exit',
        description:
          'Each chunk of stdout or stderr, in the order received across both: `id: <offset>` and ' +
          '`data: {"stream":"stdout"|"stderr","data_b64":"..."}`, where the id is the byte offset just past the chunk. ' +
          'A process on a terminal (allocate_tty) has one stream: everything it prints comes as stdout (the terminal merges stdout and stderr, ' +
          'echoes input and ends lines with CR LF). ' +
          'A reader that falls behind the replay buffer (BROWSERD_OUTPUT_BUFFER_BYTES) gets `event: lost` with `data: {"event":"lost","bytes": N}` and ' +
          'continues at the oldest byte kept; a slow reader never slows the process or other readers. A write holds at most 256 KiB of text; a reader that takes ' +
          'none of it for BROWSERD_SSE_STALL_MS (30 s by default) gets `event: dropped` with `data: {"event":"dropped","reason","resume_offset"}` (resume with that as Last-Event-ID) and is dropped. The last event is ' +
          '`event: exit` with `data: {"event":"exit","exit_code","signal"}` (exit_code null when a signal ended the process), then the response ends. ' +
          'The event name is in the data JSON as well because SSE clients such as the official SDK yield only the data. ' +
          'A client may resume with the `Last-Event-ID` header ' +
          `(an offset). Idle streams get a comment line every ${SSE_HEARTBEAT_MS / 1000} s. Several readers may read at once.`,
        responses: { 200: { description: 'the event stream', mediaType: 'text/event-stream', schema: { type: 'string' } } },
        errors: [400],
      }),
      handler: async (ctx) => {
        const proc = deps.lookup(ctx);
        const from = parseLastEventId(ctx.req.headers['last-event-id'], proc.output.endOffset);
        await streamOutput(ctx.res, proc.output, { from, signal: ctx.signal, stallMs: deps.config.http.sseStallMs, onDrop: () => deps.metrics.sseDropped.inc({ stream: 'process_output' }) });
        return null;
      },
    }),
  ];
}

/** The offset to resume at from `Last-Event-ID` (0 without it); 400 when it is not an offset of this output. */
function parseLastEventId(header: string | string[] | undefined, end: number): number {
  if (header === undefined) return 0;
  const raw = Array.isArray(header) ? header[0] : header;
  if (raw === undefined || raw === '') return 0;
  if (!/^\d{1,15}$/.test(raw) || Number(raw) > end) {
    throw BadRequestError.field('Last-Event-ID', `must be an output offset from an earlier event of this stream (0-${end}), got "${raw.slice(0, 40)}"`);
  }
  return Number(raw);
}
