// The replays routes: the SDK's four (start, list, stop, download) and delete and markers.
import type { IncomingMessage } from 'node:http';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import { z } from 'zod';
import { lazy } from '../core/lazy.js';
import type { Config } from '../core/config.js';
import { NotFoundError } from '../core/errors.js';
import type { Route } from '../http/router.js';
import { routesIn } from '../http/route.js';
import type { ReplayRecord, StartParams } from './index.js';
import type { Marker } from './recording.js';

const route = routesIn('daemon/replays/routes.ts');

export interface RouteDeps {
  limits: Config['replays'];
  start(params: StartParams, viewUrl: (id: string) => string): Promise<ReplayRecord>;
  /** The base URL of the links handed out (http/base-url.ts: BROWSERD_BASE_URL, else the request's Host). */
  baseUrl(req: IncomingMessage): string;
  list(): ReplayRecord[];
  get(id: string): ReplayRecord;
  stop(id: string): Promise<ReplayRecord>;
  remove(id: string): Promise<void>;
  mark(id: string, label: string): Promise<Marker>;
  videoFile(id: string): string;
}

const P = '/browsers/{id}/replays';
const marker = lazy(() => z.object({ label: z.string(), at_ms: z.number().int().describe('milliseconds since the start of the recording') }));
const record = lazy(() => z.object({
  replay_id: z.string(),
  started_at: z.string().describe('ISO time'),
  finished_at: z.string().nullable().describe('ISO time; null while recording'),
  replay_view_url: z.string().describe('where the video is downloaded (GET of this route)'),
  state: z.enum(['recording', 'stopped', 'failed']),
  stop_reason: z.enum(['requested', 'max_duration', 'size_limit', 'disk_space', 'shutdown', 'ffmpeg_exited', 'recovered']).nullable(),
  framerate: z.number().int(),
  max_duration_in_seconds: z.number().int(),
  width: z.number().int().describe('of the video: the first frame\u2019s, made even'),
  height: z.number().int(),
  size_bytes: z.number().int(),
  duration_ms: z.number().int(),
  markers: z.array(marker()),
  error: z.string().nullable(),
}));

