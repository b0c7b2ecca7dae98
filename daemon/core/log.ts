// pino JSON lines on stdout, for journald. Field names an operator filters on:
// event, req_id, route, status, ms, pid, key_id. No token is ever a field.
import { pino, stdTimeFunctions, type DestinationStream, type Logger } from 'pino';

export type { Logger };

/**
 * `tap` sees every line as written (at the configured level, redacted, without its newline), after
 * the destination got it: the log stream's ring of recent lines. It must not log.
 */
export function createLogger(level: string, destination?: NodeJS.WritableStream, tap?: (line: string) => void): Logger {
  const dest: DestinationStream = destination ?? pino.destination({ dest: 1, sync: true });
  const stream: DestinationStream =
    tap === undefined
      ? dest
      : {
          write(line: string) {
            dest.write(line);
            tap(line.endsWith('\n') ? line.slice(0, -1) : line);
          },
        };
  return pino(
    {
      level,
      // No pid/hostname base: journald records both, and `pid` is kept for child processes.
      base: undefined,
      timestamp: stdTimeFunctions.isoTime,
      redact: { paths: ['token', '*.token', 'authorization', '*.authorization', 'password', '*.password'], censor: '[redacted]' },
    },
    stream,
  );
}
