// The replays module: recordings of what the browser shows (the SDK's `browsers.replays`: start,
// list, stop, download; plus delete and markers), kept on the daemon's side in <state>/replays,
// where agents' commands cannot write. Each recording has a metadata file (<id>.json, written
// atomically at every change of state) beside its video: <id>.part.mp4 (fragmented) while it
// records, <id>.mp4 once finalized. A daemon killed while recording leaves the .part.mp4 and a
// `recording` record: the next start finalizes it and lists it as stopped (`stop_reason:
// recovered`). SIGTERM stops and finalizes every recording before the daemon exits.
import { randomUUID } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { Deadline } from '../core/deadline.js';
import { BadRequestError, BrowserUnavailableError, ConflictError, DependencyMissingError, LimitExceededError, NotFoundError, UnsupportedFieldError } from '../core/errors.js';
import { writeFileAtomic } from '../core/fs-atomic.js';
import type { Module, ModuleContext } from '../module.js';
import { SpawnError } from '../core/process/launch.js';
import { isDead, readCmdline, scanProcesses } from '../core/process/proc.js';
import type { Route } from '../http/router.js';
import { finalize, Recording, type Marker, type StopReason } from './recording.js';
import { replayRoutes } from './routes.js';
import type { Screencast } from '../computer/index.js';

/** The replay's record, as listed (the SDK's ReplayListResponseItem fields first). */
export interface ReplayRecord {
  replay_id: string;
  started_at: string;
  finished_at: string | null;
  replay_view_url: string;
  state: 'recording' | 'stopped' | 'failed';
  stop_reason: StopReason | null;
  framerate: number;
  max_duration_in_seconds: number;
  width: number;
  height: number;
  size_bytes: number;
  duration_ms: number;
  markers: Marker[];
  error: string | null;
}

export interface StartParams {
  framerate?: number;
  max_duration_in_seconds?: number;
  record_audio?: boolean;
}

export interface ReplaysDeps {
  /** The screencast of the page a person sees (the computer controls' current page). */
  computer: { readonly screencast: Screencast };
  /** The browser's state: recordings start only on a ready browser. */
  browser: { notReadyReason(): string | null };
}

export interface Replays extends Module {
  readonly routes: Route[];
  /** Stops and finalizes every recording (SIGTERM). */
  close(): Promise<void>;
}

/** Time a start waits for the first frame of the page. */
const FIRST_FRAME_MS = 10_000;
/** How long a start waits for an ffmpeg the previous run left to finish its file. */
const RECOVER_WAIT_MS = 30_000;