export function replayRoutes(deps: RouteDeps): Route[] {
  const c = deps.limits;
  const startBody = lazy(() => z.strictObject({
    framerate: z.number({ error: 'must be a number' }).int('must be a whole number').min(1, 'must be at least 1').max(c.maxFramerate, `must be at most ${c.maxFramerate} (BROWSERD_REPLAY_MAX_FRAMERATE)`).optional(),
    max_duration_in_seconds: z.number({ error: 'must be a number' }).int('must be a whole number').min(1, 'must be at least 1').optional(),
    record_audio: z.boolean({ error: 'must be a boolean' }).optional(),
  }));
  const markerBody = lazy(() => z.strictObject({
    // One line of text: a control character (NUL, CR, LF, ...) would cut or forge a chapter of the MP4's metadata (recording.ts escapes = ; # \\ and newline by ffmetadata's grammar).
    label: z.string({ error: 'must be a string' }).min(1, 'must not be empty').max(200, 'must be at most 200 characters').regex(/^\P{Cc}*$/u, 'must not hold control characters (NUL, CR, LF, tab, ...)'),
  }));
  const limitsText =
    `Limits: ${c.maxActive} recordings at once (BROWSERD_REPLAY_MAX_ACTIVE; 429 past it), ${c.maxDurationSec} s each (BROWSERD_REPLAY_MAX_DURATION_SEC), ` +
    `${c.maxBytes} bytes each (BROWSERD_REPLAY_MAX_BYTES), framerate 1–${c.maxFramerate} (default ${c.defaultFramerate}), ${c.maxKept} kept ` +
    `(BROWSERD_REPLAY_MAX_KEPT; the oldest finished ones are deleted past it); a recording stops by itself, finalized, at its duration or size ` +
    `limit or when the file system has less than ${c.minFreeBytes} bytes free (BROWSERD_REPLAY_MIN_FREE_BYTES), and says why in stop_reason.`;
  return [
    route({
      method: 'POST',
      path: P,
      scope: 'replays:write',
      doc: () => ({
        summary: 'Start recording what the browser shows',
        description:
          'Records the page a person would see (the one the computer controls act on; a tab switch shows in the video) from Chromium\u2019s ' +
          'screencast, at most framerate frames a second, each lasting until the next (a frame that does not change is not repeated, ' +
          'and while Chromium restarts the last one lasts: a restart is a gap in the video, not its end; video time is wall time), into H.264 MP4 (yuv420p, the size of the first frame made even). Several recordings may run at once; ' +
          'they share one screencast. record_audio: true is 422 unsupported_field (no audio source). A browser that is not ready, or a page ' +
          'that sends no frame within 10 s, is 503 browser_unavailable; ffmpeg missing is 503 dependency_missing. ' + limitsText,
        body: startBody(),
        bodyRequired: false,
        responses: { 201: { description: 'recording', schema: record() } },
      }),
      handler: async (ctx) => {
        const body = ctx.body ?? {};
        const base = deps.baseUrl(ctx.req);
        const r = await deps.start(body, (id) => `${base}/browsers/${encodeURIComponent(ctx.params.id)}/replays/${id}`);
        return { status: 201, body: r };
      },
    }),
    route({
      method: 'GET',
      path: P,
      scope: 'replays:read',
      doc: () => ({ summary: 'List the recordings', description: 'Every recording kept, oldest first, recording or finished. ' + limitsText, responses: { 200: { description: 'the recordings', schema: z.array(record()) } } }),
      handler: () => Promise.resolve({ status: 200, body: deps.list() }),
    }),
    route({
      method: 'GET',
      path: `${P}/{replay_id}`,
      scope: 'replays:read',
      doc: () => ({
        summary: 'Download a recording (video/mp4)',
        description:
          'The finished video, with +faststart (its index first) and the markers as MP4 chapters. While it still records: 202 with Retry-After ' +
          'and the record as JSON (stop it first, or wait). A recording that failed without a frame is 404.',
        responses: { 200: { description: 'the video', mediaType: 'video/mp4', schema: { type: 'string', format: 'binary' } }, 202: { description: 'still recording', schema: record() } },
      }),
      handler: async (ctx) => {
        const id = ctx.params.replay_id;
        const r = deps.get(id);
        if (r.state === 'recording') return { status: 202, body: r, headers: { 'retry-after': '1' } };
        const file = deps.videoFile(id);
        const st = await stat(file).catch(() => null);
        if (st === null || !st.isFile()) throw new NotFoundError(`replay ${id} has no video${r.error === null ? '' : `: ${r.error}`}`);
        ctx.res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': String(st.size), 'content-disposition': `attachment; filename="${id}.mp4"` });
        if (ctx.req.method === 'HEAD') {
          ctx.res.end();
          return null;
        }
        await pipeline(createReadStream(file), ctx.res).catch(() => ctx.res.destroy());
        return null;
      },
    }),
    route({
      method: 'POST',
      path: `${P}/{replay_id}/stop`,
      scope: 'replays:write',
      doc: () => ({ summary: 'Stop a recording', description: 'Answers once the video is finalized (ffmpeg ended, +faststart, chapters). A finished recording: its record, nothing changes.', responses: { 200: { description: 'the record', schema: record() } } }),
      handler: async (ctx) => ({ status: 200, body: await deps.stop(ctx.params.replay_id) }),
    }),
    route({
      method: 'DELETE',
      path: `${P}/{replay_id}`,
      scope: 'replays:write',
      doc: () => ({ summary: 'Delete a recording', description: 'A recording still running is stopped first; its video and record are removed.', responses: { 204: { description: 'deleted' } } }),
      handler: async (ctx) => {
        await deps.remove(ctx.params.replay_id);
        return { status: 204 };
      },
    }),
    route({
      method: 'POST',
      path: `${P}/{replay_id}/markers`,
      scope: 'replays:write',
      doc: () => ({
        summary: 'Mark a moment of a recording',
        description: 'A labelled time in the recording (now), kept in its record and written as an MP4 chapter when it is finalized. A recording that is not recording: 409 replay_stopped.',
        body: markerBody(),
        responses: { 201: { description: 'the marker', schema: marker() } },
      }),
      handler: async (ctx) => {
        const body = ctx.body;
        return { status: 201, body: await deps.mark(ctx.params.replay_id, body.label) };
      },
    }),
  ];
}
