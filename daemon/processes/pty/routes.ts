// The terminal routes: resize (as the SDK declares it) and the WebSocket attach (attach.ts).
import { z } from 'zod';
import { ConflictError } from '../../core/errors.js';
import { qBool } from '../../http/query.js';
import type { Route, UpgradeContext } from '../../http/router.js';
import { routesIn } from '../../http/route.js';
import type { ProcessRouteDeps } from '../routes.js';
import { okResult, PROCESS_BASE as P, resizeBody, TTY_MAX_SIZE } from '../schemas.js';
import { CLOSE_PROCESS_EXITED, INPUT_PAUSE_BYTES, SEND_BUFFER_BYTES } from './attach.js';

const route = routesIn('daemon/processes/pty/routes.ts');

const MiB = 1024 * 1024;

export function ptyRoutes(deps: ProcessRouteDeps): Route[] {
  return [
    route({
      method: 'POST',
      path: `${P}/{process_id}/resize`,
      scope: 'processes:write',
      doc: () => ({
        summary: 'Resize the terminal of a process spawned with allocate_tty',
        description:
          `Sets the terminal's size (rows and cols 1-${TTY_MAX_SIZE}, TIOCSWINSZ); the kernel sends SIGWINCH to its foreground job, and status ` +
          'shows the new size. 409 not_a_tty for a process without a terminal, 409 process_exited once the process has exited (its terminal is closed).',
        body: resizeBody(),
        responses: { 200: { description: 'resized', schema: okResult() } },
        errors: [409],
      }),
      handler: async (ctx) => {
        const proc = deps.lookup(ctx);
        const body = ctx.body;
        proc.resize(body.rows, body.cols);
        ctx.log.info({ event: 'process_resized', child_pid: proc.pid, process_id: proc.id, rows: body.rows, cols: body.cols }, 'terminal resized');
        return { status: 200, body: { ok: true } };
      },
    }),
    route({
      method: 'GET',
      path: `${P}/{process_id}/attach`,
      scope: 'processes:write',
      doc: () => ({
        summary: 'WebSocket: attach to the terminal of a process spawned with allocate_tty',
        description:
          'Binary frames in are stdin (as the stdin route: one queue per process, each frame lands whole and in order); binary frames out are the ' +
          'output; a text frame {"type":"resize","rows":…,"cols":…} resizes the terminal (a text frame that is not a valid control message gets a ' +
          'text frame {"type":"error","message":…} back and the connection stays). Several clients may attach at once; every one may write ' +
          'and every one gets all output. The output starts with what the replay buffer (BROWSERD_OUTPUT_BUFFER_BYTES) holds, or with what ' +
          'comes next with ?replay=false. Close codes: ' +
          `${CLOSE_PROCESS_EXITED} once the process has exited and all its output was sent, the reason {"exit_code":…,"signal":…}; ` +
          '1001 when the daemon stops; 1009 for a frame over BROWSERD_STDIN_LIMIT_BYTES; 1013 for a client that reads so slowly that the ' +
          `replay buffer dropped output not yet sent to it (a client holds at most ${SEND_BUFFER_BYTES / MiB} MiB unsent before it waits), or ` +
          `that keeps writing while the process does not read (past ${INPUT_PAUSE_BYTES / MiB} MiB queued its socket is not read; past the ` +
          'stdin queue cap of 4 × BROWSERD_STDIN_LIMIT_BYTES it is closed). The same scope as stdin (processes:write). 409 not_a_tty for a ' +
          'process without a terminal (pipes have the stdin and stdout/stream routes).',
        query: z.strictObject({ replay: qBool('false: only output from now on; default true: first what the replay buffer holds') }),
        responses: { 101: { description: 'Switching Protocols: attached' } },
        errors: [400, 409],
      }),
      upgrade: (ctx: UpgradeContext) => {
        try {
          const proc = deps.table.get(ctx.params.process_id);
          if (!proc.isTty) throw new ConflictError('not_a_tty', `process ${proc.id} has no terminal (spawn it with allocate_tty: true)`);
          deps.attach.handle(ctx, proc, ctx.query.replay !== false);
        } catch (err) {
          ctx.refuse(err);
        }
      },
    }),
  ];
}
