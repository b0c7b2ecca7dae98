// One Playwright runner as the daemon sees it: a child started with the daemon's launcher (its own
// process group, the minimal environment of the processes API, its own cwd in the user's home),
// given its CDP token on stdin, and asked to run one execution at a time. The daemon enforces the
// timeout: SIGKILL to the whole group. What the runner itself writes to its stdout and stderr
// (outside executions, or Node's own fatal errors) is logged at debug; the last lines of its
// stderr explain an exit in the answer.
import { setTimeout as sleep } from 'node:timers/promises';
import { launch, type Child, type ExitInfo } from '../core/process/launch.js';
import type { SwitchTo } from '../core/users.js';
import { endGroups, signalGroup } from '../core/process/group.js';
import type { Logger } from '../core/log.js';
import { ANSWER_FD, type FromRunner, type HelloMessage, type ResultMessage, type ToRunner } from './protocol.js';


/** Lines of the runner's own stderr kept to explain its exit. */
const STDERR_TAIL_LINES = 40;
/** Lines of the runner's own output logged per runner (the rest is counted). */
const LOGGED_LINES = 200;
/** After SIGKILL, how long the group is waited for. */
const KILL_WAIT_MS = 2000;
/** After the runner exited, how long its answer pipe is still read. */
const ANSWERS_AFTER_EXIT_MS = 1000;

interface RunnerSpec {
  /** The runner program (dist/daemon/playwright/runner/main.js). */
  script: string;
  env: Record<string, string>;
  cwd: string;
  /** The agent user, when it is not the daemon's (setpriv: core/users.ts). */
  user?: SwitchTo;
  /** Removes what the runner's setup made for it (its TMPDIR), asynchronously; called once it has ended. Never rejects. */
  cleanup(): Promise<void>;
  maxHeapMb: number;
  hello: HelloMessage;
  log: Logger;
}

/** Output of one execution, kept up to the limit per stream; the rest counted. */
class Output {
  readonly text = { stdout: '', stderr: '' };
  private readonly bytes = { stdout: 0, stderr: 0 };
  readonly dropped = { stdout: 0, stderr: 0 };

  constructor(private readonly limit: number) {}

  add(stream: 'stdout' | 'stderr', data: string): void {
    const n = Buffer.byteLength(data);
    if (this.bytes[stream] + n <= this.limit) {
      this.text[stream] += data;
      this.bytes[stream] += n;
    } else {
      this.dropped[stream] += n;
    }
  }
}

type Outcome =
  | { kind: 'answer'; message: ResultMessage }
  | { kind: 'timeout' }
  | { kind: 'exited'; exit: ExitInfo; stderrTail: string[] }
  | { kind: 'abandoned' };

export interface Execution {
  outcome: Outcome;
  stdout: string;
  stderr: string;
  stdoutTruncated: number;
  stderrTruncated: number;
}

export class RunnerProcess {
  private seq = 0;
  private onAnswer: ((msg: FromRunner) => void) | null = null;
  private readonly stderrTail: string[] = [];
  private logged = 0;
  private killed = false;
  /** Set once `ended` resolved. */
  private endedWith: ExitInfo | null = null;
  /** The execution under way, told when the runner ends (one at a time: no closure per execution is kept). */
  private onEnded: ((exit: ExitInfo) => void) | null = null;
  /** Resolves when the runner has exited and its answer pipe is read to the end. */
  readonly ended: Promise<ExitInfo>;

  private constructor(
    private readonly child: Child,
    private readonly spec: RunnerSpec,
  ) {
    const answers = child.extra[0];
    if (answers === undefined) throw new Error('the runner was started without its answer pipe');
    const limit = spec.hello.result_limit_bytes + 12 * spec.hello.output_limit_bytes + 1024 * 1024;
    const reader = new LineReader(limit, (line) => this.receive(line), () => {
      spec.log.error({ event: 'playwright_runner_protocol', child_pid: child.pid }, `the runner sent a line over ${limit} bytes: killing it`);
      this.kill();
    });
    answers.on('data', (chunk: Buffer) => reader.push(chunk));
    const answersEnded = new Promise<void>((resolve) => {
      answers.once('end', resolve);
      answers.once('close', resolve);
    });
    for (const stream of ['stdout', 'stderr'] as const) {
      let pending = '';
      child[stream].setEncoding('utf8');
      child[stream].on('data', (chunk: string) => {
        pending += chunk;
        const lines = pending.split('\n');
        pending = (lines.pop() ?? '').slice(-4096);
        for (const line of lines) this.ownLine(stream, line);
      });
      child[stream].on('end', () => pending !== '' && this.ownLine(stream, pending));
    }
    // A process the runner started may hold the answer pipe open after the runner exited: 1 s at most.
    const pipeDone = Promise.race([answersEnded, child.exit.then(() => sleep(ANSWERS_AFTER_EXIT_MS))]);
    this.ended = Promise.all([child.exit, pipeDone]).then(([exit]) => {
      void spec.cleanup();
      this.endedWith = exit;
      this.onEnded?.(exit);
      return exit;
    });
  }

  /** Starts a runner and hands it its token and limits (stdin: never argv, never the environment). */
  static async start(spec: RunnerSpec): Promise<RunnerProcess> {
    let child;
    try {
      child = await launch({
        command: process.execPath,
        // The type stripping (compile.ts) is marked experimental in Node 24: its warning would land in every execution's stderr.
        args: [`--max-old-space-size=${spec.maxHeapMb}`, '--disable-warning=ExperimentalWarning', spec.script],
        env: spec.env,
        cwd: spec.cwd,
        ...(spec.user === undefined ? {} : { user: spec.user }),
        stdin: 'pipe',
        extraPipes: ANSWER_FD - 2,
      });
    } catch (err) {
      void spec.cleanup();
      throw err;
    }
    const runner = new RunnerProcess(child, spec);
    runner.write(spec.hello);
    return runner;
  }

