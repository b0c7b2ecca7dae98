// exec: one child run to completion. stdin gets `stdin_b64` then EOF (EOF at once without it);
// stdout and stderr are kept up to the output limit each, the rest is counted and dropped; at the
// deadline the whole group gets SIGKILL and the result says `timed_out: true`. A command runs to
// completion, so whatever it leaves in its process group (background children) gets SIGKILL when
// it exits: nothing started by exec outlives its answer.
import type { ExecOutputPool } from './exec-output-pool.js';
import type { ProcessGroup } from './groups/groups.js';
import { OUTPUT_GRACE_MS } from './managed-process.js';
import { outputSettled, type Launched } from './launch/spawn.js';

export interface ExecResult {
  exit_code: number | null;
  signal: string | null;
  stdout_b64: string;
  stderr_b64: string;
  duration_ms: number;
  timed_out: boolean;
  /** Bytes of output past BROWSERD_EXEC_OUTPUT_LIMIT_BYTES, counted but not kept. */
  stdout_truncated_bytes: number;
  stderr_truncated_bytes: number;
  pid: number;
}

interface ExecOptions {
  timeoutMs: number;
  outputLimitBytes: number;
  /** The output every running exec keeps together (BROWSERD_EXEC_OUTPUT_TOTAL_BYTES). */
  pool: ExecOutputPool;
  stdin: Buffer | null;
}

/** Chunks smaller than this are copied into slabs of CAPTURE_SLAB_BYTES (a Buffer per chunk costs ~380 bytes beside its bytes). */
const CAPTURE_COPY_BELOW = 16 * 1024;
const CAPTURE_SLAB_BYTES = 64 * 1024;

/** Output kept up to a limit; the rest only counted. Small chunks are copied together, so memory stays near the bytes kept. */
class Capture {
  private readonly chunks: Buffer[] = [];
  private slab: Buffer | null = null;
  private slabUsed = 0;
  private kept = 0;
  private closed = false;
  truncated = 0;

  constructor(
    private readonly limit: number,
    private readonly pool: ExecOutputPool,
  ) {}

  /** Bytes kept (taken from the pool). */
  get keptBytes(): number {
    return this.kept;
  }

  /** Keeps nothing more (the answer was made). */
  close(): void {
    this.closed = true;
  }

  add(d: Buffer): void {
    if (this.closed) return;
    const room = this.limit - this.kept;
    const take = this.pool.take(Math.max(0, Math.min(room, d.length)));
    if (take > 0) this.keep(take === d.length ? d : d.subarray(0, take));
    this.truncated += d.length - take;
  }

  private keep(d: Buffer): void {
    this.kept += d.length;
    if (d.length >= CAPTURE_COPY_BELOW) {
      this.chunks.push(d);
      this.slab = null; // the slab is the last chunk no more
      return;
    }
    if (this.slab === null || this.slabUsed + d.length > this.slab.length) {
      this.slab = Buffer.allocUnsafeSlow(Math.min(CAPTURE_SLAB_BYTES, this.limit));
      this.slabUsed = 0;
      this.chunks.push(this.slab.subarray(0, 0));
    }
    d.copy(this.slab, this.slabUsed);
    this.slabUsed += d.length;
    this.chunks[this.chunks.length - 1] = this.slab.subarray(0, this.slabUsed);
  }

  base64(): string {
    return Buffer.concat(this.chunks, this.kept).toString('base64');
  }
}

interface ExecOutcome {
  result: ExecResult;
  /** true when the command left living processes in its group, which then got SIGKILL. */
  leftoversKilled: boolean;
}

export async function runExec(launched: Launched, group: ProcessGroup, opts: ExecOptions): Promise<ExecOutcome> {
  const out = new Capture(opts.outputLimitBytes, opts.pool);
  const err = new Capture(opts.outputLimitBytes, opts.pool);
  try {
    return await run(launched, group, opts, out, err);
  } finally {
    // Output that still comes (a grandchild past the grace) is not kept: the pool gets back all it gave.
    out.close();
    err.close();
    opts.pool.release(out.keptBytes + err.keptBytes);
  }
}

async function run(launched: Launched, group: ProcessGroup, opts: ExecOptions, out: Capture, err: Capture): Promise<ExecOutcome> {
  const started = process.hrtime.bigint();
  launched.stdout.on('data', (d: Buffer) => out.add(d));
  launched.stderr?.on('data', (d: Buffer) => err.add(d));

  // A child that never reads its stdin (EPIPE) is normal for exec; the error is not the caller's.
  launched.stdin.on('error', () => {});
  if (opts.stdin !== null && opts.stdin.length > 0) launched.stdin.write(opts.stdin);
  launched.stdin.end();

  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    void group.trySignal('SIGKILL');
  }, opts.timeoutMs);
  const exit = await launched.exit;
  const durationMs = Number(process.hrtime.bigint() - started) / 1e6;
  clearTimeout(timer);
  // What the command left behind in its group ends with it (alive() checks the group afresh).
  const leftoversKilled = (await group.alive()) && (await group.trySignal('SIGKILL'));
  await outputSettled(launched, OUTPUT_GRACE_MS);

  const result: ExecResult = {
    exit_code: exit.exit_code,
    signal: exit.signal,
    stdout_b64: out.base64(),
    stderr_b64: err.base64(),
    duration_ms: Math.round(durationMs),
    timed_out: timedOut,
    stdout_truncated_bytes: out.truncated,
    stderr_truncated_bytes: err.truncated,
    pid: launched.pid,
  };
  return { result, leftoversKilled };
}
