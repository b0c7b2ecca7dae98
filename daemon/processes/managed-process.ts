// One spawned process as the API sees it: its id, its output (replay buffer), its stdin queue,
// its exit, its process group, and for a terminal its size. The exit event of the output comes
// only after the output streams have ended (or a short grace past the exit, when a grandchild keeps
// them open), so it is always last. The process is `exited` once its leader has exited; what the
// leader left in its group lives on (`group_alive`), can still be killed, and keeps the process in
// the table. A spawn `timeout_sec` ends the whole group with SIGKILL at its deadline.
import type { Logger } from '../core/log.js';
import type { Metrics } from '../core/metrics.js';
import { ConflictError } from '../core/errors.js';
import type { GroupSignal } from '../core/process/group.js';
import type { ProcInfo } from '../core/process/proc.js';
import type { ProcessGroup } from './groups/groups.js';
import { outputSettled, type Launched } from './launch/spawn.js';
import { ReplayBuffer, type ExitInfo } from './output/replay-buffer.js';
import type { StdinBudget } from './stdin/stdin-budget.js';
import { StdinWriter } from './stdin/stdin-writer.js';

/** How long output may still arrive after the child's exit (grandchildren holding the pipes). */
export const OUTPUT_GRACE_MS = 1000;
/** What `close: true` writes to a terminal: the EOF key (VEOF, Ctrl-D). */
const TTY_EOF = Buffer.from([0x04]);

export interface ProcessStatus {
  process_id: string;
  pid: number;
  state: 'running' | 'exited';
  exit_code: number | null;
  signal: string | null;
  started_at: string;
  exited_at: string | null;
  /** true while any member of the process group (or a group of its session) lives (it may outlive the process itself). */
  group_alive: boolean;
  command: string;
  as_user: string;
  tty: { rows: number; cols: number } | null;
  timeout_at: string | null;
  timed_out: boolean;
  cpu_pct?: number;
  mem_bytes?: number;
}

interface ManagedProcessOptions {
  command: string;
  replayBufferBytes: number;
  stdinTimeoutMs: number;
  /** Most stdin bytes accepted and not yet in the pipe at once (429 past it). */
  stdinQueueLimitBytes: number;
  /** The stdin bytes queued over every process (BROWSERD_STDIN_QUEUE_TOTAL_BYTES). */
  stdinBudget: StdinBudget;
  /** The spawn deadline in ms (null: none). */
  timeoutMs: number | null;
  metrics: Metrics;
  log: Logger;
}

export class ManagedProcess {
  readonly pid: number;
  readonly pgid: number;
  readonly startedAt = new Date();
  readonly output: ReplayBuffer;
  readonly stdin: StdinWriter;
  /** Resolves once the child has exited (status says `exited` from then on). */
  readonly exited: Promise<ExitInfo>;
  /** Resolves once the process has exited and no member of its group lives any more. */
  readonly done: Promise<void>;
  private exitInfo: ExitInfo | null = null;
  private exitedAt: Date | null = null;
  private readonly timeoutAt: Date | null;
  private timedOut = false;

  constructor(
    /** A random UUID. */
    readonly id: string,
    private readonly launched: Launched,
    readonly group: ProcessGroup,
    private readonly opts: ManagedProcessOptions,
  ) {
    this.pid = launched.pid;
    this.pgid = launched.pgid;
    this.output = new ReplayBuffer(opts.replayBufferBytes);
    launched.stdout.on('data', (d: Buffer) => this.output.append('stdout', d));
    launched.stderr?.on('data', (d: Buffer) => this.output.append('stderr', d));
    this.stdin = new StdinWriter(launched.stdin, {
      processId: this.id,
      timeoutMs: opts.stdinTimeoutMs,
      maxQueuedBytes: opts.stdinQueueLimitBytes,
      budget: opts.stdinBudget,
      exited: launched.exit,
      onWritten: (n) => opts.metrics.stdinBytes.inc(n),
    });
    this.timeoutAt = opts.timeoutMs === null ? null : new Date(this.startedAt.getTime() + opts.timeoutMs);
    let timer: NodeJS.Timeout | null = null;
    if (opts.timeoutMs !== null) {
      timer = setTimeout(() => this.onDeadline(), opts.timeoutMs);
      timer.unref();
    }
    this.exited = launched.exit.then((info) => {
      this.exitInfo = info;
      this.exitedAt = new Date();
      this.stdin.processExited();
      opts.log.info(
        { event: 'process_exited', child_pid: this.pid, process_id: this.id, code: info.exit_code, signal: info.signal, group_alive: !group.ended, timed_out: this.timedOut },
        'process exited',
      );
      void outputSettled(launched, OUTPUT_GRACE_MS).then(() => this.output.finish(info));
      return info;
    });
    this.done = Promise.all([this.exited, group.gone]).then(() => {
      if (timer !== null) clearTimeout(timer);
    });
  }

