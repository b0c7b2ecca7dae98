// The REPL worker: one long-lived Node process per session, started by the daemon as the agent
// user exactly as a Playwright runner is (playwright/pool.ts: its own process group, a token of
// scope `cdp` on stdin, answers on fd 3, the orphan watchdog) and speaking the runner's protocol
// (playwright/protocol.ts): `execute` runs one cell (evaluate.ts) with the helpers as globals
// (helpers.ts), in the order asked; the `result` carries {content, content_truncated}, and the
// cell's console output is also streamed as `output` lines, so that a timeout or a crash keeps it.
import net from 'node:net';
import { inspect } from 'node:util';
import { SerialQueue } from '../../core/serial-queue.js';
// The runner's own parts, not the playwright module's face: this process loads only what it runs.
import { ANSWER_FD, type ExecuteMessage, type HelloMessage, type ResultMessage, type ToRunner } from '../../playwright/protocol.js';
import { Capture, routeProcessOutput } from '../../playwright/runner/capture.js';
import { serveRunner } from '../../playwright/runner/serve.js';
import { REPL_TEXT_LIMIT_BYTES } from '../limits.js';
import { ReplBrowser } from './browser.js';
import { Content } from './content.js';
import { CellSyntaxError, runCell } from './evaluate.js';
import { makeHelpers } from './helpers.js';

const answers = new net.Socket({ fd: ANSWER_FD, readable: false, writable: true });
answers.on('error', () => process.exit(70)); // the daemon is gone

const send = (message: object): void => void answers.write(`${JSON.stringify(message)}\n`);

let browser: ReplBrowser | null = null;
let capture: Capture | null = null;
let content = new Content();

routeProcessOutput(() => capture);
// What a cell left behind (a rejected promise nobody awaited, a throw in a timer) must not end the
// REPL: it goes to the stderr of the call that runs (or to the real one, logged by the daemon).
process.on('unhandledRejection', (reason) => process.stderr.write(`Unhandled promise rejection: ${describe(reason)}\n`));
process.on('uncaughtException', (err) => process.stderr.write(`Uncaught exception: ${describe(err)}\n`));

function describe(err: unknown): string {
  if (err instanceof Error) return `${err.name}: ${err.message}`;
  try {
    return `thrown value: ${JSON.stringify(err) ?? String(err)}`;
  } catch {
    return `thrown value: ${String(err)}`;
  }
}

/** The stack's lines of the cell and of what it called, without the worker's own frames. */
function cellStack(err: unknown): string | undefined {
  if (!(err instanceof Error) || err.stack === undefined) return undefined;
  return err.stack
    .split('\n')
    .filter((l) => !/^\s+at /.test(l) || (!l.includes('/repl/worker/') && !l.includes('node:internal/')))
    .join('\n');
}

async function execute(msg: ExecuteMessage): Promise<void> {
  const id = msg.id;
  content = new Content();
  const here = content;
  capture = new Capture(REPL_TEXT_LIMIT_BYTES, {
    forward: (stream, data) => {
      here.text(stream, data);
      send({ type: 'output', id, stream, data });
    },
  });
  const answer: ResultMessage & { stack?: string } = { type: 'result', id, success: true, stdout_truncated_bytes: 0, stderr_truncated_bytes: 0 };
  try {
    const value = await runCell(msg.code);
    // A string as it is (an outline, a page's text); anything else as Node's REPL prints it.
    if (typeof value === 'string') here.text('result', value);
    else if (value !== undefined) here.text('result', inspect(value, { depth: 4, maxArrayLength: 200, maxStringLength: 100_000, breakLength: 120 }));
  } catch (err) {
    answer.success = false;
    answer.error = err instanceof CellSyntaxError ? `SyntaxError: ${err.message}` : describe(err);
    const stack = err instanceof CellSyntaxError ? undefined : cellStack(err);
    if (stack !== undefined) answer.stack = stack;
  } finally {
    capture = null;
  }
  answer.stdout_truncated_bytes = 0;
  answer.stderr_truncated_bytes = 0;
  answer.result = { content: here.items, content_truncated: here.truncated };
  send(answer);
}

/** One cell at a time, in the order asked. */
const cells = new SerialQueue();

function onMessage(msg: ToRunner): void {
  if (msg.type === 'hello') {
    if (browser !== null) return;
    const hello: HelloMessage = msg;
    browser = new ReplBrowser(hello.cdp_url, hello.token);
    const b = browser;
    Object.assign(globalThis, makeHelpers(b, () => content));
    return;
  }
  if (browser === null) process.exit(71); // protocol broken: the daemon starts a new worker
  void cells.run(() => execute(msg));
}

serveRunner(onMessage);
