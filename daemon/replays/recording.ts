// One recording: the screencast's frames fed to ffmpeg on a constant grid — each slot of the video
// (k / framerate seconds after the start) gets the newest frame Chromium had captured by then, the
// same frame again while the page does not change (or Chromium restarts), so video time is wall
// time. Only a slot whose frame changed is sent (in a Matroska stream, with its time: mkv.ts), and
// an unchanged one once a second (so that fragments keep reaching the disk) and at the end. The
// video keeps those times (variable frame rate, at most `framerate` a second; a frame lasts until
// the next), so a page that does not change costs almost nothing: no frame decoded, scaled or
// encoded again 10 times a second. Frames are placed by Chromium's capture time, not by when they arrive: the video is written
// LATENCY_MS behind the clock, so a frame that arrives late on a busy machine still lands in its
// slot. Encoded to H.264 (yuv420p, the size of the first frame made even) in a fragmented MP4,
// so that a recording cut short by a crash or SIGKILL is still a playable file. Stopping closes
// ffmpeg's stdin (it finishes the file), then SIGINT, SIGTERM and SIGKILL if it does not end;
// finalize() remuxes the file with +faststart (the index first, for players that stream) and the
// markers as chapters.
import { Buffer } from 'node:buffer';
import { rename, rm, stat, statfs, writeFile } from 'node:fs/promises';
import { launch, type Child, type ExitInfo } from '../core/process/launch.js';
import { endGroups, signalGroup } from '../core/process/group.js';
import type { Logger } from '../core/log.js';
import type { Frame, Screencast } from '../computer/index.js';
import { mkvFrame, mkvHeader } from './mkv.js';

/** How long ffmpeg gets to finish the file after its stdin closes, and after SIGINT, before SIGTERM then SIGKILL. */
const FINISH_MS = 10_000;
const SIGINT_MS = 5_000;
/** How often the size, the free disk space and the duration are checked. */
const CHECK_MS = 1000;
/** An unchanged frame is sent again after this many seconds of video (the fragments keep reaching the disk). */
const REPEAT_S = 1;
/** The last slots sent whatever they hold: the last frame lasts one slot, and the video ends at the stop. */
const TAIL_SLOTS = 3;
/** How far behind the clock the video is written: frames arriving up to this late still land in their slot. */
export const LATENCY_MS = 1000;

export type StopReason = 'requested' | 'max_duration' | 'size_limit' | 'disk_space' | 'shutdown' | 'ffmpeg_exited' | 'recovered';

export interface Marker {
  label: string;
  /** Milliseconds since the start of the recording. */
  at_ms: number;
}

export interface RecordingLimits {
  maxDurationMs: number;
  maxBytes: number;
  /** Stop when the file system has less free space than this. */
  minFreeBytes: number;
}

export interface RecordingSpec {
  id: string;
  ffmpeg: string;
  /** The file ffmpeg writes (fragmented MP4) and the folder it is in. */
  partFile: string;
  dir: string;
  framerate: number;
  limits: RecordingLimits;
  screencast: Screencast;
  log: Logger;
  /** The first frame (its size is the video's). */
  first: Frame;
  /** Called once when the recording stops by itself (a limit, ffmpeg's exit), with the reason. */
  onSelfStop(reason: StopReason): void;
}

/** ffmpeg's arguments: MJPEG frames with their times on stdin (Matroska), H.264 with the same times in a fragmented MP4 of `width`×`height`. */
export function ffmpegArgs(fps: number, width: number, height: number, out: string): string[] {
  const w = Math.max(2, width - (width % 2));
  const h = Math.max(2, height - (height % 2));
  return [
    '-hide_banner',
    '-loglevel', 'error',
    '-f', 'matroska',
    // The track states its rate: no frames are held back to measure it.
    '-fpsprobesize', '0',
    '-i', 'pipe:0',
    // A frame of another size (a tab switch, a viewport change) is fitted into the first one's.
    '-vf', `scale=${w}:${h}:force_original_aspect_ratio=decrease,pad=${w}:${h}:(ow-iw)/2:(oh-ih)/2,format=yuv420p`,
    '-c:v', 'libx264',
    '-preset', 'veryfast',
    '-tune', 'zerolatency',
    // A keyframe every 2 s of video (and every 2 s of frames): each fragment is complete on disk, a crash loses at most the last one.
    '-g', String(fps * 2),
    '-force_key_frames', 'expr:gte(t,n_forced*2)',
    // The frames' own times: a frame not sent again lasts until the next one.
    '-fps_mode', 'vfr',
    '-movflags', '+frag_keyframe+empty_moov+default_base_moof',
    '-f', 'mp4',
    '-y', out,
  ];
}

