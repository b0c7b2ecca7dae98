// The recordings of the VM, like kernel-images' RecordManager: starts one (a Recording: ffmpeg fed by
// the screencast), stops and finalizes it (idempotent; by a request, its own limits, or SIGTERM),
// marks, deletes, prunes past BROWSERD_REPLAY_MAX_KEPT, and at start finalizes what a killed daemon
// left (a `recording` record and its .part.mp4: listed as stopped, `stop_reason: recovered`).
import { randomUUID } from 'node:crypto';
import { statSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import type { Config } from '../core/config.js';
import { Deadline } from '../core/deadline.js';
import { BadRequestError, BrowserUnavailableError, ConflictError, DependencyMissingError, NotFoundError, UnsupportedFieldError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { SpawnError } from '../core/process/launch.js';
import { isDead, readCmdline, scanProcesses } from '../core/process/proc.js';
import { Slots } from '../core/slots.js';
import type { Screencast } from '../computer/index.js';
import { finalize as ffmpegFinalize, Recording, type Marker, type StopReason } from './recording.js';
import type { ReplayRecord, ReplayStore } from './store.js';

export interface StartParams {
  framerate?: number;
  max_duration_in_seconds?: number;
  record_audio?: boolean;
}

export interface ManagerDeps {
  limits: Config['replays'];
  store: ReplayStore;
  screencast: Screencast;
  /** Throws BrowserUnavailableError unless the browser is ready: recordings start only on a ready browser. */
  ensureReady(): void;
  log: Logger;
  /** The remux of a fragmented recording into the final file (recording.ts finalize: ffmpeg); a unit test's stand-in. */
  finalize?: typeof ffmpegFinalize;
  /** How long a recovery waits for an ffmpeg of the previous run to finish its file (default RECOVER_WAIT_MS). */
  recoverWaitMs?: number;
}

/** Time a start waits for the first frame of the page. */
const FIRST_FRAME_MS = 10_000;
/** How long a start waits for an ffmpeg the previous run left to finish its file. */
const RECOVER_WAIT_MS = 30_000;

export class RecordManager {
  /** The recordings running, each with its slot (given back once it has stopped). */
  private readonly active = new Map<string, { rec: Recording; stopped: Promise<ReplayRecord> | null; release: () => void }>();
  private readonly slots: Slots;
  readonly finalize: typeof ffmpegFinalize;
  private recovering: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(private readonly deps: ManagerDeps) {
    const max = deps.limits.maxActive;
    this.slots = new Slots({ what: 'recordings', max, message: `too many recordings at once (limit ${max}, BROWSERD_REPLAY_MAX_ACTIVE); stop one first` });
    this.finalize = deps.finalize ?? ffmpegFinalize;
  }

  /** Finalizes every recording the previous run left (in the background: awaited by close()); resolves once all are done. */
  recover(): Promise<void> {
    const left = this.deps.store.list().filter((r) => r.state === 'recording');
    this.recovering = Promise.all(left.map((r) => this.recoverOne(r))).then(() => undefined);
    return this.recovering;
  }

  async start(params: StartParams, viewUrl: (id: string) => string): Promise<ReplayRecord> {
    const c = this.deps.limits;
    const { store, log } = this.deps;
    if (params.record_audio === true) throw new UnsupportedFieldError('record_audio', 'this browser has no audio source to record (headless Chromium plays no sound to a device)');
    const framerate = params.framerate ?? c.defaultFramerate;
    const maxSec = params.max_duration_in_seconds ?? c.maxDurationSec;
    if (maxSec > c.maxDurationSec) throw new BadRequestError([`max_duration_in_seconds: must be at most ${c.maxDurationSec} (BROWSERD_REPLAY_MAX_DURATION_SEC)`]);
    if (this.closed) throw new BrowserUnavailableError('browserd is stopping', { retryable: false });
    const release = this.slots.take();
    let started = false;
    try {
      this.deps.ensureReady();
      const id = randomUUID();
      const rec = await this.record(id, framerate, maxSec);
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
      this.active.set(id, { rec, stopped: null, release });
      started = true;
      await store.save(r);
      log.info({ event: 'replay_started', replay_id: id, framerate, width: r.width, height: r.height, max_duration_in_seconds: maxSec }, 'recording');
      await this.prune();
      return { ...r };
    } finally {
      if (!started) release();
    }
  }

  /** The first frame, then ffmpeg: the Recording. */
  private async record(id: string, framerate: number, maxSec: number): Promise<Recording> {
    const c = this.deps.limits;
    const { store, log, screencast } = this.deps;
    const deadline = Deadline.in(FIRST_FRAME_MS, 'the first frame of the page');
    let first;
    try {
      first = await screencast.firstFrame(deadline);
    } catch {
      throw new BrowserUnavailableError(`no frame of a page within ${FIRST_FRAME_MS} ms: is a page open and showing?`, { retryable: true });
    } finally {
      deadline.dispose();
    }
    try {
      return await Recording.start({
        id,
        ffmpeg: c.ffmpeg,
        partFile: store.partFile(id),
        dir: store.dir,
        framerate,
        limits: { maxDurationMs: maxSec * 1000, maxBytes: c.maxBytes, minFreeBytes: c.minFreeBytes },
        screencast,
        log,
        first,
        onSelfStop: (why) => {
          this.stop(id, why).catch((err: unknown) => log.error({ event: 'replay_self_stop_failed', replay_id: id, reason: why, err }, 'a recording that stopped by itself could not be finalized'));
        },
      });
    } catch (err) {
      if (err instanceof SpawnError && err.errno === 'ENOENT') throw new DependencyMissingError('ffmpeg', `ffmpeg is not installed (BROWSERD_FFMPEG=${c.ffmpeg}): apt-get install ffmpeg`);
      throw err;
    }
  }

  /** Stops and finalizes a recording (idempotent); the record as it ends. */
  stop(id: string, why: StopReason): Promise<ReplayRecord> {
    const { store, log } = this.deps;
    const a = this.active.get(id);
    const r = store.get(id);
    if (r === undefined) return Promise.reject(new NotFoundError(`no replay ${id}`));
    if (a === undefined) return Promise.resolve({ ...r });
    a.stopped ??= (async () => {
      const exit = await a.rec.stop();
      const endMs = a.rec.durationMs;
      await this.finalize(this.deps.limits.ffmpeg, store.partFile(id), store.videoFile(id), a.rec.markers, endMs, log).catch((err: unknown) => log.error({ event: 'replay_finalize_failed', replay_id: id, err }, 'finalizing the recording failed'));
      const size = (await stat(store.videoFile(id)).catch(() => null))?.size ?? 0;
      const failed = size === 0;
      Object.assign(r, { state: failed ? 'failed' : 'stopped', stop_reason: why, finished_at: new Date().toISOString(), duration_ms: endMs, size_bytes: size, error: failed ? `ffmpeg: ${a.rec.errorText() || `exit ${exit.code ?? exit.signal}`}` : null });
      await store.save(r);
      this.active.delete(id);
      a.release();
      log.info({ event: 'replay_stopped', replay_id: id, reason: why, size_bytes: size, duration_ms: endMs, frames: a.rec.frames, frames_sent: a.rec.framesSent }, 'recording stopped');
      return { ...r };
    })();
    return a.stopped;
  }

  async mark(id: string, label: string): Promise<Marker> {
    const r = this.deps.store.get(id);
    if (r === undefined) throw new NotFoundError(`no replay ${id}`);
    const a = this.active.get(id);
    if (a === undefined || a.rec.isStopping) throw new ConflictError('replay_stopped', `replay ${id} is not recording (markers are taken while it records)`);
    const m = a.rec.mark(label);
    await this.deps.store.save(r);
    return m;
  }

  async remove(id: string): Promise<void> {
    if (this.deps.store.get(id) === undefined) throw new NotFoundError(`no replay ${id}`);
    if (this.active.has(id)) await this.stop(id, 'requested');
    await this.deps.store.remove(id);
  }

  /** Past BROWSERD_REPLAY_MAX_KEPT recordings the oldest finished ones are deleted. */
  async prune(): Promise<void> {
    const { store, log } = this.deps;
    const done = store.list().filter((r) => r.state !== 'recording');
    while (store.size > this.deps.limits.maxKept && done.length > 0) {
      const old = done.shift() as ReplayRecord;
      await this.remove(old.replay_id);
      log.info({ event: 'replay_pruned', replay_id: old.replay_id }, 'an old recording was deleted (BROWSERD_REPLAY_MAX_KEPT)');
    }
  }

  /** Stops and finalizes every recording (SIGTERM), after the recoveries. */
  async close(): Promise<void> {
    this.closed = true;
    const { log } = this.deps;
    await Promise.all([
      this.recovering,
      ...[...this.active.keys()].map((id) => this.stop(id, 'shutdown').catch((err: unknown) => log.error({ event: 'replay_stop_failed', replay_id: id, err }, 'a recording could not be finalized at shutdown'))),
    ]);
  }

  /**
   * The ffmpeg of a killed daemon goes on after its stdin closed: it encodes what was queued and
   * ends the file. Wait for it (RECOVER_WAIT_MS at most) before the remux reads that file.
   */
  private async writerGone(part: string): Promise<void> {
    const wait = this.deps.recoverWaitMs ?? RECOVER_WAIT_MS;
    const until = Date.now() + wait;
    while (Date.now() < until) {
      const procs = await scanProcesses();
      const cmdlines = await Promise.all(procs.filter((p) => !isDead(p) && p.pid !== process.pid).map((p) => readCmdline(p.pid)));
      if (!cmdlines.some((c) => c.includes(part))) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    this.deps.log.warn({ event: 'replay_recover_writer', file: part, waited_ms: wait }, 'an ffmpeg still writes the recording of the previous run; it is finalized as it is');
  }

  private async recoverOne(r: ReplayRecord): Promise<void> {
    const { store, log } = this.deps;
    try {
      const part = store.partFile(r.replay_id);
      await this.writerGone(part);
      const st = statSync(part, { throwIfNoEntry: false });
      const end = st ? st.mtime : new Date();
      const durationMs = Math.max(0, end.getTime() - Date.parse(r.started_at));
      if (st !== undefined) await this.finalize(this.deps.limits.ffmpeg, part, store.videoFile(r.replay_id), r.markers, durationMs, log);
      const size = (await stat(store.videoFile(r.replay_id)).catch(() => null))?.size ?? 0;
      Object.assign(r, { state: size > 0 ? 'stopped' : 'failed', stop_reason: 'recovered', finished_at: end.toISOString(), duration_ms: durationMs, size_bytes: size, error: size > 0 ? null : 'the daemon stopped before a frame was written' });
      await store.save(r);
      log.info({ event: 'replay_recovered', replay_id: r.replay_id, size_bytes: size }, 'a recording the previous run did not finish was finalized');
    } catch (err) {
      log.error({ event: 'replay_recover_failed', replay_id: r.replay_id, err }, 'a recording of the previous run could not be finalized');
    }
  }
}