  get running(): boolean {
    return this.exitInfo === null;
  }

  get user(): string {
    return this.launched.user.name;
  }

  /** true for a process spawned with allocate_tty. */
  get isTty(): boolean {
    return this.launched.tty !== null;
  }

  /** `scan`: the living members of sessions as read by sessionMembers (this one's among them, or none: no usage given). */
  status(scan: ReadonlyMap<number, ProcInfo[]>): ProcessStatus {
    const usage = this.group.usage(this.startedAt, scan);
    return {
      process_id: this.id,
      pid: this.pid,
      state: this.exitInfo === null ? 'running' : 'exited',
      exit_code: this.exitInfo?.exit_code ?? null,
      signal: this.exitInfo?.signal ?? null,
      started_at: this.startedAt.toISOString(),
      exited_at: this.exitedAt?.toISOString() ?? null,
      group_alive: !this.group.ended,
      command: this.opts.command,
      as_user: this.launched.user.name,
      tty: this.launched.tty === null ? null : { ...this.launched.tty.size },
      timeout_at: this.timeoutAt?.toISOString() ?? null,
      timed_out: this.timedOut,
      ...(usage ?? {}),
    };
  }

  /**
   * Signals the whole group: while the process runs, and after its exit while members it left in
   * its group live. 409 process_exited once nothing of the group is left.
   */
  async kill(signal: GroupSignal): Promise<void> {
    if (!(await this.group.signal(signal))) {
      throw new ConflictError('process_exited', `process ${this.id} has already exited and nothing of its process group is left`);
    }
  }

  /**
   * Queues stdin data; see StdinWriter.write. 409 process_exited once the child has exited. On a
   * terminal, `close` writes the EOF key (^D) after the data and stdin stays open; the answer
   * counts the caller's bytes.
   */
  writeStdin(data: Buffer, close: boolean): Promise<number> {
    if (this.exitInfo !== null) throw new ConflictError('process_exited', `process ${this.id} has exited`);
    if (this.launched.tty !== null && close) return this.stdin.write(Buffer.concat([data, TTY_EOF]), false).then((n) => n - TTY_EOF.length);
    return this.stdin.write(data, close);
  }

  /** Resizes the terminal (SIGWINCH to its foreground job): 409 not_a_tty for pipes, 409 process_exited once the terminal is closed. */
  resize(rows: number, cols: number): void {
    const tty = this.launched.tty;
    if (tty === null) throw new ConflictError('not_a_tty', `process ${this.id} has no terminal (spawn it with allocate_tty: true)`);
    if (this.exitInfo !== null || !tty.resize(rows, cols)) throw new ConflictError('process_exited', `process ${this.id} has exited; its terminal is closed`);
  }

  private onDeadline(): void {
    if (this.group.ended) return;
    this.timedOut = true;
    void this.group.trySignal('SIGKILL').then((sent) => {
      this.opts.log.info({ event: 'process_timeout', child_pid: this.pid, process_id: this.id, timeout_at: this.timeoutAt?.toISOString(), signalled: sent }, 'spawn deadline: process group killed');
    });
  }
}