export class Recording {
  readonly startedAt = new Date();
  readonly markers: Marker[] = [];
  readonly width: number;
  readonly height: number;
  private written = 0;
  private sent = 0;
  /** The slot last sent to ffmpeg. */
  private lastSent = -Infinity;
  private ticker: NodeJS.Timeout | null = null;
  private checker: NodeJS.Timeout | null = null;
  private unsubscribe: (() => void) | null = null;
  private stopping: Promise<ExitInfo> | null = null;
  private readonly stderr: string[] = [];
  /** Frames not yet written, oldest first (by capture time); `current` is the newest one written. */
  private readonly queue: Frame[] = [];
  private current: Frame;

  private constructor(
    private readonly spec: RecordingSpec,
    private readonly child: Child,
  ) {
    this.width = spec.first.width - (spec.first.width % 2);
    this.height = spec.first.height - (spec.first.height % 2);
    this.current = spec.first;
  }

  static async start(spec: RecordingSpec): Promise<Recording> {
    const child = await launch({
      command: spec.ffmpeg,
      args: ffmpegArgs(spec.framerate, spec.first.width, spec.first.height, spec.partFile),
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      cwd: spec.dir,
      stdin: 'pipe',
    });
    const r = new Recording(spec, child);
    r.begin();
    return r;
  }

  /** Slots of the video written so far (its frames). */
  get frames(): number {
    return this.written;
  }

  /** Frames sent to ffmpeg so far (changed ones, a repeat a second, the tail). */
  get framesSent(): number {
    return this.sent;
  }

  /** The video's duration so far: its frames at the framerate. */
  get durationMs(): number {
    return Math.round((this.written * 1000) / this.spec.framerate);
  }

  get isStopping(): boolean {
    return this.stopping !== null;
  }

  mark(label: string): Marker {
    const m = { label, at_ms: Date.now() - this.startedAt.getTime() };
    this.markers.push(m);
    return m;
  }

  private begin(): void {
    const { spec, child } = this;
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (s: string) => {
      this.stderr.push(s);
      if (this.stderr.length > 20) this.stderr.shift();
    });
    child.stdout.resume();
    child.stdin?.write(mkvHeader(spec.framerate));
    this.unsubscribe = spec.screencast.subscribe((frame) => {
      // In capture order (a frame of an earlier capture than the last queued one is out of date).
      const last = this.queue.at(-1);
      if (last === undefined || frame.at >= last.at) this.queue.push(frame);
    }, spec.framerate);
    const period = 1000 / spec.framerate;
    this.ticker = setInterval(() => this.tick(Date.now() - LATENCY_MS), Math.max(5, Math.floor(period / 2)));
    this.tick(Date.now() - LATENCY_MS);
    this.checker = setInterval(() => void this.check(), CHECK_MS);
    void child.exit.then(() => {
      if (this.stopping === null) {
        spec.log.warn({ event: 'replay_ffmpeg_exited', replay_id: spec.id, stderr: this.stderr.join('').slice(-2000) }, 'ffmpeg ended while recording');
        spec.onSelfStop('ffmpeg_exited');
      }
    });
  }

  /**
   * Writes the slots up to `until` (epoch ms), each the newest frame captured by its time, unless
   * ffmpeg is behind (then the next tick goes on once it has read). `flush`: write them all.
   */
  private tick(until: number, flush = false): void {
    const stdin = this.child.stdin;
    if (stdin === null || stdin.destroyed) return;
    const fps = this.spec.framerate;
    const start = this.startedAt.getTime();
    // Slots are never skipped (video time stays wall time): after a stall of the event loop or of
    // ffmpeg, the missing ones are written in a burst, as far as ffmpeg reads.
    const due = until < start ? 0 : Math.floor(((until - start) * fps) / 1000) + 1;
    while (this.written < due) {
      const k = this.written;
      const slot = start + (k * 1000) / fps;
      let changed = false;
      while (this.queue.length > 0 && (this.queue[0] as Frame).at <= slot) {
        this.current = this.queue.shift() as Frame;
        changed = true;
      }
      this.written++;
      if (!changed && k - this.lastSent < REPEAT_S * fps && !(flush && due - k <= TAIL_SLOTS)) continue;
      this.lastSent = k;
      this.sent++;
      if (!stdin.write(mkvFrame(this.current.jpeg, (k * 1000) / fps)) && !flush) break;
    }
  }

  private async check(): Promise<void> {
    const { spec } = this;
    if (this.stopping !== null) return;
    if (Date.now() - this.startedAt.getTime() >= spec.limits.maxDurationMs) return spec.onSelfStop('max_duration');
    try {
      const [st, fs] = await Promise.all([stat(spec.partFile), statfs(spec.dir)]);
      if (this.stopping !== null) return;
      if (st.size >= spec.limits.maxBytes) return spec.onSelfStop('size_limit');
      if (fs.bavail * fs.bsize < spec.limits.minFreeBytes) return spec.onSelfStop('disk_space');
    } catch {
      // the file is not there yet (ffmpeg writes it with its first fragment)
    }
  }

  /** Ends ffmpeg (stdin closed, then SIGINT, SIGTERM, SIGKILL); resolves with its exit. Idempotent. */
  stop(): Promise<ExitInfo> {
    this.stopping ??= (async () => {
      const end = Date.now();
      if (this.checker !== null) clearInterval(this.checker);
      // The frames captured before the end that are still on their way, then the rest of the slots.
      if (running(this.child)) await new Promise((r) => setTimeout(r, Math.min(LATENCY_MS, 300)));
      if (this.ticker !== null) clearInterval(this.ticker);
      this.unsubscribe?.();
      this.tick(end, true);
      const { child } = this;
      child.stdin?.end();
      const ended = (ms: number): Promise<boolean> =>
        Promise.race([child.exit.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms).unref())]);
      if (!(await ended(FINISH_MS))) {
        signalGroup(child.pgid, 'SIGINT');
        if (!(await ended(SIGINT_MS))) await endGroups([child.pgid], 2000, 2000);
      }
      return child.exit;
    })();
    return this.stopping;
  }

  /** ffmpeg's last error lines (for the log of a failed recording). */
  errorText(): string {
    return this.stderr.join('').slice(-2000);
  }
}

