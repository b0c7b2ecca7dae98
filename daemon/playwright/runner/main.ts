// The Playwright runner: a child process of the daemon, leading its own process group, with the
// minimal environment of the processes API. It keeps one Playwright connection to the daemon's
// CDP endpoint (session.ts) and runs one execution at a time: the code (compile.ts) gets `page`,
// `context` and `browser`; its output is forwarded while it runs and its result comes back as
// JSON (capture.ts). Messages are JSON lines: requests on stdin, answers on fd 3 (protocol.ts).
// The daemon enforces the timeout (SIGKILL to this group); an end of stdin ends the runner.
import { SerialQueue } from '../../core/serial-queue.js';
import net from 'node:net';
import type { Page } from 'playwright-core';
import { ANSWER_FD, type ExecuteMessage, type HelloMessage, type OutputMessage, type ResultMessage, type ToRunner } from '../protocol.js';
import { Capture, ResultError, resultJson, routeProcessOutput } from './capture.js';
import { CompileError, compile } from './compile.js';
import { Connection, UnavailableError } from './session.js';
import { serveRunner } from './serve.js';

const answers = new net.Socket({ fd: ANSWER_FD, readable: false, writable: true });
answers.on('error', () => process.exit(70)); // the daemon is gone

function send(message: object, rawResult?: string): void {
  let line = JSON.stringify(message);
  // The result's JSON is spliced in as it is: it was serialised (and measured) once already.
  if (rawResult !== undefined) line = `${line.slice(0, -1)},"result":${rawResult}}`;
  answers.write(`${line}\n`);
}

let hello: HelloMessage | null = null;
let connection: Connection | null = null;
let current: Capture | null = null;
let currentId = 0;

routeProcessOutput(() => current);
// An error the code left behind (a rejected promise nobody awaited, a throw in a timer) must not
// end the runner: it is reported on the stderr of the execution that runs (or on the real one).
process.on('unhandledRejection', (reason) => process.stderr.write(`Unhandled promise rejection: ${describe(reason, true)}\n`));
process.on('uncaughtException', (err) => process.stderr.write(`Uncaught exception: ${describe(err, true)}\n`));

function describe(err: unknown, withStack = false): string {
  if (err instanceof Error) return withStack && err.stack !== undefined ? err.stack : `${err.name}: ${err.message}`;
  try {
    return `thrown value: ${JSON.stringify(err) ?? String(err)}`;
  } catch {
    return `thrown value: ${String(err)}`;
  }
}

const OWN_FILES = new URL('..', import.meta.url).href;
const EVAL_FRAME = /eval at compile \([^)]*\), <anonymous>:(\d+):(\d+)/;
const ANONYMOUS_FRAME = new RegExp(`eval \\(${EVAL_FRAME.source}\\)`);
const toCode = (_m: string, line: string, col: string): string => `code:${Math.max(1, Number(line) - 1)}:${col}`;

/**
 * The stack without the runner's own frames and Node's internals; the code's frames read
 * `code:<line>:<column>`, the caller's own lines and columns (type stripping blanks the types out in
 * place).
 */
function cleanStack(stack: string): string {
  return stack
    .split('\n')
    .filter((l) => !/^\s+at /.test(l) || EVAL_FRAME.test(l) || (!l.includes(OWN_FILES) && !l.includes('node:internal/')))
    .map((l) => l.replace(ANONYMOUS_FRAME, toCode).replace(EVAL_FRAME, toCode))
    .join('\n');
}

async function execute(msg: ExecuteMessage, h: HelloMessage, conn: Connection): Promise<void> {
  const id = msg.id;
  const capture = new Capture(h.output_limit_bytes, {
    forward: (stream, data) => send({ type: 'output', id, stream, data } satisfies OutputMessage),
  });
  current = capture;
  currentId = id;
  const answer: ResultMessage = { type: 'result', id, success: true, stdout_truncated_bytes: 0, stderr_truncated_bytes: 0 };
  let raw: string | undefined;
  let ran: Page | undefined;
  try {
    const fn = compile(msg.code);
    const { page, context, browser, targetId, created } = await conn.session(msg.target_id);
    ran = page;
    answer.tab = { target_id: targetId, url: page.url(), created };
    raw = resultJson(await fn(page, context, browser), h.result_limit_bytes);
  } catch (err) {
    answer.success = false;
    if (err instanceof UnavailableError) answer.unavailable = err.message;
    else if (err instanceof CompileError || err instanceof ResultError) answer.error = err.message;
    else {
      answer.error = describe(err);
      // The stack is for the caller's debugging: on the execution's stderr, like Node's own report.
      if (err instanceof Error && err.stack !== undefined) capture.write('stderr', `${cleanStack(err.stack)}\n`);
    }
  } finally {
    if (currentId === id) current = null;
  }
  // Where the code left its tab.
  if (answer.tab !== undefined && ran !== undefined && !ran.isClosed()) answer.tab.url = ran.url();
  answer.stdout_truncated_bytes = capture.truncated.stdout;
  answer.stderr_truncated_bytes = capture.truncated.stderr;
  send(answer, answer.success ? raw : undefined);
}

/** One execution at a time, in the order asked. */
const executions = new SerialQueue();

function onMessage(msg: ToRunner): void {
  if (msg.type === 'hello') {
    if (hello !== null) return;
    hello = msg;
    connection = new Connection(msg.cdp_url, msg.token, msg.downloads_dir, msg.own_tab);
    connection.prime();
    return;
  }
  const h = hello;
  const conn = connection;
  if (h === null || conn === null) process.exit(71); // protocol broken: the daemon replaces the runner
  void executions.run(() => execute(msg, h, conn));
}

serveRunner(onMessage);
