// exec: one child run to completion. stdin gets `stdin_b64` then EOF (EOF at once without it);
// stdout and stderr are kept up to the output limit each, the rest is counted and dropped; at the
// deadline the whole group gets SIGKILL and the result says `timed_out: true`. A command runs to
// completion, so whatever it leaves in its process group (background children) gets SIGKILL when
// it exits: nothing started by exec outlives its answer.
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
  stdin: Buffer | null;
}

/** Output kept up to a limit; the rest only counted. */
class Capture {
  private readonly chunks: Buffer[] = [];
  private kept = 0;
  truncated = 0;

  constructor(private readonly limit: number) {}

  add(d: Buffer): void {
    const room = this.limit - this.kept;
    if (room >= d.length) {
      this.chunks.push(d);
      this.kept += d.length;
      return;
    }
    if (room > 0) {
      this.chunks.push(d.subarray(0, room));
      this.kept += room;
    }
    this.truncated += d.length - Math.max(room, 0);
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
  const started = process.hrtime.bigint();
  const out = new Capture(opts.outputLimitBytes);
  const err = new Capture(opts.outputLimitBytes);
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
