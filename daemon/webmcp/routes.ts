// GET /browsers/{id}/webmcp/tools and POST /browsers/{id}/webmcp/invoke: the tools open pages
// register (WebMCP), listed and called on the daemon's own CDP session.
import { performance } from 'node:perf_hooks';
import { z } from 'zod';
import { Deadline, deadlineEnded } from '../core/deadline.js';
import { lazy } from '../core/lazy.js';
import type { Browser } from '../chromium/types.js';
import type { Route } from '../http/router.js';
import { routesIn } from '../http/route.js';
import { decodeToolRef } from './tool-ref.js';
import { invokeTool, listTools, type Invocation } from './tools.js';

const route = routesIn('daemon/webmcp/routes.ts');

/** Reading every page's tools at most (a page that does not answer holds the listing that long). */
const LIST_TIMEOUT_MS = 15_000;
const INVOKE_DEFAULT_TIMEOUT_SEC = 30;
const INVOKE_MAX_TIMEOUT_SEC = 300;
/** Beyond an invocation's own timeout: reaching the page and canceling. */
const INVOKE_SLACK_MS = 10_000;

const toolSchema = lazy(() => z.object({
  tool_ref: z.string().describe('Names the tool for POST …/webmcp/invoke (its page, frame and name; valid while the page offers it)'),
  tool: z
    .object({
      name: z.string(),
      description: z.string(),
      inputSchema: z.unknown().optional().describe('The JSON Schema of its input, as the page declared it'),
      outputSchema: z.unknown().optional(),
      annotations: z.record(z.string(), z.boolean()).optional().describe('readOnly, untrustedContent, … as the page declared them'),
    })
    .describe('What the page registered (document.modelContext.registerTool)'),
  source: z.object({
    target_id: z.string().describe("The page's CDP target id"),
    page_url: z.string(),
    page_title: z.string(),
    frame: z.object({ frame_id: z.string(), url: z.string(), main: z.boolean().describe('The main frame (else an iframe)') }),
  }),
}));
const toolsResult = lazy(() => z.object({ tools: z.array(toolSchema()) }));

const invokeBody = lazy(() => z.strictObject({
  tool_ref: z.string().min(1).max(4096).describe('A tool_ref of GET …/webmcp/tools'),
  input: z.record(z.string(), z.unknown()).optional().describe('The tool\'s input (an object, checked by the page against its inputSchema; default {})'),
  timeout_sec: z
    .number()
    .positive()
    .max(INVOKE_MAX_TIMEOUT_SEC)
    .optional()
    .describe(`Seconds to wait for the tool's answer (default ${INVOKE_DEFAULT_TIMEOUT_SEC}, at most ${INVOKE_MAX_TIMEOUT_SEC}); past it the invocation is canceled and the answer is 504 timeout with its id`),
}));
const invokeResult = lazy(() => z.object({
  invocation_id: z.string(),
  status: z.enum(['completed', 'error', 'canceled']),
  output: z.unknown().optional().describe('What the tool returned (completed)'),
  error_text: z.string().optional().describe('Why not (error: the exception the tool threw, or Chromium\'s reason)'),
}));

/** `work` under `deadline` (disposed after): its end is 504 timeout, or 503 when the client went away, never an internal error. */
async function bounded<T>(deadline: Deadline, what: string, ms: number, work: (d: Deadline) => Promise<T>): Promise<T> {
  try {
    return await work(deadline);
  } catch (err) {
    throw deadlineEnded(err, deadline, { timedOut: `${what} did not finish within ${ms} ms`, abandoned: `${what} was abandoned: the client went away or browserd is stopping` }) ?? err;
  } finally {
    deadline.dispose();
  }
}

export interface WebMcpRouteDeps {
  browser: Pick<Browser, 'withCdp'>;
  /** One telemetry event per invocation. */
  onInvoked(data: Record<string, unknown>): void;
}

export function webmcpRoutes(deps: WebMcpRouteDeps): Route[] {
  const { browser } = deps;
  return [
    route({
      method: 'GET',
      path: '/browsers/{id}/webmcp/tools',
      scope: 'webmcp',
      doc: () => ({
        summary: 'The tools the open pages register (WebMCP)',
        description:
          'Every open page (of every browser context) is asked for the tools it registered with document.modelContext.registerTool (a secure context only: https, ' +
          'or http on loopback). Read afresh at each call on a CDP session of the daemon\'s own. Chromium not ready: 503.',
        responses: { 200: { description: 'the tools', schema: toolsResult() } },
        errors: [503, 504],
      }),
      handler: async (ctx) => {
        const what = 'listing the WebMCP tools';
        const tools = await bounded(Deadline.in(LIST_TIMEOUT_MS, what, ctx.signal), what, LIST_TIMEOUT_MS, (deadline) =>
          browser.withCdp((cdp) => listTools(cdp, deadline), deadline),
        );
        return { status: 200, body: { tools } };
      },
    }),
    route({
      method: 'POST',
      path: '/browsers/{id}/webmcp/invoke',
      scope: 'webmcp',
      doc: () => ({
        summary: 'Call a tool a page registered (WebMCP)',
        description:
          'The tool runs in its page (the page\'s own code); the answer is its output (completed) or why not (error: the exception it threw). ' +
          'A tool_ref whose page is gone, or whose page no longer offers it (it navigated away): 404. ' +
          `No answer within timeout_sec (default ${INVOKE_DEFAULT_TIMEOUT_SEC}): the invocation is canceled and the answer is 504 timeout, its id in details (code invocation_id). ` +
          'Each invocation is a telemetry event `webmcp` (category control).',
        body: invokeBody(),
        responses: { 200: { description: 'the tool answered (how: status)', schema: invokeResult() } },
        errors: [400, 404, 503, 504],
      }),
      handler: async (ctx) => {
        const body = ctx.body;
        const ref = decodeToolRef(body.tool_ref);
        const timeoutMs = (body.timeout_sec ?? INVOKE_DEFAULT_TIMEOUT_SEC) * 1000;
        const t0 = performance.now();
        let r: Invocation | undefined;
        let failed: string | undefined;
        try {
          const what = `invoking WebMCP tool ${ref.name}`;
          const waitMs = timeoutMs + INVOKE_SLACK_MS;
          r = await bounded(Deadline.in(waitMs, what, ctx.signal), what, waitMs, async (deadline) => {
            // Chromium not ready within the slack: 503 (the tool's own timeout is for the tool).
            const ready = deadline.child(INVOKE_SLACK_MS, 'waiting for Chromium');
            try {
              return await browser.withCdp((cdp) => invokeTool(cdp, ref, body.input ?? {}, timeoutMs, deadline), ready);
            } finally {
              ready.dispose();
            }
          });
          return { status: 200, body: r };
        } catch (err) {
          failed = (err as { code?: string }).code ?? 'internal_error';
          throw err;
        } finally {
          const ms = Math.round(performance.now() - t0);
          const data = { tool_name: ref.name, target_id: ref.targetId, frame_id: ref.frameId, status: r?.status ?? failed, invocation_id: r?.invocation_id, duration_ms: ms };
          deps.onInvoked(data);
          ctx.log.info({ event: 'webmcp_invoked', ...data }, 'WebMCP tool invoked');
        }
      },
    }),
  ];
}
