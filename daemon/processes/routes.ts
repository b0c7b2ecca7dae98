// The process routes: exec, spawn, list, status and kill here; the output stream (output/),
// stdin (stdin/), resize and attach (pty/) in their folders.
import { randomUUID } from 'node:crypto';
import type { Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import type { Metrics } from '../core/metrics.js';
import { sessionMembers } from '../core/process/group.js';
import type { RequestContext, Route } from '../http/router.js';
import { routesIn } from '../http/route.js';
import { runExec } from './exec.js';
import type { ExecOutputPool } from './exec-output-pool.js';
import { PROCESS_STOP_GRACE_MS, type GroupSet, type ProcessGroup } from './groups/groups.js';
import type { GroupJournal, JournalToken } from './groups/journal.js';
import { launch, type LaunchSpec, type Launched } from './launch/spawn.js';
import { ManagedProcess } from './managed-process.js';
import { outputRoutes } from './output/routes.js';
import { MAX_RETAINED_EXITED, type ProcessTable } from './process-table.js';
import type { AttachHub } from './pty/attach.js';
import { ptyRoutes } from './pty/routes.js';
import {
  EXEC_DEFAULT_TIMEOUT_SEC,
  EXEC_MAX_TIMEOUT_SEC,
  execBody,
  execResult,
  killBody,
  listSchema,
  okResult,
  PROCESS_BASE as P,
  spawnBody,
  spawnResult,
  statusSchema,
  TTY_DEFAULT_COLS,
  TTY_DEFAULT_ROWS,
} from './schemas.js';
import { decodeStdin, readWithStdinLimit, stdinRoutes } from './stdin/routes.js';
import type { StdinBudget } from './stdin/stdin-budget.js';
import { STDIN_QUEUE_FACTOR } from './stdin/stdin-writer.js';

const route = routesIn('daemon/processes/routes.ts');

export interface RouteDeps {
  config: Config;
  log: Logger;
  metrics: Metrics;
  table: ProcessTable;
  groups: GroupSet;
  journal: GroupJournal;
  attach: AttachHub;
  stdinBudget: StdinBudget;
  execOutputPool: ExecOutputPool;
  /** Variables every child gets under the caller's env (the egress policy's proxy variables). */
  extraEnv?(): Record<string, string>;
}


const LAUNCH_TEXT =
  'Runs in its own session and process group; kill, the deadline and shutdown reach that group and every group its members make in the ' +
  'session (a job-control shell, timeout(1)). The group is recorded in <state>/process-groups.log as it starts: a daemon killed with SIGKILL ' +
  'ends what it left at its next start, before it listens. It runs as the agent user (BROWSERD_AGENT_USER) unless as_user says otherwise; ' +
  'as_root, and as_user naming root or the daemon\'s own user, need the scope processes:root (403 otherwise); ' +
  'null for as_user, cwd or timeout_sec means not given. Strings with NUL or an unpaired surrogate, and the env name __proto__, are 400. ';

export function processRoutes(deps: RouteDeps): Route[] {
  const { config, table, groups, journal } = deps;
  const limits = config.processes;

  /** Starts a child in a reserved live slot, recorded in the journal; the slot is freed once no member of its group lives. */
  const start = async (ctx: RequestContext, spec: LaunchSpec, kind: 'spawn' | 'exec', processId?: string): Promise<{ launched: Launched; group: ProcessGroup }> => {
    // At the limit, groups that ended since the last periodic check free their slots first.
    if (table.full) await groups.refresh();
    const release = table.reserve();
    let token: JournalToken | null = null;
    let launched: Launched;
    try {
      const extra = deps.extraEnv?.() ?? {};
      if (Object.keys(extra).length > 0) spec = { ...spec, env: { ...extra, ...spec.env } };
      launched = await launch(spec, (pid) => (token = journal.started(pid)), {
        users: { agent: config.agent.user, maySwitch: config.agent.maySwitch },
        mayRunPrivileged: ctx.identity?.scopes.has('processes:root') === true,
      });
    } catch (err) {
      release();
      throw err;
    }
    const group = groups.add(launched.pgid);
    const recorded = token as JournalToken | null;
    group.onGone(() => {
      release();
      if (recorded !== null) journal.ended(launched.pgid, recorded);
    });
    void launched.exit.then(() => group.leaderExit()).catch((err: unknown) => ctx.log.error({ event: 'process_group_check_failed', err }, 'the process group could not be checked'));
    void launched.tty?.closedBeforeExit.then(() =>
      deps.log.debug({ event: 'terminal_closed_before_exit', child_pid: launched.pid, process_id: processId }, 'the session closed its terminal while the process lives: the terminal stays open until it exits'),
    );
    ctx.log.info(
      { event: 'process_spawned', kind, child_pid: launched.pid, process_id: processId, command: spec.command, as_user: launched.user.name, tty: launched.tty !== null },
      'process spawned',
    );
    return { launched, group };
  };

  const lookup = (ctx: RequestContext): ManagedProcess => table.get(ctx.params.process_id ?? '');
  const routeDeps = { ...deps, lookup };

  return [
    route({
      method: 'POST',
      path: `${P}/exec`,
      scope: 'processes:exec',
      doc: () => ({
        summary: 'Run a command to completion and return its exit and output',
        description:
          LAUNCH_TEXT +
          `Counts toward BROWSERD_MAX_PROCESSES while it runs (429 past it). ` +
          'exec runs a command to completion: whatever the command leaves in its process group (background children) ' +
          'gets SIGKILL when it exits. ' +
          `timeout_sec defaults to ${EXEC_DEFAULT_TIMEOUT_SEC} s (at most ${EXEC_MAX_TIMEOUT_SEC}); at the deadline the group gets SIGKILL and ` +
          'timed_out is true. stdout and stderr are kept up to BROWSERD_EXEC_OUTPUT_LIMIT_BYTES each, and the output of every running ' +
          'exec together up to BROWSERD_EXEC_OUTPUT_TOTAL_BYTES; the rest is counted in *_truncated_bytes. Output written after the command exits by processes that left its group is collected for at most 1 s. ' +
          'If the client disconnects before the answer, the group gets SIGKILL. A command that cannot be started is 400 (command: not found, permission denied). ' +
          'No terminal: the SDK declares allocate_tty on spawn only. stdin_b64 past BROWSERD_STDIN_LIMIT_BYTES decoded is 413 naming that setting.',
        body: execBody(),
        responses: { 200: { description: 'the command ran (whatever its exit code)', schema: execResult() } },
        errors: [413, 422, 429],
      }),
      readsBody: true, // the base64 fast path of stdin_b64 (readWithStdinLimit)
      handler: async (ctx) => {
        const { body, decoded } = await readWithStdinLimit(ctx, execBody(), limits.stdinLimitBytes, { bytes: config.http.bodyLimitBytes, setting: 'BROWSERD_BODY_LIMIT_BYTES' }, 'stdin_b64');
        const stdin = body.stdin_b64 === undefined ? null : decodeStdin('stdin_b64', body.stdin_b64, limits.stdinLimitBytes, decoded);
        const { launched, group } = await start(ctx, { ...body, tty: null }, 'exec');
        // The client went away (not for a request with an Idempotency-Key, whose retry takes the answer).
        const abandon = (): void => {
          if (!ctx.res.writableFinished) void group.trySignal('SIGKILL');
        };
        ctx.clientGone.addEventListener('abort', abandon, { once: true });
        const { result, leftoversKilled } = await runExec(launched, group, {
          timeoutMs: (body.timeout_sec ?? EXEC_DEFAULT_TIMEOUT_SEC) * 1000,
          outputLimitBytes: limits.execOutputLimitBytes,
          pool: deps.execOutputPool,
          stdin,
        });
        ctx.log.info(
          {
            event: 'process_exited',
            kind: 'exec',
            child_pid: launched.pid,
            code: result.exit_code,
            signal: result.signal,
            timed_out: result.timed_out,
            group_killed: leftoversKilled,
          },
          'process exited',
        );
        return { status: 200, body: result };
      },
    }),
    route({
      method: 'POST',
      path: `${P}/spawn`,
      scope: 'processes:exec',
      doc: () => ({
        summary: 'Start a command in the background (on pipes, or on a terminal with allocate_tty)',
        description:
          LAUNCH_TEXT +
          'Its output goes to a replay buffer of BROWSERD_OUTPUT_BUFFER_BYTES ' +
          '(read with the stdout/stream route); its stdin stays open for the stdin route. Live processes (spawned and exec) are limited ' +
          'to BROWSERD_MAX_PROCESSES (429 past it); a process counts while any member of its process group lives, also after ' +
          'the process itself has exited (status: state exited, group_alive true; kill still reaches the group). An exited process ' +
          'stays readable while its group lives and then for BROWSERD_PROCESS_RETENTION_SEC, then 404 ' +
          `(at most ${MAX_RETAINED_EXITED} finished processes, and BROWSERD_OUTPUT_RETAINED_BYTES of their output buffers together, are kept; past that the oldest is forgotten first). ` +
          'timeout_sec: at the deadline the whole group gets SIGKILL (status shows timeout_at and then timed_out true; the exit says SIGKILL). ' +
          `allocate_tty: a pseudo-terminal of rows × cols (default ${TTY_DEFAULT_COLS}×${TTY_DEFAULT_ROWS}), TERM=xterm-256color unless env sets it; ` +
          'the command is looked up on PATH before it starts (400 as for pipes); a terminal for another user (as_user) is entered through setpriv(1). ' +
          `At daemon shutdown every group started gets SIGTERM, then SIGKILL after ${PROCESS_STOP_GRACE_MS / 1000} s.`,
        body: spawnBody(),
        responses: { 200: { description: 'started', schema: spawnResult() } },
        errors: [422, 429],
      }),
      handler: async (ctx) => {
        const body = ctx.body;
        const id = randomUUID();
        const tty = body.allocate_tty === true ? { rows: body.rows ?? TTY_DEFAULT_ROWS, cols: body.cols ?? TTY_DEFAULT_COLS } : null;
        const { launched, group } = await start(ctx, { ...body, tty }, 'spawn', id);
        const proc = new ManagedProcess(id, launched, group, {
          command: body.command,
          replayBufferBytes: limits.replayBufferBytes,
          stdinTimeoutMs: limits.stdinTimeoutMs,
          stdinQueueLimitBytes: limits.stdinLimitBytes * STDIN_QUEUE_FACTOR,
          stdinBudget: deps.stdinBudget,
          timeoutMs: body.timeout_sec == null ? null : body.timeout_sec * 1000,
          metrics: deps.metrics,
          log: deps.log,
        });
        table.add(proc);
        return { status: 200, body: { process_id: proc.id, pid: proc.pid, started_at: proc.startedAt.toISOString() } };
      },
    }),
    route({
      method: 'GET',
      path: P,
      scope: 'browser:read',
      doc: () => ({
        summary: 'Spawned processes: running ones and exited ones still retained',
        responses: { 200: { description: 'the processes, oldest first', schema: listSchema() } },
      }),
      handler: async () => {
        const procs = table.list();
        // group_alive as of now, and every cpu_pct and mem_bytes: asked together, they share one /proc scan.
        const [, scan] = await Promise.all([groups.refresh(), sessionMembers(procs.filter((p) => !p.group.ended).map((p) => p.pgid))]);
        return { status: 200, body: { processes: procs.map((p) => p.status(scan)) } };
      },
    }),
    route({
      method: 'GET',
      path: `${P}/{process_id}/status`,
      scope: 'browser:read',
      doc: () => ({
        summary: 'The state of one spawned process',
        description:
          'cpu_pct and mem_bytes (the SDK\'s optional fields) are given while members of the group live: CPU time of the living members over ' +
          'the time since the start (as ps %CPU, 100 = one core) and the sum of their resident memory.',
        responses: { 200: { description: 'the process', schema: statusSchema() } },
      }),
      handler: async (ctx) => {
        const proc = lookup(ctx);
        // group_alive as of now, and cpu_pct and mem_bytes: asked together, they share one /proc scan.
        const [, scan] = await Promise.all([proc.group.alive(), sessionMembers(proc.group.ended ? [] : [proc.pgid])]);
        return { status: 200, body: proc.status(scan) };
      },
    }),
    ...outputRoutes(routeDeps),
    ...stdinRoutes(routeDeps),
    route({
      method: 'POST',
      path: `${P}/{process_id}/kill`,
      scope: 'processes:write',
      doc: () => ({
        summary: 'Send a signal to the whole process group of a spawned process',
        description:
          'Answers once the signal is sent (not when the process has exited: watch status or the exit event). ' +
          'The body may be left out (TERM). Every process group of the process\'s session gets it (its own group and any group its members ' +
          'made, such as the jobs of an interactive shell on a terminal). The group is signalled also after the process itself has exited, while members it ' +
          'left in its group live (status group_alive); 409 process_exited once nothing of the group is left.',
        body: killBody(),
        bodyRequired: false,
        responses: { 200: { description: 'the signal was sent', schema: okResult() } },
        errors: [409],
      }),
      handler: async (ctx) => {
        const proc = lookup(ctx);
        const body = ctx.body;
        const signal = `SIG${body.signal ?? 'TERM'}` as const;
        await proc.kill(signal);
        ctx.log.info({ event: 'process_signalled', child_pid: proc.pid, process_id: proc.id, signal }, 'process group signalled');
        return { status: 200, body: { ok: true } };
      },
    }),
    ...ptyRoutes(routeDeps),
  ];
}

/** What the route files of the sub-folders get. */
export type ProcessRouteDeps = RouteDeps & { lookup(ctx: RequestContext): ManagedProcess };
