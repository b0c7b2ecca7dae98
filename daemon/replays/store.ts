// The replays on disk, in <state>/replays: each recording's record (<id>.json, written atomically
// at every change of state, read back through its schema at start) beside its video: <id>.part.mp4
// (fragmented) while it records, <id>.mp4 once finalized. A record that cannot be read through the
// schema is left out and logged (its files stay).
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { writeFileAtomic } from '../core/fs-atomic.js';
import { lazy } from '../core/lazy.js';
import type { Logger } from '../core/log.js';
import type { Marker, StopReason } from './recording.js';

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

const STOP_REASONS = ['requested', 'max_duration', 'size_limit', 'disk_space', 'shutdown', 'ffmpeg_exited', 'recovered'] as const satisfies readonly StopReason[];

/** A record file's shape: what the daemon wrote (the id must also name the file). */
export const recordSchema = lazy(() =>
  z.object({
    replay_id: z.string().regex(/^[0-9a-f-]{36}$/),
    started_at: z.iso.datetime(),
    finished_at: z.iso.datetime().nullable(),
    replay_view_url: z.string(),
    state: z.enum(['recording', 'stopped', 'failed']),
    stop_reason: z.enum(STOP_REASONS).nullable(),
    framerate: z.number().int().positive(),
    max_duration_in_seconds: z.number().int().positive(),
    width: z.number().int().nonnegative(),
    height: z.number().int().nonnegative(),
    size_bytes: z.number().int().nonnegative(),
    duration_ms: z.number().nonnegative(),
    markers: z.array(z.object({ label: z.string(), at_ms: z.number() })),
    error: z.string().nullable(),
  }),
);

export class ReplayStore {
  private readonly records = new Map<string, ReplayRecord>();

  /** Creates the folder (0700) and reads every record in it. */
  constructor(
    readonly dir: string,
    private readonly log: Logger,
  ) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    for (const name of readdirSync(dir)) {
      if (!name.endsWith('.json')) continue;
      try {
        const parsed = recordSchema().safeParse(JSON.parse(readFileSync(path.join(dir, name), 'utf8')));
        if (!parsed.success) throw new Error(parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; '));
        if (`${parsed.data.replay_id}.json` !== name) throw new Error(`replay_id ${parsed.data.replay_id} does not name the file`);
        this.records.set(parsed.data.replay_id, parsed.data);
      } catch (err) {
        log.warn({ event: 'replay_record_unreadable', file: name, reason: (err as Error).message }, 'a replay record could not be read; it is left out');
      }
    }
  }

  metaFile(id: string): string {
    return path.join(this.dir, `${id}.json`);
  }

  partFile(id: string): string {
    return path.join(this.dir, `${id}.part.mp4`);
  }

  videoFile(id: string): string {
    return path.join(this.dir, `${id}.mp4`);
  }

  get(id: string): ReplayRecord | undefined {
    return this.records.get(id);
  }

  get size(): number {
    return this.records.size;
  }

  /** Every record, oldest first. */
  list(): ReplayRecord[] {
    return [...this.records.values()].sort((a, b) => a.started_at.localeCompare(b.started_at));
  }

  /** Keeps `r` (the same object: later changes are saved by save()) and writes it. */
  async save(r: ReplayRecord): Promise<void> {
    this.records.set(r.replay_id, r);
    await writeFileAtomic(this.metaFile(r.replay_id), JSON.stringify(r), 0o600);
  }

  /** Forgets the record and deletes its files. */
  async remove(id: string): Promise<void> {
    this.records.delete(id);
    await Promise.all([rm(this.videoFile(id), { force: true }), rm(this.partFile(id), { force: true }), rm(this.metaFile(id), { force: true })]);
    this.log.debug({ event: 'replay_removed', replay_id: id }, 'a replay was deleted');
  }
}
