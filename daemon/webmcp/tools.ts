// The tools pages register with document.modelContext.registerTool (WebMCP), read and called over
// CDP's WebMCP domain on a browser-level session of the daemon's own (one per request: nothing
// is kept between requests, so nothing goes stale when a page navigates or Chromium restarts).
// Each page is attached (flat sessions); WebMCP.enable answers after a `toolsAdded` event with
// every tool the page has (seen on Chromium 156). A tool is named by its page, frame and name:
// the tool_ref (tool-ref.ts).
import type { Protocol } from 'devtools-protocol';
import { attachPage } from '../cdp/attach.js';
import type { CdpClient } from '../cdp/client.js';
import type { Deadline } from '../core/deadline.js';
import { BrowserdError, NotFoundError } from '../core/errors.js';
import { encodeToolRef, type ToolRef } from './tool-ref.js';

export interface ListedTool {
  tool_ref: string;
  tool: { name: string; description: string; inputSchema?: unknown; outputSchema?: unknown; annotations?: Protocol.WebMCP.Annotation };
  source: { target_id: string; page_url: string; page_title: string; frame: { frame_id: string; url: string; main: boolean } };
}

export interface Invocation {
  invocation_id: string;
  status: 'completed' | 'error' | 'canceled';
  output?: unknown;
  error_text?: string;
}

/** Runs `fn` on a flat session of the page `targetId`, detached after (also when the deadline ended: the detach is not bound by it). */
async function withPage<T>(cdp: CdpClient, targetId: string, deadline: Deadline, fn: (sessionId: string) => Promise<T>): Promise<T> {
  const page = await attachPage(cdp, targetId, { deadline });
  try {
    return await fn(page.sessionId);
  } finally {
    page.detach();
  }
}

/** The page's tools, as WebMCP.enable reports them (the toolsAdded events before its answer). */
async function toolsOf(cdp: CdpClient, sessionId: string, deadline: Deadline): Promise<Protocol.WebMCP.Tool[]> {
  const tools: Protocol.WebMCP.Tool[] = [];
  const off = cdp.on('WebMCP.toolsAdded', (p, sid) => {
    if (sid === sessionId) tools.push(...p.tools);
  });
  try {
    await cdp.send('WebMCP.enable', {}, { sessionId, deadline });
  } finally {
    off();
  }
  return tools;
}

function framesOf(tree: Protocol.Page.FrameTree, into = new Map<string, string>()): Map<string, string> {
  into.set(tree.frame.id, tree.frame.url + (tree.frame.urlFragment ?? ''));
  for (const child of tree.childFrames ?? []) framesOf(child, into);
  return into;
}

/** Every tool of every open page (pages of every browser context), in the order of the targets. */
export async function listTools(cdp: CdpClient, deadline: Deadline): Promise<ListedTool[]> {
  const { targetInfos } = await cdp.send('Target.getTargets', {}, { deadline });
  const pages = targetInfos.filter((t) => t.type === 'page');
  const perPage = await Promise.all(
    pages.map((page) =>
      withPage(cdp, page.targetId, deadline, async (sessionId) => {
        const tools = await toolsOf(cdp, sessionId, deadline);
        if (tools.length === 0) return [];
        // The page's own title and URL: the target's lag behind a page that is still loading.
        const [tree, here] = await Promise.all([
          cdp.send('Page.getFrameTree', {}, { sessionId, deadline }),
          cdp.send('Runtime.evaluate', { expression: '[document.title, location.href]', returnByValue: true }, { sessionId, deadline }).catch(() => null),
        ]);
        const frames = framesOf(tree.frameTree);
        const [title, url] = Array.isArray(here?.result.value) ? (here.result.value as [string, string]) : [page.title, page.url];
        return tools.map((t): ListedTool => {
          const { name, description, inputSchema, outputSchema, annotations } = t;
          return {
            tool_ref: encodeToolRef({ targetId: page.targetId, frameId: t.frameId, name }),
            tool: { name, description, ...(inputSchema === undefined ? {} : { inputSchema }), ...(outputSchema === undefined ? {} : { outputSchema }), ...(annotations === undefined ? {} : { annotations }) },
            source: { target_id: page.targetId, page_url: url, page_title: title, frame: { frame_id: t.frameId, url: frames.get(t.frameId) ?? '', main: t.frameId === page.targetId } },
          };
        });
      }).catch(async (err: unknown) => {
        // A page that closed while it was read has no tools.
        const now = await cdp.send('Target.getTargets', {}, { deadline });
        if (!now.targetInfos.some((t) => t.targetId === page.targetId)) return [];
        throw err;
      }),
    ),
  );
  return perPage.flat();
}

