// POST /browsers/{id}/repl: a call of the session's persistent JavaScript REPL (session.ts).
import { z } from 'zod';
import { lazy } from '../core/lazy.js';
import type { Route } from '../http/router.js';
import { routesIn } from '../http/route.js';
import { REPL_DEFAULT_TIMEOUT_SEC, REPL_IMAGE_LIMIT_BYTES, REPL_MAX_HEAP_MB, REPL_MAX_TIMEOUT_SEC, REPL_TEXT_LIMIT_BYTES } from './limits.js';
import type { ReplSession } from './session.js';

const route = routesIn('daemon/repl/routes.ts');

const replBody = lazy(() => z.strictObject({
  code: z
    .string()
    .max(1024 * 1024)
    .describe(
      'JavaScript run as one REPL cell: top-level await; what it declares at its top level (const, let, var, class, function) stays for later calls; ' +
        'the value of its last expression comes back as text on channel `result`. The helpers (docs/repl.md) are globals.',
    ),
  timeout_sec: z
    .number()
    .int()
    .min(1)
    .max(REPL_MAX_TIMEOUT_SEC)
    .optional()
    .describe(`Seconds (default ${REPL_DEFAULT_TIMEOUT_SEC}, 1 to ${REPL_MAX_TIMEOUT_SEC}); past it the REPL process is killed: repl_terminated, a new repl_id`),
  reset: z.boolean().optional().describe('Start from a new REPL process (a new repl_id, no state) before running the code'),
}));

const contentItem = lazy(() => z.union([
  z.object({ type: z.literal('text'), channel: z.string().describe('stdout, stderr (console.*), result (the last expression\'s value), or what repl.write named'), text: z.string() }),
  z.object({ type: z.literal('image'), mime_type: z.string(), data_b64: z.string().describe('The image, base64') }),
]));

const replResult = lazy(() => z.object({
  success: z.boolean().describe('The cell ran to its end without throwing'),
  repl_id: z.string().describe('Names the REPL\'s state: it changes when the state is gone (timeout, crash, heap limit, reset)'),
  error: z.string().optional().describe('Why not: `<name>: <message>` of what the cell threw, or the timeout or the crash'),
  stack: z.string().optional().describe('The stack of what the cell threw (frames of the cell read `cell:<line>:<column>`)'),
  content: z.array(contentItem()).describe('Text and images, in the order made'),
  content_truncated: z.boolean().optional().describe(`true when text past REPL_TEXT_LIMIT_BYTES (${REPL_TEXT_LIMIT_BYTES}) was cut`),
  repl_terminated: z.boolean().optional().describe('true when this call ended the REPL process (timeout, crash): repl_id is the next one'),
  duration_ms: z.number(),
}));

export function replRoutes(deps: { session: ReplSession }): Route[] {
  return [
    route({
      method: 'POST',
      path: '/browsers/{id}/repl',
      scope: 'playwright:execute',
      doc: () => ({
        summary: 'Run JavaScript in the session\'s persistent REPL',
        description:
          'One long-lived Node process per session, run as the agent user (like a Playwright runner), keeps the REPL\'s globals between calls; calls run one at a time, in order. ' +
          `Its helpers (cdp, gotoUrl, accessibilitySnapshot, click, typeText, fillInput, pressKey, scroll, captureScreenshot, tabs, waits, webmcp.*, repl.write, repl.emitImage) act on a current tab over the daemon's CDP endpoint. ` +
          `Text is kept up to REPL_TEXT_LIMIT_BYTES (${REPL_TEXT_LIMIT_BYTES}) per call, images up to REPL_IMAGE_LIMIT_BYTES (${REPL_IMAGE_LIMIT_BYTES}) per call; the process's heap is REPL_MAX_HEAP_MB (${REPL_MAX_HEAP_MB}). ` +
          'A timeout or a crash kills the process: repl_terminated: true and a new repl_id. A client that disconnects does not stop its call.',
        body: replBody(),
        responses: { 200: { description: 'the call ran (whether it succeeded is `success`)', schema: replResult() } },
        errors: [503],
      }),
      handler: async (ctx) => {
        const body = ctx.body;
        const answer = await deps.session.run(body.code, (body.timeout_sec ?? REPL_DEFAULT_TIMEOUT_SEC) * 1000, body.reset ?? false);
        ctx.log.info({ event: 'repl_call', repl_id: answer.repl_id, success: answer.success, terminated: answer.repl_terminated ?? false, code_bytes: Buffer.byteLength(body.code), ms: answer.duration_ms }, 'REPL call');
        return { status: 200, body: answer };
      },
    }),
  ];
}
