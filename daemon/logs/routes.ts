// GET /browsers/{id}/logs/stream: the daemon's own log, Chromium's output, or a file, as
// Server-Sent Events of the SDK's LogEvent.
import { z } from 'zod';
import { lazy } from '../core/lazy.js';
import { BadRequestError, BrowserdError, NotFoundError } from '../core/errors.js';
import { Slots } from '../core/slots.js';
import type { Metrics } from '../core/metrics.js';
import { SSE_HEARTBEAT_MS } from '../core/streams/sse.js';
import { qBool, qString } from '../http/query.js';
import type { Route } from '../http/router.js';
import { routesIn } from '../http/route.js';
import { FILE_POLL_MS, FileTail } from './file-tail.js';
import type { ResolveReadable } from './index.js';
import { MAX_LINE_CHARS, type LogRing } from './ring.js';
import { RingSource, type LogSource } from './source.js';
import { streamLogs } from './sse.js';

const route = routesIn('daemon/logs/routes.ts');

const SUPERVISOR_PROCESSES = ['browserd', 'chromium'] as const;

const streamQuery = lazy(() => z.strictObject({
  source: z
    .enum(['path', 'supervisor'], { error: (iss) => (iss.input === undefined ? 'is required (path or supervisor)' : 'must be path or supervisor') })
    .meta({ description: '`supervisor`: a process the daemon supervises (supervisor_process); `path`: a file (path)' }),
  follow: qBool('true (default): stay open and send new lines as they come; false: end after what is there now'),
  path: qString('With source=path: the absolute path of the file (the rules of the filesystem API; never the state directory, /proc, /sys or /dev)'),
  supervisor_process: qString('With source=supervisor: `browserd` (the daemon\'s own log lines) or `chromium` (every line Chromium writes to stdout and stderr)', 64),
}));

export interface RouteDeps {
  rings: Record<(typeof SUPERVISOR_PROCESSES)[number], LogRing>;
  resolveReadable: ResolveReadable;
  metrics: Metrics;
  maxStreams: number;
  fileBacklogBytes: number;
  daemonLines: number;
  chromiumLines: number;
  /** BROWSERD_SSE_STALL_MS: a reader that takes none of a write for this long is dropped. */
  stallMs: number;
}

export function logRoutes(deps: RouteDeps): Route[] {
  const { rings, resolveReadable, metrics, maxStreams } = deps;
  const streams = new Slots({ what: 'log streams', max: maxStreams, message: `${maxStreams} log streams are open already (BROWSERD_LOG_MAX_STREAMS)` });

  const openSource = async (q: z.infer<ReturnType<typeof streamQuery>>): Promise<{ source: LogSource; label: string }> => {
    const follow = q.follow ?? true;
    if (q.source === 'supervisor') {
      if (q.path !== undefined) throw BadRequestError.field('path', 'is only for source=path');
      const name = q.supervisor_process;
      if (name === undefined) throw BadRequestError.field('supervisor_process', `is required with source=supervisor (${SUPERVISOR_PROCESSES.join(' or ')})`);
      if (!(SUPERVISOR_PROCESSES as readonly string[]).includes(name)) throw BadRequestError.field('supervisor_process', `must be ${SUPERVISOR_PROCESSES.join(' or ')}, got "${name.slice(0, 64)}"`);
      return { source: new RingSource(rings[name as (typeof SUPERVISOR_PROCESSES)[number]], follow), label: name };
    }
    if (q.supervisor_process !== undefined) throw BadRequestError.field('supervisor_process', 'is only for source=supervisor');
    const file = q.path;
    if (file === undefined || file === '') throw BadRequestError.field('path', 'is required with source=path');
    const real = await resolveReadable(file);
    try {
      const source = await FileTail.open(real, { follow, backlogBytes: deps.fileBacklogBytes, resolve: () => resolveReadable(file) });
      return { source, label: 'path' };
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EACCES' || code === 'EPERM') throw new BrowserdError('path_forbidden', `${file}: permission denied (the daemon cannot read it)`);
      if (code === 'ENOENT') throw new NotFoundError(`no file at ${file}`);
      throw err;
    }
  };

  return [
    route({
      method: 'GET',
      path: '/browsers/{id}/logs/stream',
      scope: 'logs:read',
      doc: () => ({
        summary: 'Server-Sent Events: the daemon\'s log, Chromium\'s output, or a file, line by line',
        description:
          'Each line is `data: {"event":"log","message":"…","timestamp":"…"}` (the SDK\'s LogEvent; the default SSE event type). ' +
          '`source=supervisor&supervisor_process=browserd`: the daemon\'s own JSON log lines as written to stdout (at BROWSERD_LOG_LEVEL; each message is one JSON line), ' +
          `from a ring of the last BROWSERD_LOG_DAEMON_LINES (${deps.daemonLines} here); \`supervisor_process=chromium\`: every line Chromium writes to stdout or stderr, ` +
          `whatever the log level, from a ring of the last BROWSERD_LOG_CHROMIUM_LINES (${deps.chromiumLines} here), timestamped when the daemon read them. ` +
          'A new reader first gets the lines the ring holds, then new ones. A reader that reads more slowly than lines come and falls behind the ring gets ' +
          '`event: lost` with `{"event":"lost","count":N,"timestamp"}` and goes on at the oldest line kept. ' +
          '`source=path&path=/abs/file`: a file, under the path rules of the filesystem API (real path, symlinks resolved; never the daemon\'s state ' +
          'directory, /proc, /sys or /dev: 403 path_forbidden; missing: 404; a directory: 409 is_a_directory). It starts at the last ' +
          `BROWSERD_LOG_FILE_BACKLOG_BYTES (${deps.fileBacklogBytes} here) of the file, at a line start, and is read at the reader's pace (nothing lost). ` +
          `Followed files are watched (inotify, and a check every ${FILE_POLL_MS / 1000} s): a file truncated below what was read is read again from its start; ` +
          'a file rotated or replaced (the path names another file) is read to its end, then the path is checked again and the new file read from its start ' +
          '(a path that became forbidden ends the stream; one that names no file yet is waited for). A last line without a newline is sent when the stream ' +
          'ends or the file is rotated, not while following. ' +
          `Lines longer than ${MAX_LINE_CHARS} characters are cut (rings: marked "…") or split (files). ` +
          '`follow=false` ends the response after what is there when the stream opens (the ring\'s lines; a file up to its size then). ' +
          `Idle streams get a comment line every ${SSE_HEARTBEAT_MS / 1000} s. At most BROWSERD_LOG_MAX_STREAMS streams at once (${deps.maxStreams} here; 429 past it). ` +
          'Parameters of the other source are refused (400).',
        query: streamQuery(),
        responses: { 200: { description: 'the event stream', mediaType: 'text/event-stream', schema: { type: 'string' } } },
        errors: [400, 409, 429],
      }),
      handler: async (ctx) => {
        const q = ctx.query;
        await streams.run(async () => {
          const opened = await openSource(q);
          metrics.logStreams.inc({ source: opened.label });
          try {
            await streamLogs(ctx.res, opened.source, { signal: ctx.signal, stallMs: deps.stallMs, onDrop: () => metrics.sseDropped.inc({ stream: 'logs' }) });
          } finally {
            metrics.logStreams.dec({ source: opened.label });
          }
        });
        return null;
      },
    }),
  ];
}
