// POST /browsers/{id}/playwright/execute: the caller's code run by a Playwright runner, as the
// SDK declares it ({code, timeout_sec?} → {success, result?, error?, stdout, stderr}).
import { performance } from 'node:perf_hooks';
import { z } from 'zod';
import { lazy } from '../core/lazy.js';
import { BrowserUnavailableError, LimitExceededError } from '../core/errors.js';
import type { Metrics } from '../core/metrics.js';
import type { Route } from '../http/router.js';
import { routesIn } from '../http/route.js';
import type { RunnerPool, PoolExecution } from './pool.js';

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
}));

const executeResult = lazy(() => z.object({
  success: z.boolean().describe('The code ran to its end and its value is JSON'),
  result: z.unknown().optional().describe('The returned value, as JSON (absent when the code returned undefined, and on failure)'),
  error: z.string().optional().describe('Why not, when success is false'),
  stdout: z.string().describe('What the code wrote to stdout (console.log, console.info, console.debug, process.stdout.write) while it ran'),
  stderr: z.string().describe('What it wrote to stderr (console.error, console.warn, console.trace), and the stack of an error it threw'),
  stdout_truncated_bytes: z.number().int().min(0).describe('Bytes of stdout past BROWSERD_PLAYWRIGHT_OUTPUT_LIMIT_BYTES, counted but not kept'),
  stderr_truncated_bytes: z.number().int().min(0).describe('Bytes of stderr past the limit, counted but not kept'),
}));
type ExecuteResult = z.infer<ReturnType<typeof executeResult>>;

export interface RouteDeps {
  pool: RunnerPool;
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
  const { pool, metrics } = deps;
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
        errors: [429, 503],
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
        let execution: PoolExecution;
        try {
          execution = await pool.run(body.code, timeoutSec * 1000, abandon.signal);
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
        };
        return { status: 200, body: reply };
      },
    }),
  ];
}
