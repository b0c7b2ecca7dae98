// Request and response shapes of the process routes: the same zod schemas validate requests and
// generate the OpenAPI document. Every field the official SDK (@onkernel/sdk 0.84,
// resources/browsers/process.d.ts) declares is accepted; `null` for a nullable field means "not given".
import { z } from 'zod';
import { lazy } from '../core/lazy.js';

/** The path every process route starts with. */
export const PROCESS_BASE = '/browsers/{id}/process';

/** exec's `timeout_sec` when the request gives none, and the most it may ask for. */
export const EXEC_DEFAULT_TIMEOUT_SEC = 60;
export const EXEC_MAX_TIMEOUT_SEC = 3600;
/** spawn's `timeout_sec` at most (24 days: what a timer can hold). */
const SPAWN_MAX_TIMEOUT_SEC = 24 * 86_400;
/** A terminal's size: the default and the range of rows and cols. */
export const TTY_DEFAULT_COLS = 80;
export const TTY_DEFAULT_ROWS = 24;
export const TTY_MAX_SIZE = 1000;

const noNul = (s: string): boolean => !s.includes('\0');
/** An unpaired UTF-16 surrogate ("\ud800" is valid JSON) has no UTF-8 form: argv and environ are bytes. */
const wellFormed = (s: string): boolean => !/[\uD800-\uDFFF]/u.test(s);
const NOT_UNICODE = 'must be valid Unicode: an unpaired surrogate (such as \\ud800) has no UTF-8 form for the process';

/** A string handed to the child (argv, environ, a path, a user name): no NUL, valid Unicode. */
const childText = () => z.string().refine(noNul, 'must not contain NUL').refine(wellFormed, NOT_UNICODE);

/**
 * The environment: zod drops a `__proto__` key of a record without a word (assigning it to a
 * plain object would replace the prototype), so it is refused before zod sees it.
 */
const envSchema = lazy(() => z
  .preprocess(
    (v, ctx) => {
      if (v !== null && typeof v === 'object' && Object.hasOwn(v, '__proto__')) {
        ctx.addIssue({ code: 'custom', message: 'the variable name __proto__ is refused (it cannot be carried safely)', path: ['__proto__'], input: v });
      }
      return v;
    },
    // Names are checked here rather than by a key schema, whose failures zod reports only as "Invalid key in record".
    z.record(z.string(), childText()).superRefine((env, ctx) => {
      for (const name of Object.keys(env)) {
        if (!/^[^=\0]+$/.test(name)) ctx.addIssue({ code: 'custom', message: 'a variable name must be non-empty and hold neither = nor NUL', path: [name] });
        else if (!wellFormed(name)) ctx.addIssue({ code: 'custom', message: `the variable name ${NOT_UNICODE}`, path: [name] });
      }
    }),
  )
  .optional()
  .describe(
    'Merged over a minimal environment: PATH, LANG and TZ of the daemon, HOME, USER, LOGNAME and SHELL of the user (and TERM=xterm-256color ' +
      "for a terminal). The daemon's own environment is never passed on. The name __proto__ is refused (400).",
  ));

const launchFields = lazy(() => ({
  command: childText()
    .min(1)
    .max(4096)
    .describe('The program: an absolute path, or a name looked up in PATH (of the child environment). No shell is involved; use ["sh", "-c", "..."] for one.'),
  args: z.array(childText()).max(100_000).optional().describe('Arguments, passed as they are.'),
  cwd: childText()
    .startsWith('/', 'must be an absolute path')
    .nullable()
    .optional()
    .describe('Working directory; must exist. Default (also null): the home directory of the user the process runs as, else /.'),
  env: envSchema(),
  as_user: childText()
    .min(1)
    .max(256)
    .nullable()
    .optional()
    .describe(
      'Run as this user of /etc/passwd (uid, gid, its supplementary groups, HOME, USER, LOGNAME) instead of the agent user (BROWSERD_AGENT_USER, ' +
        'the default); unknown user: 400; a daemon that may not switch users (neither root nor CAP_SETUID and CAP_SETGID): 400. Root (any uid 0) ' +
        'or the daemon\'s own user needs the scope processes:root (403 forbidden otherwise). null: not given.',
    ),
  as_root: z
    .boolean()
    .optional()
    .describe(
      'true: run as root. Needs the scope processes:root (403 forbidden otherwise) and a daemon that is root or holds CAP_SETUID and ' +
        'CAP_SETGID (as under the shipped systemd unit); else 422 unsupported_field naming as_root, and the command never runs as someone ' +
        'else. With as_user also given: 400. false: as if not given.',
    ),
}));

export const spawnBody = lazy(() => z.strictObject({
  ...launchFields(),
  timeout_sec: z
    .number()
    .positive()
    .max(SPAWN_MAX_TIMEOUT_SEC)
    .nullable()
    .optional()
    .describe(
      `Deadline in seconds from the start (fractions allowed; at most ${SPAWN_MAX_TIMEOUT_SEC}). At the deadline the whole process group ` +
        '(and every group made in its session) gets SIGKILL; status then says timed_out true. null or left out: no deadline.',
    ),
  allocate_tty: z
    .boolean()
    .optional()
    .describe(
      'true: run on a pseudo-terminal of rows × cols in its own session (the terminal is its controlling terminal: job control, Ctrl-C as ' +
        '\\x03 on stdin, isatty true). Output is one stream (stdout) with the terminal\'s echo and CR LF line ends; stdin goes through the ' +
        'terminal\'s line discipline; resize and attach work only on such a process.',
    ),
  rows: z
    .number()
    .int()
    .min(1)
    .max(TTY_MAX_SIZE)
    .optional()
    .describe(`Initial terminal rows (default ${TTY_DEFAULT_ROWS}, 1-${TTY_MAX_SIZE}). As the SDK declares, used only when allocate_tty is true (checked either way).`),
  cols: z
    .number()
    .int()
    .min(1)
    .max(TTY_MAX_SIZE)
    .optional()
    .describe(`Initial terminal columns (default ${TTY_DEFAULT_COLS}, 1-${TTY_MAX_SIZE}). As the SDK declares, used only when allocate_tty is true (checked either way).`),
}));

