// The process routes of the contract: exec, spawn, list, status, the output stream, stdin, kill.
import { randomUUID } from 'node:crypto';
import type { Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import type { Metrics } from '../core/metrics.js';
import { BadRequestError, PayloadTooLargeError } from '../core/errors.js';
import type { RequestContext, Route } from '../http/router.js';
import { runExec } from './exec.js';
import { PROCESS_STOP_GRACE_MS, type GroupSet, type ProcessGroup } from './groups/groups.js';
import { ManagedProcess } from './managed-process.js';
import { MAX_RETAINED_EXITED, type ProcessTable } from './process-table.js';
import {
  EXEC_DEFAULT_TIMEOUT_SEC,
  EXEC_MAX_TIMEOUT_SEC,
  execBody,
  execResult,
  killBody,
  killResult,
  listSchema,
  spawnBody,
  spawnResult,
  statusSchema,
  stdinBody,
  stdinResult,
} from './schemas.js';
import { launch, type LaunchSpec, type Launched } from './launch/spawn.js';
import { SSE_HEARTBEAT_MS, streamOutput } from './output/sse.js';
import { STDIN_QUEUE_FACTOR } from './stdin/stdin-writer.js';
import { Base64Error, base64Length, decodeStrictBase64 } from './stdin/strict-base64.js';

export interface RouteDeps {
  config: Config;
  log: Logger;
  metrics: Metrics;
  table: ProcessTable;
  groups: GroupSet;
}

const KiB = 1024;
const P = '/browsers/{id}/process';

export function processRoutes(deps: RouteDeps): Route[] {
  const { config, table, groups } = deps;
  const limits = config.processes;
  /** JSON limit of the stdin route: the base64 of the stdin limit plus room for the rest of the body. */
  const stdinBodyLimit = base64Length(limits.stdinLimitBytes) + KiB;
  /** exec carries stdin_b64 besides the usual fields. */
  const execBodyLimit = base64Length(limits.stdinLimitBytes) + config.http.bodyLimitBytes;
  /** Stdin bytes one process may hold queued (accepted, not yet in the pipe). */
  const stdinQueueLimit = limits.stdinLimitBytes * STDIN_QUEUE_FACTOR;

  /** Strict base64 within the stdin limit: 400 naming the field, or 413 with the limit. */
  const decode = (field: string, text: string): Buffer => {
    let data: Buffer;
    try {
      data = decodeStrictBase64(text);
    } catch (err) {
      if (err instanceof Base64Error) throw BadRequestError.field(field, `not strict base64: ${err.message}`);
      throw err;
    }
    if (data.length > limits.stdinLimitBytes) throw new PayloadTooLargeError(`${field} (${data.length} bytes decoded)`, limits.stdinLimitBytes);
    return data;
  };

  /** Starts a child in a reserved live slot; the slot is freed once no member of its group lives. */
  const start = async (
    ctx: RequestContext,
    spec: LaunchSpec,
    kind: 'spawn' | 'exec',
    processId?: string,
  ): Promise<{ launched: Launched; group: ProcessGroup }> => {
    // At the limit, groups that ended since the last periodic check free their slots first.
    if (table.full) groups.refresh();
    const release = table.reserve();
    let launched: Launched;
    try {
      launched = await launch(spec);
    } catch (err) {
      release();
      throw err;
    }
    const group = groups.add(launched.pgid);
    group.onGone(release);
    void launched.exit.then(() => group.leaderExit());
    ctx.log.info(
      { event: 'process_spawned', kind, child_pid: launched.pid, process_id: processId, command: spec.command, as_user: launched.user.name },
      'process spawned',
    );
    return { launched, group };
  };

  const lookup = (ctx: RequestContext): ManagedProcess => table.get(ctx.params.process_id ?? '');

  return [
    {
      method: 'POST',
      path: `${P}/exec`,
      scope: 'processes:exec',
      doc: {
        summary: 'Run a command to completion and return its exit and output',
        description:
          `Runs in its own process group and counts toward BROWSERD_MAX_PROCESSES while it runs (429 past it). ` +
          'exec runs a command to completion: whatever the command leaves in its process group (background children) ' +
          'gets SIGKILL when it exits. ' +
          `timeout_sec defaults to ${EXEC_DEFAULT_TIMEOUT_SEC} s (at most ${EXEC_MAX_TIMEOUT_SEC}); at the deadline the group gets SIGKILL and ` +
          'timed_out is true. stdout and stderr are kept up to BROWSERD_EXEC_OUTPUT_LIMIT_BYTES each; the rest is counted in ' +
          '*_truncated_bytes. Output written after the command exits by processes that left its group is collected for at most 1 s. ' +
          'If the client disconnects before the answer, the group gets SIGKILL. A command that cannot be started is 400 (command: not found, permission denied).',
        body: execBody,
        responses: { 200: { description: 'the command ran (whatever its exit code)', schema: execResult } },
        errors: [413, 429],
      },
      handler: async (ctx) => {
        const body = await ctx.json(execBody, { limitBytes: execBodyLimit });
        const stdin = body.stdin_b64 === undefined ? null : decode('stdin_b64', body.stdin_b64);
        const { launched, group } = await start(ctx, body, 'exec');
        const abandon = (): void => {
          if (!ctx.res.writableFinished) group.trySignal('SIGKILL');
        };
        ctx.res.once('close', abandon);
        const { result, leftoversKilled } = await runExec(launched, group, {
          timeoutMs: (body.timeout_sec ?? EXEC_DEFAULT_TIMEOUT_SEC) * 1000,
          outputLimitBytes: limits.execOutputLimitBytes,
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
    },
    {
      method: 'POST',
      path: `${P}/spawn`,
      scope: 'processes:exec',
      doc: {
        summary: 'Start a command in the background',
        description:
          'The process leads its own process group. Its stdout and stderr go to a replay buffer of BROWSERD_OUTPUT_BUFFER_BYTES ' +
          '(read with the stdout/stream route); its stdin stays open for the stdin route. Live processes (spawned and exec) are limited ' +
          'to BROWSERD_MAX_PROCESSES (429 past it); a process counts while any member of its process group lives, also after ' +
          'the process itself has exited (status: state exited, group_alive true; kill still reaches the group). An exited process ' +
          'stays readable while its group lives and then for BROWSERD_PROCESS_RETENTION_SEC, then 404 ' +
          `(at most ${MAX_RETAINED_EXITED} finished processes are kept; past that the oldest is forgotten first). ` +
          `At daemon shutdown every group started gets SIGTERM, then SIGKILL after ${PROCESS_STOP_GRACE_MS / 1000} s.`,
        body: spawnBody,
        responses: { 200: { description: 'started', schema: spawnResult } },
        errors: [429],
      },
      handler: async (ctx) => {
        const body = await ctx.json(spawnBody);
        const id = randomUUID();
        const { launched, group } = await start(ctx, body, 'spawn', id);
        const proc = new ManagedProcess(id, launched, group, {
          command: body.command,
          replayBufferBytes: limits.replayBufferBytes,
          stdinTimeoutMs: limits.stdinTimeoutMs,
          stdinQueueLimitBytes: stdinQueueLimit,
          metrics: deps.metrics,
          log: deps.log,
        });
        table.add(proc);
        return { status: 200, body: { process_id: proc.id, pid: proc.pid, started_at: proc.startedAt.toISOString() } };
      },
    },
    {
      method: 'GET',
      path: P,
      scope: 'browser:read',
      doc: {
        summary: 'Spawned processes: running ones and exited ones still retained',
        responses: { 200: { description: 'the processes, oldest first', schema: listSchema } },
      },
      handler: async () => {
        groups.refresh(); // group_alive as of now
        return { status: 200, body: { processes: table.list().map((p) => p.status()) } };
      },
    },
    {
      method: 'GET',
      path: `${P}/{process_id}/status`,
      scope: 'browser:read',
      doc: { summary: 'The state of one spawned process', responses: { 200: { description: 'the process', schema: statusSchema } } },
      handler: async (ctx) => {
        const proc = lookup(ctx);
        proc.group.alive(); // group_alive as of now
        return { status: 200, body: proc.status() };
      },
    },
    {
      method: 'GET',
      path: `${P}/{process_id}/stdout/stream`,
      scope: 'browser:read',
      doc: {
        summary: 'Server-Sent Events: the output of a process since its start (replay), then live, then its exit',
        description:
          'Each chunk of stdout or stderr, in the order received across both: `id: <offset>` and ' +
          '`data: {"stream":"stdout"|"stderr","data_b64":"..."}`, where the id is the byte offset just past the chunk. ' +
          'A reader that falls behind the replay buffer (BROWSERD_OUTPUT_BUFFER_BYTES) gets `event: lost` with `{"bytes": N}` and ' +
          'continues at the oldest byte kept; a slow reader never slows the process or other readers. The last event is ' +
          '`event: exit` with `{"exit_code","signal"}`, then the response ends. A client may resume with the `Last-Event-ID` header ' +
          `(an offset). Idle streams get a comment line every ${SSE_HEARTBEAT_MS / 1000} s. Several readers may read at once.`,
        responses: { 200: { description: 'the event stream', mediaType: 'text/event-stream', schema: { type: 'string' } } },
        errors: [400],
      },
      handler: async (ctx) => {
        const proc = lookup(ctx);
        const from = parseLastEventId(ctx.req.headers['last-event-id'], proc.output.endOffset);
        await streamOutput(ctx.res, proc.output, { from, signal: ctx.signal });
        return null;
      },
    },
    {
      method: 'POST',
      path: `${P}/{process_id}/stdin`,
      scope: 'processes:write',
      doc: {
        summary: 'Write to the stdin of a spawned process; answered once the bytes are in the pipe',
        description:
          'Requests for one process are written one after another in the order accepted, each contiguous. The answer comes ' +
          'when every byte is in the pipe. A child that does not read within BROWSERD_STDIN_TIMEOUT_MS gets 504 timeout: the ' +
          'message says how many bytes of the request stay queued; they are not dropped and reach the child, in order, when it ' +
          'reads. 409 process_exited when the process has exited (also for bytes still queued when it exits), 409 stdin_closed ' +
          'after close: true or when the child closed its stdin. A client that disconnects does not withdraw accepted bytes. ' +
          `The bytes queued for one process (accepted, not yet in the pipe) are limited to ${STDIN_QUEUE_FACTOR} × ` +
          `BROWSERD_STDIN_LIMIT_BYTES: a request that would pass it is 429 limit_exceeded and nothing of it is queued.`,
        body: stdinBody,
        responses: { 200: { description: 'every byte is in the pipe', schema: stdinResult } },
        errors: [409, 413, 429, 504],
      },
      handler: async (ctx) => {
        const proc = lookup(ctx);
        const body = await ctx.json(stdinBody, { limitBytes: stdinBodyLimit });
        const data = decode('data_b64', body.data_b64);
        const queuedBefore = proc.stdin.queuedBytes;
        const writing = proc.writeStdin(data, body.close ?? false);
        ctx.log.debug(
          { event: 'stdin_queued', child_pid: proc.pid, process_id: proc.id, bytes: data.length, close: body.close ?? false, queued_before: queuedBefore },
          'stdin request queued',
        );
        const written = await writing;
        return { status: 200, body: { written_bytes: written } };
      },
    },
    {
      method: 'POST',
      path: `${P}/{process_id}/kill`,
      scope: 'processes:write',
      doc: {
        summary: 'Send a signal to the whole process group of a spawned process',
        description:
          'Answers once the signal is sent (not when the process has exited: watch status or the exit event). ' +
          'The body may be left out (TERM). The group is signalled also after the process itself has exited, while members it ' +
          'left in its group live (status group_alive); 409 process_exited once nothing of the group is left.',
        body: killBody,
        bodyRequired: false,
        responses: { 200: { description: 'the signal was sent', schema: killResult } },
        errors: [409],
      },
      handler: async (ctx) => {
        const proc = lookup(ctx);
        const body = await ctx.json(killBody, { optional: true });
        const signal = `SIG${body.signal ?? 'TERM'}` as const;
        proc.kill(signal);
        ctx.log.info({ event: 'process_signalled', child_pid: proc.pid, process_id: proc.id, signal }, 'process group signalled');
        return { status: 200, body: { ok: true } };
      },
    },
  ];
}

/** The offset to resume at from `Last-Event-ID` (0 without it); 400 when it is not an offset of this output. */
function parseLastEventId(header: string | string[] | undefined, end: number): number {
  if (header === undefined) return 0;
  const raw = Array.isArray(header) ? header[0] : header;
  if (raw === undefined || raw === '') return 0;
  if (!/^\d{1,15}$/.test(raw) || Number(raw) > end) {
    throw BadRequestError.field('Last-Event-ID', `must be an output offset from an earlier event of this stream (0-${end}), got "${raw.slice(0, 40)}"`);
  }
  return Number(raw);
}