  get pid(): number {
    return this.child.pid;
  }

  get alive(): boolean {
    return this.child.exitInfo === null && !this.killed;
  }

  /**
   * Runs `code` (one at a time: the pool guarantees it). Ends with the answer, or the timeout (the
   * group is killed), or the runner's exit, or `abandon` (the group is killed).
   */
  execute(code: string, timeoutMs: number, abandon: AbortSignal, targetId?: string): Promise<Execution> {
    const id = ++this.seq;
    const output = new Output(this.spec.hello.output_limit_bytes);
    return new Promise<Execution>((resolve) => {
      let done = false;
      const finish = (outcome: Outcome): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        abandon.removeEventListener('abort', onAbandon);
        this.onAnswer = null;
        this.onEnded = null;
        resolve({ outcome, stdout: output.text.stdout, stderr: output.text.stderr, stdoutTruncated: output.dropped.stdout, stderrTruncated: output.dropped.stderr });
      };
      const onAbandon = (): void => {
        this.kill();
        finish({ kind: 'abandoned' });
      };
      const timer = setTimeout(() => {
        this.kill();
        finish({ kind: 'timeout' });
      }, timeoutMs);
      this.onAnswer = (msg) => {
        if (msg.id !== id) return;
        if (msg.type === 'output') output.add(msg.stream, msg.data);
        else {
          output.dropped.stdout += msg.stdout_truncated_bytes;
          output.dropped.stderr += msg.stderr_truncated_bytes;
          finish({ kind: 'answer', message: msg });
        }
      };
      this.onEnded = (exit) => finish({ kind: 'exited', exit, stderrTail: [...this.stderrTail] });
      if (this.endedWith !== null) return this.onEnded(this.endedWith);
      if (abandon.aborted) return onAbandon();
      abandon.addEventListener('abort', onAbandon, { once: true });
      this.write({ type: 'execute', id, code, ...(targetId === undefined ? {} : { target_id: targetId }) });
    });
  }

  /** SIGKILL to the whole group (the code, whatever the code started). Idempotent. */
  kill(): void {
    this.killed = true;
    if (this.child.exitInfo === null) {
      try {
        signalGroup(this.child.pgid, 'SIGKILL');
      } catch {
        // EPERM: not ours to signal; the leader's exit is awaited anyway
      }
    }
  }

  /**
   * SIGTERM to the group, SIGKILL after `graceMs`; resolves once nothing of it lives and `ended` has
   * resolved (its exit seen and its answer pipe read: whoever awaits `ended` has been told).
   */
  async stop(graceMs: number): Promise<void> {
    this.killed = true;
    this.child.stdin?.end();
    await endGroups([this.child.pgid], graceMs, KILL_WAIT_MS);
    await this.ended;
  }

  private write(msg: ToRunner): void {
    const stdin = this.child.stdin;
    if (stdin === null || stdin.destroyed) return;
    stdin.write(`${JSON.stringify(msg)}\n`);
  }

  private receive(line: string): void {
    let msg: FromRunner;
    try {
      msg = JSON.parse(line) as FromRunner;
    } catch {
      this.spec.log.error({ event: 'playwright_runner_protocol', child_pid: this.child.pid }, 'the runner sent a line that is not JSON: killing it');
      this.kill();
      return;
    }
    this.onAnswer?.(msg);
  }

  private ownLine(stream: 'stdout' | 'stderr', line: string): void {
    if (stream === 'stderr') {
      this.stderrTail.push(line.slice(0, 1000));
      if (this.stderrTail.length > STDERR_TAIL_LINES) this.stderrTail.shift();
    }
    if (++this.logged <= LOGGED_LINES) this.spec.log.debug({ event: 'playwright_runner_output', child_pid: this.child.pid, stream, line: line.slice(0, 1000) }, 'Playwright runner output');
    else if (this.logged === LOGGED_LINES + 1) this.spec.log.debug({ event: 'playwright_runner_output', child_pid: this.child.pid }, `more runner output is not logged (after ${LOGGED_LINES} lines)`);
  }
}

/** Splits the answer pipe into lines, each at most `max` bytes (else `tooLong`, and the line is dropped). */
class LineReader {
  private parts: Buffer[] = [];
  private size = 0;
  private dropping = false;

  constructor(
    private readonly max: number,
    private readonly onLine: (line: string) => void,
    private readonly tooLong: () => void,
  ) {}

  push(chunk: Buffer): void {
    let start = 0;
    for (let nl = chunk.indexOf(10, start); nl >= 0; nl = chunk.indexOf(10, start)) {
      const piece = chunk.subarray(start, nl);
      start = nl + 1;
      if (this.dropping) {
        this.dropping = false;
        continue;
      }
      const line = this.parts.length === 0 ? piece.toString('utf8') : Buffer.concat([...this.parts, piece]).toString('utf8');
      this.parts = [];
      this.size = 0;
      this.onLine(line);
    }
    if (start >= chunk.length || this.dropping) return;
    this.parts.push(chunk.subarray(start));
    this.size += chunk.length - start;
    if (this.size > this.max) {
      this.parts = [];
      this.size = 0;
      this.dropping = true;
      this.tooLong();
    }
  }
}
