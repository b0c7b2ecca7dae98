// Request and response shapes of the process routes: the same zod schemas validate requests and
// generate the OpenAPI document.
import { z } from 'zod';

/** exec's `timeout_sec` when the request gives none, and the most it may ask for. */
export const EXEC_DEFAULT_TIMEOUT_SEC = 60;
export const EXEC_MAX_TIMEOUT_SEC = 3600;

const noNul = (s: string): boolean => !s.includes('\0');

const launchFields = {
  command: z
    .string()
    .min(1)
    .max(4096)
    .refine(noNul, 'must not contain NUL')
    .describe('The program: an absolute path, or a name looked up in PATH (of the child environment). No shell is involved; use ["sh", "-c", "..."] for one.'),
  args: z.array(z.string().refine(noNul, 'must not contain NUL')).max(100_000).optional().describe('Arguments, passed as they are.'),
  cwd: z
    .string()
    .startsWith('/', 'must be an absolute path')
    .refine(noNul, 'must not contain NUL')
    .optional()
    .describe('Working directory; must exist. Default: the home directory of the user the process runs as, else /.'),
  env: z
    .record(z.string().regex(/^[^=\0]+$/, 'a variable name must be non-empty and hold neither = nor NUL'), z.string().refine(noNul, 'must not contain NUL'))
    .optional()
    .describe(
      'Merged over a minimal environment: PATH, LANG and TZ of the daemon, HOME, USER, LOGNAME and SHELL of the user. ' +
        "The daemon's own environment is never passed on.",
    ),
  as_user: z
    .string()
    .min(1)
    .max(256)
    .optional()
    .describe('Run as this user of /etc/passwd (uid, primary gid, HOME, USER, LOGNAME); unknown user: 400. Supplementary groups are not applied.'),
};

export const spawnBody = z.strictObject(launchFields);

export const execBody = z.strictObject({
  ...launchFields,
  timeout_sec: z
    .number()
    .positive()
    .max(EXEC_MAX_TIMEOUT_SEC)
    .optional()
    .describe(`Deadline in seconds (fractions allowed; default ${EXEC_DEFAULT_TIMEOUT_SEC}, at most ${EXEC_MAX_TIMEOUT_SEC}). At the deadline the whole process group gets SIGKILL and timed_out is true.`),
  stdin_b64: z.string().optional().describe('Strict base64 written to stdin, then EOF (EOF at once without it). Limit: BROWSERD_STDIN_LIMIT_BYTES decoded, else 413.'),
});

export const stdinBody = z.strictObject({
  data_b64: z.string().describe('Strict base64 (A-Z a-z 0-9 + /, = padding, no whitespace); at most BROWSERD_STDIN_LIMIT_BYTES decoded, else 413.'),
  close: z.boolean().optional().describe('Send EOF after this data; later requests get 409 stdin_closed.'),
});

export const killBody = z.strictObject({
  signal: z.enum(['TERM', 'KILL', 'INT', 'HUP']).optional().describe('Default TERM. Sent to the whole process group.'),
});

export const statusSchema = z.object({
  process_id: z.string(),
  pid: z.number().int(),
  state: z.enum(['running', 'exited']),
  exit_code: z.number().int().nullable(),
  signal: z.string().nullable().describe('The signal that ended the process, e.g. "SIGKILL"; null when it exited by itself or runs.'),
  started_at: z.string(),
  exited_at: z.string().nullable(),
  group_alive: z
    .boolean()
    .describe(
      'true while any member of the process group lives. Processes the process left in its group may outlive it: then state is ' +
        'exited and group_alive true; kill still reaches them and they count toward BROWSERD_MAX_PROCESSES.',
    ),
  command: z.string(),
  as_user: z.string().describe('The user the process runs as.'),
});

export const listSchema = z.object({ processes: z.array(statusSchema).describe('Running processes and exited ones still retained, oldest first.') });

export const spawnResult = z.object({ process_id: z.string(), pid: z.number().int(), started_at: z.string() });

export const execResult = z.object({
  exit_code: z.number().int().nullable(),
  signal: z.string().nullable(),
  stdout_b64: z.string(),
  stderr_b64: z.string(),
  duration_ms: z.number(),
  timed_out: z.boolean(),
  stdout_truncated_bytes: z.number().int().describe('Bytes of stdout past BROWSERD_EXEC_OUTPUT_LIMIT_BYTES: counted, not kept.'),
  stderr_truncated_bytes: z.number().int().describe('Bytes of stderr past BROWSERD_EXEC_OUTPUT_LIMIT_BYTES: counted, not kept.'),
  pid: z.number().int(),
});

export const stdinResult = z.object({ written_bytes: z.number().int().describe('Bytes of this request now in the pipe (all of them).') });

export const killResult = z.object({ ok: z.literal(true) });