const STATUS: Record<Protocol.WebMCP.InvocationStatus, Invocation['status']> = { Completed: 'completed', Error: 'error', Canceled: 'canceled' };

/** The text of a tool's failure: Chromium's errorText, else the exception the tool threw. */
function errorText(r: Protocol.WebMCP.ToolRespondedEvent): string | undefined {
  if (r.errorText !== undefined && r.errorText !== '') return r.errorText;
  const e = r.exception;
  if (e === undefined) return r.status === 'Canceled' ? 'the invocation was canceled' : undefined;
  return e.description ?? (e.value === undefined ? e.type : String(e.value));
}

/**
 * Calls the tool `ref` with `input` and waits for its answer until `timeoutMs`; then the
 * invocation is canceled and the answer is 504 `timeout` with its id. A page that is gone, or a
 * tool it no longer has (it navigated away), is 404.
 */
export async function invokeTool(cdp: CdpClient, ref: ToolRef, input: unknown, timeoutMs: number, deadline: Deadline): Promise<Invocation> {
  const { targetInfos } = await cdp.send('Target.getTargets', {}, { deadline });
  if (!targetInfos.some((t) => t.targetId === ref.targetId && t.type === 'page')) {
    throw new NotFoundError(`the page of tool ${ref.name} is gone (target ${ref.targetId}); GET …/webmcp/tools lists the tools there are`);
  }
  return withPage(cdp, ref.targetId, deadline, async (sessionId) => {
    const tools = await toolsOf(cdp, sessionId, deadline);
    if (!tools.some((t) => t.name === ref.name && t.frameId === ref.frameId)) {
      throw new NotFoundError(`the page no longer offers tool ${ref.name} in frame ${ref.frameId} (it navigated or unregistered it); GET …/webmcp/tools lists the tools there are`);
    }
    const answers = new Map<string, Protocol.WebMCP.ToolRespondedEvent>();
    let wanted: string | null = null;
    let onAnswer: (() => void) | null = null;
    const off = cdp.on('WebMCP.toolResponded', (p, sid) => {
      if (sid !== sessionId) return;
      answers.set(p.invocationId, p);
      if (p.invocationId === wanted) onAnswer?.();
    });
    try {
      const { invocationId } = await cdp.send('WebMCP.invokeTool', { frameId: ref.frameId, toolName: ref.name, input }, { sessionId, deadline });
      wanted = invocationId;
      const answered = answers.get(invocationId) ?? (await waitAnswer(invocationId, answers, timeoutMs, (f) => (onAnswer = f)));
      if (answered === null) {
        await cdp.send('WebMCP.cancelInvocation', { invocationId }, { sessionId, deadline }).catch(() => undefined);
        throw new BrowserdError('timeout', `tool ${ref.name} did not answer within ${timeoutMs / 1000} s (timeout_sec); invocation ${invocationId} was canceled`, {
          details: [{ code: 'invocation_id', message: invocationId }],
        });
      }
      const text = errorText(answered);
      return {
        invocation_id: invocationId,
        status: STATUS[answered.status],
        ...(answered.output === undefined ? {} : { output: answered.output as unknown }),
        ...(answered.status !== 'Completed' && text !== undefined ? { error_text: text } : {}),
      };
    } finally {
      off();
    }
  });
}

function waitAnswer(
  id: string,
  answers: Map<string, Protocol.WebMCP.ToolRespondedEvent>,
  timeoutMs: number,
  setWaiter: (f: () => void) => void,
): Promise<Protocol.WebMCP.ToolRespondedEvent | null> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(null), timeoutMs);
    setWaiter(() => {
      clearTimeout(timer);
      resolve(answers.get(id) ?? null);
    });
  });
}