export function createReplays(ctx: ModuleContext, deps: ReplaysDeps): Replays {
  const { config } = ctx;
  const c = config.replays;
  const log = ctx.log.child({ module: 'replays' });
  const dir = path.join(config.stateDir, 'replays');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const screencast = deps.computer.screencast;
  const records = new Map<string, ReplayRecord>();
  const active = new Map<string, { rec: Recording; stopped: Promise<ReplayRecord> | null }>();
  let closed = false;

  const metaFile = (id: string): string => path.join(dir, `${id}.json`);
  const partFile = (id: string): string => path.join(dir, `${id}.part.mp4`);
  const videoFile = (id: string): string => path.join(dir, `${id}.mp4`);
  const save = (r: ReplayRecord): Promise<void> => writeFileAtomic(metaFile(r.replay_id), JSON.stringify(r), 0o600);

  // What the last run left: records, and recordings a killed daemon did not finalize.
  const recovering: Promise<void>[] = [];
  for (const name of readdirSync(dir)) {
    if (!name.endsWith('.json')) continue;
    try {
      const r = JSON.parse(readFileSync(path.join(dir, name), 'utf8')) as ReplayRecord;
      records.set(r.replay_id, r);
      if (r.state === 'recording') recovering.push(recover(r));
    } catch (err) {
      log.warn({ event: 'replay_record_unreadable', file: name, err }, 'a replay record could not be read; it is left out');
    }
  }
  void Promise.all(recovering);

  /**
   * The ffmpeg of a killed daemon goes on after its stdin closed: it encodes what was queued and
   * ends the file. Wait for it (RECOVER_WAIT_MS at most) before the remux reads that file.
   */
  async function writerGone(part: string): Promise<void> {
    const until = Date.now() + RECOVER_WAIT_MS;
    while (Date.now() < until) {
      const procs = await scanProcesses();
      const cmdlines = await Promise.all(procs.filter((p) => !isDead(p) && p.pid !== process.pid).map((p) => readCmdline(p.pid)));
      if (!cmdlines.some((c) => c.includes(part))) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    log.warn({ event: 'replay_recover_writer', file: part, waited_ms: RECOVER_WAIT_MS }, 'an ffmpeg still writes the recording of the previous run; it is finalized as it is');
  }

  async function recover(r: ReplayRecord): Promise<void> {
    try {
      const part = partFile(r.replay_id);
      await writerGone(part);
      const st = statSync(part, { throwIfNoEntry: false });
      const end = st ? st.mtime : new Date();
      const durationMs = Math.max(0, end.getTime() - Date.parse(r.started_at));
      if (st !== undefined) await finalize(c.ffmpeg, part, videoFile(r.replay_id), r.markers, durationMs, log);
      const size = (await stat(videoFile(r.replay_id)).catch(() => null))?.size ?? 0;
      Object.assign(r, { state: size > 0 ? 'stopped' : 'failed', stop_reason: 'recovered', finished_at: end.toISOString(), duration_ms: durationMs, size_bytes: size, error: size > 0 ? null : 'the daemon stopped before a frame was written' });
      await save(r);
      log.info({ event: 'replay_recovered', replay_id: r.replay_id, size_bytes: size }, 'a recording the previous run did not finish was finalized');
    } catch (err) {
      log.error({ event: 'replay_recover_failed', replay_id: r.replay_id, err }, 'a recording of the previous run could not be finalized');
    }
  }

  async function start(params: StartParams, viewUrl: (id: string) => string): Promise<ReplayRecord> {
    if (params.record_audio === true) throw new UnsupportedFieldError('record_audio', 'this browser has no audio source to record (headless Chromium plays no sound to a device)');
    const framerate = params.framerate ?? c.defaultFramerate;
    const maxSec = params.max_duration_in_seconds ?? c.maxDurationSec;
    if (maxSec > c.maxDurationSec) throw new BadRequestError([`max_duration_in_seconds: must be at most ${c.maxDurationSec} (BROWSERD_REPLAY_MAX_DURATION_SEC)`]);
    if (closed) throw new BrowserUnavailableError('browserd is stopping', { retryable: false });
    if (active.size >= c.maxActive) throw new LimitExceededError('recordings', c.maxActive, { message: `too many recordings at once (limit ${c.maxActive}, BROWSERD_REPLAY_MAX_ACTIVE); stop one first` });
    const reason = deps.browser.notReadyReason();
    if (reason !== null) throw new BrowserUnavailableError(`Chromium is not ready: ${reason}`, { retryable: true });
    const id = randomUUID();
    const deadline = Deadline.in(FIRST_FRAME_MS, 'the first frame of the page');
    let first;
    try {
      first = await screencast.firstFrame(deadline);
    } catch {
      throw new BrowserUnavailableError(`no frame of a page within ${FIRST_FRAME_MS} ms: is a page open and showing?`, { retryable: true });
    } finally {
      deadline.dispose();
    }
    let rec: Recording;
    try {
      rec = await Recording.start({
        id,
        ffmpeg: c.ffmpeg,
        partFile: partFile(id),
        dir,
        framerate,
        limits: { maxDurationMs: maxSec * 1000, maxBytes: c.maxBytes, minFreeBytes: c.minFreeBytes },
        screencast,
        log,
        first,
        onSelfStop: (why) => void stop(id, why).catch(() => undefined),
      });
    } catch (err) {
      if (err instanceof SpawnError && err.errno === 'ENOENT') throw new DependencyMissingError('ffmpeg', `ffmpeg is not installed (BROWSERD_FFMPEG=${c.ffmpeg}): apt-get install ffmpeg`);
      throw err;
    }
    const r: ReplayRecord = {
      replay_id: id,
      started_at: rec.startedAt.toISOString(),
      finished_at: null,
      replay_view_url: viewUrl(id),
      state: 'recording',
      stop_reason: null,
      framerate,
      max_duration_in_seconds: maxSec,
      width: rec.width,
      height: rec.height,
      size_bytes: 0,
      duration_ms: 0,
      markers: rec.markers,
      error: null,
    };
    records.set(id, r);
    active.set(id, { rec, stopped: null });
    await save(r);
    log.info({ event: 'replay_started', replay_id: id, framerate, width: r.width, height: r.height, max_duration_in_seconds: maxSec }, 'recording');
    await prune();
    return { ...r };
  }

  /** Stops and finalizes a recording (idempotent); the record as it ends. */
  function stop(id: string, why: StopReason): Promise<ReplayRecord> {
    const a = active.get(id);
    const r = records.get(id);
    if (r === undefined) return Promise.reject(new NotFoundError(`no replay ${id}`));
    if (a === undefined) return Promise.resolve({ ...r });
    a.stopped ??= (async () => {
      const exit = await a.rec.stop();
      const endMs = a.rec.durationMs;
      await finalize(c.ffmpeg, partFile(id), videoFile(id), a.rec.markers, endMs, log).catch((err: unknown) => log.error({ event: 'replay_finalize_failed', replay_id: id, err }, 'finalizing the recording failed'));
      const size = (await stat(videoFile(id)).catch(() => null))?.size ?? 0;
      const failed = size === 0;
      Object.assign(r, { state: failed ? 'failed' : 'stopped', stop_reason: why, finished_at: new Date().toISOString(), duration_ms: endMs, size_bytes: size, error: failed ? `ffmpeg: ${a.rec.errorText() || `exit ${exit.code ?? exit.signal}`}` : null });
      await save(r);
      active.delete(id);
      log.info({ event: 'replay_stopped', replay_id: id, reason: why, size_bytes: size, duration_ms: endMs, frames: a.rec.frames, frames_sent: a.rec.framesSent }, 'recording stopped');
      return { ...r };
    })();
    return a.stopped;
  }

  /** Past BROWSERD_REPLAY_MAX_KEPT recordings the oldest finished ones are deleted. */
  async function prune(): Promise<void> {
    const done = [...records.values()].filter((r) => r.state !== 'recording').sort((a, b) => a.started_at.localeCompare(b.started_at));
    while (records.size > c.maxKept && done.length > 0) {
      const old = done.shift() as ReplayRecord;
      await remove(old.replay_id);
      log.info({ event: 'replay_pruned', replay_id: old.replay_id }, 'an old recording was deleted (BROWSERD_REPLAY_MAX_KEPT)');
    }
  }

  async function remove(id: string): Promise<void> {
    if (!records.has(id)) throw new NotFoundError(`no replay ${id}`);
    if (active.has(id)) await stop(id, 'requested');
    records.delete(id);
    await Promise.all([rm(videoFile(id), { force: true }), rm(partFile(id), { force: true }), rm(metaFile(id), { force: true })]);
  }

  const routes = replayRoutes({
    limits: c,
    start,
    list: () => [...records.values()].sort((a, b) => a.started_at.localeCompare(b.started_at)).map((r) => ({ ...r })),
    get: (id) => {
      const r = records.get(id);
      if (r === undefined) throw new NotFoundError(`no replay ${id}`);
      return { ...r };
    },
    stop: (id) => stop(id, 'requested'),
    remove,
    mark: async (id, label) => {
      const r = records.get(id);
      if (r === undefined) throw new NotFoundError(`no replay ${id}`);
      const a = active.get(id);
      if (a === undefined || a.rec.isStopping) throw new ConflictError('replay_stopped', `replay ${id} is not recording (markers are taken while it records)`);
      const m = a.rec.mark(label);
      await save(r);
      return m;
    },
    videoFile,
  });

  return {
    name: 'replays',
    routes,
    close: async () => {
      closed = true;
      await Promise.all([...recovering, ...[...active.keys()].map((id) => stop(id, 'shutdown').catch(() => undefined))]);
    },
  };
}
