// The session's one REPL: a worker process (worker/main.ts) started at the first call, kept between
// calls (its globals are the REPL's state) and asked one call at a time, in the order they came.
// Its repl_id names that state: a timeout, a crash or its heap limit (the process is killed or is
// gone) and `reset` give a new repl_id, and the next call starts a new worker. A client that goes
// away does not stop its call (the timeout still does): the state stays whole.
import { randomUUID } from 'node:crypto';
import { SerialQueue } from '../core/serial-queue.js';
import type { Execution, RunnerPool, RunnerProcess } from '../playwright/index.js';
import type { ContentItem } from './worker/content.js';

export interface ReplAnswer {
  success: boolean;
  repl_id: string;
  error?: string;
  stack?: string;
  content: ContentItem[];
  content_truncated?: boolean;
  repl_terminated?: boolean;
  duration_ms: number;
}

/** What the worker's `result` carries (worker/main.ts). */
interface CellResult {
  content: ContentItem[];
  content_truncated: boolean;
}

const NEVER = new AbortController().signal;

function exitText(exit: { code: number | null; signal: string | null }, stderrTail: string[]): string {
  const how = exit.signal !== null ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
  const fatal = stderrTail.filter((l) => /FATAL ERROR|out of memory/i.test(l));
  const tail = (fatal.length > 0 ? fatal : stderrTail.filter((l) => l.trim() !== '')).slice(-3).join(' | ').slice(0, 1000);
  return `the REPL process ${how} during the call${tail === '' ? '' : ` (its stderr: ${tail})`}; its state is gone: the next call starts a new one`;
}

/** The text a killed worker had written (its result never came). */
function streamed(e: Execution): ContentItem[] {
  const items: ContentItem[] = [];
  if (e.stdout !== '') items.push({ type: 'text', channel: 'stdout', text: e.stdout });
  if (e.stderr !== '') items.push({ type: 'text', channel: 'stderr', text: e.stderr });
  return items;
}

export class ReplSession {
  private runner: RunnerProcess | null = null;
  private id = randomUUID();
  private readonly calls = new SerialQueue();

  constructor(private readonly pool: RunnerPool) {}

  run(code: string, timeoutMs: number, reset: boolean): Promise<ReplAnswer> {
    return this.calls.run(async () => {
      const t0 = performance.now();
      if (reset) this.renew();
      if (this.runner !== null && !this.runner.alive) this.renew(); // it died between calls: its state is gone
      this.runner ??= await this.pool.startNamed();
      const e = await this.runner.execute(code, timeoutMs, NEVER);
      const o = e.outcome;
      const duration_ms = Math.round(performance.now() - t0);
      if (o.kind === 'answer') {
        const r = (o.message.result ?? { content: [], content_truncated: false }) as CellResult;
        const m = o.message as typeof o.message & { stack?: string };
        return {
          success: m.success,
          repl_id: this.id,
          ...(m.error === undefined ? {} : { error: m.error }),
          ...(m.stack === undefined ? {} : { stack: m.stack }),
          content: r.content,
          ...(r.content_truncated ? { content_truncated: true } : {}),
          duration_ms,
        };
      }
      const error =
        o.kind === 'timeout'
          ? `timed out: the call did not finish within ${timeoutMs / 1000} s (timeout_sec); the REPL process was killed and its state is gone: the next call starts a new one`
          : o.kind === 'exited'
            ? exitText(o.exit, o.stderrTail)
            : 'the call was abandoned; the REPL process was killed';
      this.renew();
      return { success: false, repl_id: this.id, error, content: streamed(e), ...(e.stdoutTruncated + e.stderrTruncated > 0 ? { content_truncated: true } : {}), repl_terminated: true, duration_ms };
    });
  }

  /** Ends the worker (if any) and names the next state. */
  private renew(): void {
    this.runner?.kill();
    this.runner = null;
    this.id = randomUUID();
  }
}
