// One spawned process as the API sees it: its id, its output (replay buffer), its stdin queue,
// and its exit. The exit event of the output comes only after both output streams have ended (or
// a short grace past the exit, when a grandchild keeps the pipes open), so it is always last.
import type { Logger } from '../core/log.js';
import type { Metrics } from '../core/metrics.js';
import { ConflictError } from '../http/errors.js';
import { ReplayBuffer, type ExitInfo } from './replay-buffer.js';
import { outputSettled, signalGroup, type GroupSignal, type Launched } from './spawn.js';
import { StdinWriter } from './stdin-writer.js';

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
  command: string;
  as_user: string;
}

export interface ManagedProcessOptions {
  command: string;
  replayBufferBytes: number;
  stdinTimeoutMs: number;
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
  private exitInfo: ExitInfo | null = null;
  private exitedAt: Date | null = null;

  constructor(
    /** A random UUID. */
    readonly id: string,
    private readonly launched: Launched,
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
      exited: launched.exit,
      onWritten: (n) => opts.metrics.stdinBytes.inc(n),
    });
    this.exited = launched.exit.then((info) => {
      this.exitInfo = info;
      this.exitedAt = new Date();
      this.stdin.processExited();
      opts.log.info(
        { event: 'process_exited', pid: this.pid, process_id: this.id, code: info.exit_code, signal: info.signal },
        'process exited',
      );
      void outputSettled(launched, OUTPUT_GRACE_MS).then(() => this.output.finish(info));
      return info;
    });
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
      command: this.opts.command,
      as_user: this.launched.user.name,
    };
  }

  /** Signals the whole group; 409 process_exited once the child has exited. */
  kill(signal: GroupSignal): void {
    if (this.exitInfo !== null) throw new ConflictError('process_exited', `process ${this.id} has already exited`);
    signalGroup(this.pgid, signal);
  }

  /** Queues stdin data; see StdinWriter.write. 409 process_exited once the child has exited. */
  writeStdin(data: Buffer, close: boolean): Promise<number> {
    if (this.exitInfo !== null) throw new ConflictError('process_exited', `process ${this.id} has exited`);
    return this.stdin.write(data, close);
  }
}