function running(c: Child): boolean {
  return c.exitInfo === null;
}

/** The title of the chapter from the start of a video to its first marker. */
export const LEAD_CHAPTER_TITLE = 'start';

/**
 * ffmpeg's metadata file: the markers as chapters, each until the next (the last until `endMs`).
 * An MP4 chapter track holds its chapters back to back from 0 (each sample's time is the sum of the
 * durations before it), so a first chapter that starts later would be read as starting at 0: a
 * chapter titled LEAD_CHAPTER_TITLE fills the time before the first marker.
 * A label is escaped by the format's grammar (a backslash before = ; # \\ and newline); the route
 * refuses control characters, and any that reached here (a record of an older daemon) are dropped:
 * a NUL would end the value, a CR would end the line.
 */
export function chaptersFile(markers: readonly Marker[], endMs: number): string {
  const esc = (s: string): string => s.replace(/\p{Cc}/gu, '').replace(/([=;#\\])/g, '\\$1');
  const lines = [';FFMETADATA1'];
  const first = markers[0];
  if (first !== undefined && first.at_ms > 0) lines.push('[CHAPTER]', 'TIMEBASE=1/1000', 'START=0', `END=${first.at_ms}`, `title=${LEAD_CHAPTER_TITLE}`);
  markers.forEach((m, i) => {
    const end = Math.max(m.at_ms + 1, i + 1 < markers.length ? (markers[i + 1] as Marker).at_ms : endMs);
    lines.push('[CHAPTER]', 'TIMEBASE=1/1000', `START=${m.at_ms}`, `END=${end}`, `title=${esc(m.label)}`);
  });
  return `${lines.join('\n')}\n`;
}

/**
 * The fragmented `part` made into `out` with +faststart and the markers as chapters (ffmpeg, copy:
 * no re-encoding). When the remux fails, `part` itself becomes `out` (it plays as it is).
 */
export async function finalize(ffmpeg: string, part: string, out: string, markers: readonly Marker[], endMs: number, log: Logger): Promise<void> {
  const meta = `${part}.chapters.txt`;
  const tmp = `${out}.tmp.mp4`;
  const args = ['-hide_banner', '-loglevel', 'error', '-i', part];
  if (markers.length > 0) {
    await writeFile(meta, chaptersFile(markers, endMs));
    args.push('-f', 'ffmetadata', '-i', meta, '-map_metadata', '1', '-map_chapters', '1');
  }
  args.push('-map', '0', '-c', 'copy', '-movflags', '+faststart', '-f', 'mp4', '-y', tmp);
  let ok = false;
  try {
    const child = await launch({ command: ffmpeg, args, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, stdin: 'ignore' });
    const err: Buffer[] = [];
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.stdout.resume();
    const exit = await child.exit;
    ok = exit.code === 0;
    if (!ok) log.warn({ event: 'replay_remux_failed', file: part, code: exit.code, signal: exit.signal, stderr: Buffer.concat(err).toString().slice(-2000) }, 'the recording is kept as recorded (fragmented MP4)');
  } catch (e) {
    log.warn({ event: 'replay_remux_failed', file: part, err: e }, 'the recording is kept as recorded (fragmented MP4)');
  }
  if (ok) {
    await rename(tmp, out);
    await rm(part, { force: true });
  } else {
    await rm(tmp, { force: true });
    await rename(part, out);
  }
  await rm(meta, { force: true });
}
