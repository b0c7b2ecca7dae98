// POST /browsers/{id}/playwright/execute: the caller's code run by a Playwright runner, as the
// SDK declares it ({code, timeout_sec?} → {success, result?, error?, stdout, stderr}).
import { performance } from 'node:perf_hooks';
import { z } from 'zod';
import { lazy } from '../core/lazy.js';
import { BrowserUnavailableError, LimitExceededError, NotFoundError } from '../core/errors.js';
import type { Metrics } from '../core/metrics.js';
import type { Route } from '../http/router.js';
import { routesIn } from '../http/route.js';
import type { PoolExecution } from './pool.js';
import { DEFAULT_EXECUTOR, type ExecutorExecution, type Executors } from './executors.js';
import { qBool } from '../http/query.js';

const route = routesIn('daemon/playwright/routes.ts');

const EXECUTE_DEFAULT_TIMEOUT_SEC = 60;
const EXECUTE_MAX_TIMEOUT_SEC = 600;

const executeBody = lazy(() => z.strictObject({
  code: z
    .string()
    .min(1)
    .describe(
      'TypeScript or JavaScript: the body of an async function with `page`, `context` and `browser` in scope; `return` a value to get it as `result`. ' +
        'Types are stripped by Node (module.stripTypeScriptTypes, strip mode: no enums, namespaces or parameter properties). `import` statements are not allowed in a function body: use `await import("node:fs")`.',
    ),
  timeout_sec: z
    .number()
    .positive()
    .max(EXECUTE_MAX_TIMEOUT_SEC)
    .optional()
    .describe(`Seconds (fractions allowed; default ${EXECUTE_DEFAULT_TIMEOUT_SEC}, at most ${EXECUTE_MAX_TIMEOUT_SEC}). At the deadline the runner's whole process group gets SIGKILL and the answer is success: false.`),
  executor: executorName()
    .optional()
    .describe(
      'The executor to run in (default `default`: the shared runners and the first open page). A named executor is made at its first execution: ' +
        'one long-lived runner with a tab of its own and its globals kept between executions, one execution at a time (later ones wait their turn); ' +
        'different executors run at once. At most BROWSERD_PLAYWRIGHT_EXECUTORS named ones (409 executor_limit past it).',
    ),
}));

const EXECUTOR_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const executorName = (): z.ZodString => z.string().regex(EXECUTOR_NAME, 'must be 1 to 64 of A-Z a-z 0-9 _ -');

const executorInfo = lazy(() => z.object({
  name: z.string(),
  busy: z.boolean().describe('An execution runs in it now'),
  created_at: z.string().describe('When it was made (ISO time; `default`: when the daemon started)'),
  last_used_at: z.string().nullable().describe('When its last execution started, null before the first'),
  target_id: z.string().nullable().describe('The CDP target id of the tab its last execution ran in, null before the first'),
  url: z.string().nullable().describe("That tab's URL when that execution ended"),
}));
const executorsResult = lazy(() => z.object({ executors: z.array(executorInfo()).describe('`default` first, then the named ones in the order they were made') }));
const deleteQuery = lazy(() => z.strictObject({ close_tab: qBool('Close the executor\'s tab too (default true; `default` owns no tab: never closed)') }));
const deleteResult = lazy(() => z.object({ name: z.string(), closed_tab: z.boolean().describe('Its tab was closed') }));

const executeResult = lazy(() => z.object({
  success: z.boolean().describe('The code ran to its end and its value is JSON'),
  result: z.unknown().optional().describe('The returned value, as JSON (absent when the code returned undefined, and on failure)'),
  error: z.string().optional().describe('Why not, when success is false'),
  stdout: z.string().describe('What the code wrote to stdout (console.log, console.info, console.debug, process.stdout.write) while it ran'),
  stderr: z.string().describe('What it wrote to stderr (console.error, console.warn, console.trace), and the stack of an error it threw'),
  stdout_truncated_bytes: z.number().int().min(0).describe('Bytes of stdout past BROWSERD_PLAYWRIGHT_OUTPUT_LIMIT_BYTES, counted but not kept'),
  stderr_truncated_bytes: z.number().int().min(0).describe('Bytes of stderr past the limit, counted but not kept'),
  executor: z.string().describe('The executor that ran it'),
  tab: z
    .object({ target_id: z.string().describe('CDP target id'), created: z.boolean().describe('Opened for this execution (the executor\'s first, or its tab had been closed)') })
    .nullable()
    .describe('The tab the code ran in (null when it did not get one: Chromium unreachable, or the runner died first)'),
}));
type ExecuteResult = z.infer<ReturnType<typeof executeResult>>;