export const execBody = lazy(() => z.strictObject({
  ...launchFields(),
  timeout_sec: z
    .number()
    .positive()
    .max(EXEC_MAX_TIMEOUT_SEC)
    .nullable()
    .optional()
    .describe(
      `Deadline in seconds (fractions allowed; default ${EXEC_DEFAULT_TIMEOUT_SEC}, also for null; at most ${EXEC_MAX_TIMEOUT_SEC}). ` +
        'At the deadline the whole process group gets SIGKILL and timed_out is true.',
    ),
  stdin_b64: z
    .string()
    .optional()
    .describe('Strict base64 written to stdin, then EOF (EOF at once without it). At most BROWSERD_STDIN_LIMIT_BYTES decoded, else 413 naming that setting.'),
}));


export const stdinBody = lazy(() => z.strictObject({
  data_b64: z
    .string()
    .describe('Strict base64 (A-Z a-z 0-9 + /, = padding, no whitespace); at most BROWSERD_STDIN_LIMIT_BYTES decoded, else 413 naming that setting.'),
  close: z
    .boolean()
    .optional()
    .describe(
      'Send EOF after this data; later requests get 409 stdin_closed. On a terminal (allocate_tty) EOF is the EOF key: ^D (\\x04) is written ' +
        'after the data, as typing Ctrl-D, and stdin stays open (a terminal has no one-way close).',
    ),
}));

export const killBody = lazy(() => z.strictObject({
  signal: z.enum(['TERM', 'KILL', 'INT', 'HUP']).optional().describe('Default TERM. Sent to the whole process group and every group made in its session.'),
}));

export const resizeBody = lazy(() => z.strictObject({
  rows: z.number().int().min(1).max(TTY_MAX_SIZE).describe(`Terminal rows, 1-${TTY_MAX_SIZE}.`),
  cols: z.number().int().min(1).max(TTY_MAX_SIZE).describe(`Terminal columns, 1-${TTY_MAX_SIZE}.`),
}));

export const okResult = lazy(() => z.object({ ok: z.literal(true) }));

const ttySize = lazy(() => z.object({ rows: z.number().int(), cols: z.number().int() }));

export const statusSchema = lazy(() => z.object({
  process_id: z.string(),
  pid: z.number().int(),
  state: z.enum(['running', 'exited']),
  exit_code: z.number().int().nullable().describe('The exit code; null while running and when a signal ended the process (see signal).'),
  signal: z.string().nullable().describe('The signal that ended the process, e.g. "SIGKILL"; null when it exited by itself or runs.'),
  started_at: z.string(),
  exited_at: z.string().nullable(),
  group_alive: z
    .boolean()
    .describe(
      'true while any member of the process group (or of a group made in its session) lives. Processes the process left behind may outlive ' +
        'it: then state is exited and group_alive true; kill still reaches them and they count toward BROWSERD_MAX_PROCESSES.',
    ),
  command: z.string(),
  as_user: z.string().describe('The user the process runs as.'),
  tty: ttySize().nullable().describe('The terminal size of a process spawned with allocate_tty (after any resize); null for pipes.'),
  timeout_at: z.string().nullable().describe('When the spawn timeout_sec deadline falls (the group gets SIGKILL then); null without one.'),
  timed_out: z.boolean().describe('true once the deadline was reached and the group got SIGKILL.'),
  cpu_pct: z
    .number()
    .optional()
    .describe('While members of the group live: their CPU time over the time since the process started, in percent of one core (like ps %CPU).'),
  mem_bytes: z.number().int().optional().describe('While members of the group live: the sum of their resident memory, in bytes.'),
}));

export const listSchema = lazy(() => z.object({ processes: z.array(statusSchema()).describe('Running processes and exited ones still retained, oldest first.') }));

export const spawnResult = lazy(() => z.object({ process_id: z.string(), pid: z.number().int(), started_at: z.string() }));

export const execResult = lazy(() => z.object({
  exit_code: z.number().int().nullable().describe('null when a signal ended the command (see signal).'),
  signal: z.string().nullable(),
  stdout_b64: z.string(),
  stderr_b64: z.string(),
  duration_ms: z.number(),
  timed_out: z.boolean(),
  stdout_truncated_bytes: z.number().int().describe('Bytes of stdout past BROWSERD_EXEC_OUTPUT_LIMIT_BYTES: counted, not kept.'),
  stderr_truncated_bytes: z.number().int().describe('Bytes of stderr past BROWSERD_EXEC_OUTPUT_LIMIT_BYTES: counted, not kept.'),
  pid: z.number().int(),
}));

export const stdinResult = lazy(() => z.object({
  written_bytes: z
    .number()
    .int()
    .describe(
      'Bytes of this request now in the kernel (all of them): in the pipe, or for a terminal in its input queue, where the line discipline ' +
        'applies (echo, ^C, and in canonical mode a line past 4095 bytes is cut by the kernel).',
    ),
}));
