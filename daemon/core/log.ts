// pino JSON lines on stdout, for journald. Field names an operator filters on:
// event, req_id, route, status, ms, pid, key_id. No token is ever a field, and a session token
// (a JWT, or the value of a `jwt=` URL parameter) anywhere in a line is replaced by [redacted]
// before the line leaves the process (redactTokens): a URL a handler or Chromium logs included.
//
// Access-log lines (`"event":"request"`) are written together once per turn of the event loop
// (setImmediate), not one write(2) each: under load a turn logs one for each of many requests, and
// a write per line was the largest single cost of a small request (~10% of the CPU of a 1 KiB stdin
// write). Every other line is written at once, after what is pending (the order is kept): a line
// logged before an answer is sent is on stdout before the answer is on the socket, as a reader of
// both (an operator, a test) expects. flushLogs() writes what is pending (before a crash line, at exit).
import { pino, stdTimeFunctions, type DestinationStream, type Logger } from 'pino';

export type { Logger };

/** Every line buffer of stdout in this process (one per logger made without a destination). */
const buffers = new Set<TurnBuffer>();

/** Writes what every logger of this process still holds. Synchronous. */
export function flushLogs(): void {
  for (const b of buffers) b.flush();
}

process.on('exit', flushLogs);

/** How an access-log line is recognised in pino's output (its first field after the base ones). */
const ACCESS_LINE = '"event":"request"';

/** Lines collected during one turn of the event loop, written in one call at its end. */
export class TurnBuffer implements DestinationStream {
  private pending: string[] = [];
  private scheduled = false;

  constructor(private readonly dest: DestinationStream & { flushSync?: () => void }) {
    buffers.add(this);
  }

  write(line: string): void {
    if (!line.includes(ACCESS_LINE)) {
      this.flush();
      this.dest.write(line);
      return;
    }
    this.pending.push(line);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.flush());
  }

  flush(): void {
    this.scheduled = false;
    if (this.pending.length === 0) return;
    const text = this.pending.length === 1 ? (this.pending[0] as string) : this.pending.join('');
    this.pending = [];
    this.dest.write(text);
  }
}

/**
 * `tap` sees every line as written (at the configured level, redacted, without its newline), after
 * the destination got it: the log stream's ring of recent lines. It must not log.
 */
/** A JWT (`eyJ…` header and payload: `{"` in base64url), or what follows `jwt=` in a URL. */
const JWT_RE = /eyJ[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*/g;
const JWT_PARAM_RE = /([?&;]jwt=)[^&\s"'\\]+/gi;

/** `line` with every session token in it replaced by [redacted] (cheap when there is none). */
export function redactTokens(line: string): string {
  let out = line;
  if (out.includes('eyJ')) out = out.replace(JWT_RE, '[redacted]');
  if (/jwt=/i.test(out)) out = out.replace(JWT_PARAM_RE, '$1[redacted]');
  return out;
}

export function createLogger(level: string, destination?: NodeJS.WritableStream, tap?: (line: string) => void): Logger {
  const dest: DestinationStream = destination ?? new TurnBuffer(pino.destination({ dest: 1, sync: true }));
  const stream: DestinationStream = {
    write(raw: string) {
      const line = redactTokens(raw);
      dest.write(line);
      if (tap !== undefined) tap(line.endsWith('\n') ? line.slice(0, -1) : line);
    },
  };
  return pino(
    {
      level,
      // No pid/hostname base: journald records both, and `pid` is kept for child processes.
      base: undefined,
      timestamp: stdTimeFunctions.isoTime,
      redact: { paths: ['token', '*.token', 'jwt', '*.jwt', 'authorization', '*.authorization', 'password', '*.password'], censor: '[redacted]' },
    },
    stream,
  );
}