export interface RouteDeps {
  executors: Executors;
  metrics: Metrics;
}

function exitText(e: Extract<PoolExecution['outcome'], { kind: 'exited' }>): string {
  const how = e.exit.signal !== null ? `was killed by ${e.exit.signal}` : `exited with code ${e.exit.code}`;
  // Node's own report of a fatal error ("FATAL ERROR: … JavaScript heap out of memory") rather than the native frames after it.
  const lines = e.stderrTail.filter((l) => l.trim() !== '' && !/^\s*\d+: 0x[0-9a-f]+ /.test(l) && !/^\s*(<--|=====)/.test(l));
  const fatal = lines.filter((l) => /FATAL ERROR|out of memory/i.test(l));
  const tail = (fatal.length > 0 ? fatal : lines).slice(-3).join(' | ');
  return `the runner ${how} during the execution${tail === '' ? '' : ` (its stderr: ${tail.slice(0, 1000)})`}; a new runner starts at the next execution`;
}

export function playwrightRoutes(deps: RouteDeps): Route[] {
  const { executors, metrics } = deps;
  return [
    route({
      method: 'POST',
      path: '/browsers/{id}/playwright/execute',
      scope: 'playwright:execute',
      doc: () => ({
        summary: 'Run Playwright code against the browser (page, context, browser in scope)',
        description:
          'The code runs in a Playwright runner: a Node process of its own (its own process group, the minimal environment of the processes API, ' +
          "never the daemon's token or any BROWSERD_* variable; its working directory the daemon user's home, or the temp directory when that home is the state directory), which keeps a playwright-core " +
          'connection to this daemon\'s CDP endpoint between executions (it authenticates with a token of its own that has only the `cdp` scope, ' +
          'handed over on its stdin and revoked when it exits). The connection is Playwright\'s usual one for a local client: downloads are ' +
          'delivered to the code (page.waitForEvent("download"), download.saveAs(path)) and listed by GET /browsers/{id}/fs/downloads, and the pages ' +
          'it attaches get focus emulation (they report focus) while it is attached. `context` is the browser\'s default context, `page` its first open page (a new page when it has none), ' +
          '`browser` the connected Browser. Each execution is a new call of the function (its own local variables); globals of the runner persist ' +
          'between executions. After a Chromium restart the runner reconnects by itself (at once, and again at the next execution if that failed). ' +
          `One execution at a time per runner and at most BROWSERD_PLAYWRIGHT_RUNNERS runners (default 2; a second one starts only when two executions overlap): ` +
          'past it 429 limit_exceeded with Retry-After. The first execution (and the first after a runner died) waits for a runner to start (about half a second). ' +
          'Types are stripped by Node (strip mode); a syntax error is success: false with Node\'s message and the line in the code. ' +
          'A thrown error is success: false with `error` = "<name>: <message>" and its stack on stderr. The returned value must be JSON: a function, a symbol, ' +
          'a BigInt or a cycle anywhere in it is success: false naming the problem (undefined inside objects is dropped, as JSON.stringify does); ' +
          'over BROWSERD_PLAYWRIGHT_RESULT_LIMIT_BYTES is success: false too. stdout and stderr are what the code wrote while it ran (output of timers ' +
          'that fire after it returned is not part of the answer), each kept up to BROWSERD_PLAYWRIGHT_OUTPUT_LIMIT_BYTES, the rest counted in *_truncated_bytes. ' +
          `At timeout_sec (default ${EXECUTE_DEFAULT_TIMEOUT_SEC}, at most ${EXECUTE_MAX_TIMEOUT_SEC}) the runner's whole process group gets SIGKILL and the answer is ` +
          'success: false saying so, with the output written until then; a runner that dies during an execution (process.exit, the V8 heap limit ' +
          'BROWSERD_PLAYWRIGHT_MAX_HEAP_MB, the kernel\'s OOM killer, which picks runners first: oom_score_adj 1000) is success: false with the cause. ' +
          'A client that disconnects before the answer kills the runner. When the runner cannot reach Chromium (stopped, failed, not ready within 15 s) ' +
          'the code does not run: 503 browser_unavailable.',
        body: executeBody(),
        responses: { 200: { description: 'the code ran (whether it succeeded is `success`)', schema: executeResult() } },
        errors: [409, 429, 503],
      }),
      handler: async (ctx) => {
        const body = ctx.body;
        const timeoutSec = body.timeout_sec ?? EXECUTE_DEFAULT_TIMEOUT_SEC;
        const t0 = performance.now();
        const abandon = new AbortController();
        const onClose = (): void => {
          if (!ctx.res.writableFinished) abandon.abort();
        };
        ctx.res.once('close', onClose);
        const executor = body.executor ?? DEFAULT_EXECUTOR;
        let execution: ExecutorExecution;
        try {
          execution = await executors.run(executor, body.code, timeoutSec * 1000, abandon.signal);
        } catch (err) {
          if (err instanceof LimitExceededError) metrics.playwrightExecutions.inc({ outcome: 'limit' });
          throw err;
        } finally {
          ctx.res.off('close', onClose);
        }
        const { outcome } = execution;
        let success = false;
        let result: unknown;
        let error: string | undefined;
        let label: string;
        switch (outcome.kind) {
          case 'answer': {
            const m = outcome.message;
            if (m.unavailable !== undefined) {
              metrics.playwrightExecutions.inc({ outcome: 'unavailable' });
              throw new BrowserUnavailableError(`the Playwright runner cannot reach Chromium: ${m.unavailable}`);
            }
            success = m.success;
            if (m.success) result = m.result;
            else error = m.error ?? 'the execution failed';
            label = m.success ? 'ok' : 'error';
            break;
          }
          case 'timeout':
            error = `timed out: the code did not finish within ${timeoutSec} s (timeout_sec); its runner was killed (SIGKILL to its process group) and a new one starts at the next execution`;
            label = 'timeout';
            break;
          case 'exited':
            error = exitText(outcome);
            label = 'runner_exited';
            break;
          case 'abandoned':
            error = 'the client went away; the runner was killed';
            label = 'abandoned';
            break;
        }
        const seconds = (performance.now() - t0) / 1000;
        metrics.playwrightExecutions.inc({ outcome: label });
        metrics.playwrightDuration.observe(seconds);
        ctx.log.info(
          {
            event: 'playwright_executed',
            outcome: label,
            executor,
            child_pid: execution.runnerPid,
            started_runner: execution.startedRunner,
            code_bytes: Buffer.byteLength(body.code),
            ms: Math.round(seconds * 10_000) / 10,
          },
          'Playwright code executed',
        );
        // In the SDK's order: success, result, error, then the output.
        const reply: ExecuteResult = {
          success,
          ...(result !== undefined ? { result } : {}),
          ...(error !== undefined ? { error } : {}),
          stdout: execution.stdout,
          stderr: execution.stderr,
          stdout_truncated_bytes: execution.stdoutTruncated,
          stderr_truncated_bytes: execution.stderrTruncated,
          executor,
          tab: execution.tab,
        };
        return { status: 200, body: reply };
      },
    }),
    route({
      method: 'GET',
      path: '/browsers/{id}/playwright/executors',
      scope: 'playwright:execute',
      doc: () => ({
        summary: 'The Playwright executors',
        description: '`default` first (the shared runners: `busy` while any execution runs there), then the named ones with their tab.',
        responses: { 200: { description: 'the executors', schema: executorsResult() } },
      }),
      handler: () => Promise.resolve({ status: 200, body: { executors: executors.list() } }),
    }),
    route({
      method: 'DELETE',
      path: '/browsers/{id}/playwright/executors/{name}',
      scope: 'playwright:execute',
      doc: () => ({
        summary: 'Remove a Playwright executor (restart `default`)',
        description:
          'Its runner gets SIGKILL (an execution under way answers success: false, those waiting for it 404) and, unless close_tab=false, its tab is closed. ' +
          '`default` is restarted instead: its runners are killed and new ones start at the next execution; its page stays. An unknown name: 404.',
        query: deleteQuery(),
        responses: { 200: { description: 'removed', schema: deleteResult() } },
        errors: [404],
      }),
      handler: async (ctx) => {
        const name = ctx.params.name ?? '';
        if (!EXECUTOR_NAME.test(name)) throw new NotFoundError(`no Playwright executor named ${JSON.stringify(name)} (a name is 1 to 64 of A-Z a-z 0-9 _ -)`);
        const r = await executors.remove(name, ctx.query.close_tab !== false);
        ctx.log.info({ event: 'playwright_executor_removed', executor: name, closed_tab: r.closed_tab }, 'Playwright executor removed');
        return { status: 200, body: { name, ...r } };
      },
    }),
  ];
}
