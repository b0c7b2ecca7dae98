// One spawned process as the API sees it: its id, its output (replay buffer), its stdin queue,
// its exit and its process group. The exit event of the output comes only after both output
// streams have ended (or a short grace past the exit, when a grandchild keeps the pipes open), so
// it is always last. The process is `exited` once its leader has exited; what the leader left in
// its group lives on (`group_alive`), can still be killed, and keeps the process in the table.
import type { Logger } from '../core/log.js';
import type { Metrics } from '../core/metrics.js';
import { ConflictError } from '../core/errors.js';
import type { ProcessGroup } from './groups/groups.js';
import { ReplayBuffer, type ExitInfo } from './output/replay-buffer.js';
import type { GroupSignal } from '../core/process/group.js';
import { outputSettled, type Launched } from './launch/spawn.js';
import { StdinWriter } from './stdin/stdin-writer.js';

/** How long output may still arrive after the child's exit (grandchildren holding the pipes). */
export const OUTPUT_GRACE_MS = 1000;

export interface ProcessStatus {
  process_id: string;
  pid: number;
  state: 'running' | 'exited';
  exit_code: number | null;
  signal: string | null;
  started_at: string;
  exited_at: string | null;
  /** true while any member of the process group lives (it may outlive the process itself). */
  group_alive: boolean;
  command: string;
  as_user: string;
}

export interface ManagedProcessOptions {
  command: string;
  replayBufferBytes: number;
  stdinTimeoutMs: number;
  /** Most stdin bytes accepted and not yet in the pipe at once (429 past it). */
  stdinQueueLimitBytes: number;
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
    launched.stderr.on('data', (d: Buffer) => this.output.append('stderr', d));
    this.stdin = new StdinWriter(launched.stdin, {
      processId: this.id,
      timeoutMs: opts.stdinTimeoutMs,
      maxQueuedBytes: opts.stdinQueueLimitBytes,
      exited: launched.exit,
      onWritten: (n) => opts.metrics.stdinBytes.inc(n),
    });
    this.exited = launched.exit.then((info) => {
      this.exitInfo = info;
      this.exitedAt = new Date();
      this.stdin.processExited();
      opts.log.info(
        { event: 'process_exited', child_pid: this.pid, process_id: this.id, code: info.exit_code, signal: info.signal, group_alive: !group.ended },
        'process exited',
      );
      void outputSettled(launched, OUTPUT_GRACE_MS).then(() => this.output.finish(info));
      return info;
    });
    this.done = Promise.all([this.exited, group.gone]).then(() => {});
  }

  get running(): boolean {
    return this.exitInfo === null;
  }

  get user(): string {
    return this.launched.user.name;
  }

  status(): ProcessStatus {
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
    };
  }

  /**
   * Signals the whole group: while the process runs, and after its exit while members it left in
   * its group live. 409 process_exited once nothing of the group is left.
   */
  kill(signal: GroupSignal): void {
    if (!this.group.signal(signal)) {
      throw new ConflictError('process_exited', `process ${this.id} has already exited and nothing of its process group is left`);
    }
  }

  /** Queues stdin data; see StdinWriter.write. 409 process_exited once the child has exited. */
  writeStdin(data: Buffer, close: boolean): Promise<number> {
    if (this.exitInfo !== null) throw new ConflictError('process_exited', `process ${this.id} has exited`);
    return this.stdin.write(data, close);
  }
}
