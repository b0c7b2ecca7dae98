// pino JSON lines on stdout, for journald. Field names an operator filters on:
// event, req_id, route, status, ms, pid, key_id. No token is ever a field.
import { pino, stdTimeFunctions, type Logger } from 'pino';

export type { Logger };

export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  return pino(
    {
      level,
      // No pid/hostname base: journald records both, and `pid` is kept for child processes.
      base: undefined,
      timestamp: stdTimeFunctions.isoTime,
      redact: { paths: ['token', '*.token', 'authorization', '*.authorization', 'password', '*.password'], censor: '[redacted]' },
    },
    destination ?? pino.destination({ dest: 1, sync: true }),
  );
}
