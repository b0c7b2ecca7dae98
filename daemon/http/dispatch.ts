// Running a matched route: the handler's reply written as JSON, or — for a state-changing request
// with an Idempotency-Key — claimed in the idempotency store first, so a repeat replays the first
// answer (byte for byte, with `idempotent-replayed: true`) instead of doing the work again.
import type { ServerResponse } from 'node:http';
import { toHttpError } from './errors.js';
import { BodyTap, type IdempotencyStore, type StoredAnswer } from './idempotency.js';
import { isZod } from './openapi.js';
import type { Reply, RequestContext, HttpRoute } from './router.js';

/** How much of a repeat's body is read to compare it with the first's (past it: not compared). */
const REPEAT_BODY_LIMIT = 4 * 1024 * 1024 * 1024;

export function isStateChanging(method: string | undefined): boolean {
  return method === 'POST' || method === 'PUT' || method === 'PATCH' || method === 'DELETE';
}

function answerOf(reply: NonNullable<Reply>): StoredAnswer {
  const headers: Record<string, string> = { ...(reply.headers ?? {}) };
  // An error status a handler answers itself (not a thrown error: a proxied WebDriver answer) says
  // whether a retry is safe too: not, unless the handler said so.
  if (reply.status >= 400 && headers['x-should-retry'] === undefined) headers['x-should-retry'] = 'false';
  if (reply.body === undefined) return { status: reply.status, headers, body: Buffer.alloc(0) };
  headers['content-type'] = 'application/json; charset=utf-8';
  return { status: reply.status, headers, body: Buffer.from(JSON.stringify(reply.body)) };
}

function writeAnswer(res: ServerResponse, answer: StoredAnswer, extra: Record<string, string> = {}): void {
  if (res.headersSent) return;
  for (const [k, v] of Object.entries({ ...answer.headers, ...extra })) res.setHeader(k, v);
  if (answer.body.length === 0 && answer.headers['content-type'] === undefined) {
    res.writeHead(answer.status).end();
    return;
  }
  res.writeHead(answer.status, { 'content-length': answer.body.length }).end(answer.body);
}

/**
 * The route's handler, handed what its doc declares: a JSON body (a zod `doc.body`) is read and
 * validated first, into ctx.body (unless the route reads its body itself). With `checkAnswers` (the
 * test build), a JSON answer must be one of `doc.responses`, and match its zod schema: a handler
 * that answers off its document fails (500, logged), so the suite sees it.
 */
async function invoke(ctx: RequestContext, route: HttpRoute, checkAnswers: boolean): Promise<Reply> {
  const body = route.doc.body;
  if (body !== undefined && isZod(body) && route.readsBody !== true) {
    ctx.body = await ctx.json(body, { limitBytes: route.bodyLimitBytes, optional: route.doc.bodyRequired === false });
  }
  const reply = await route.handler(ctx);
  if (checkAnswers && reply !== null) checkAnswer(route, reply);
  return reply;
}

/** The test build's check of an answer against the route's `doc.responses`. */
function checkAnswer(route: HttpRoute, reply: NonNullable<Reply>): void {
  const declared = route.doc.responses[reply.status];
  const where = `${route.method} ${route.path} answered ${reply.status}`;
  if (declared === undefined) throw new Error(`${where}, which its doc.responses does not list (${Object.keys(route.doc.responses).join(', ')})`);
  if (reply.body === undefined || declared.schema === undefined || !isZod(declared.schema)) return;
  const parsed = declared.schema.safeParse(reply.body);
  if (!parsed.success) throw new Error(`${where} off its schema: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`).join('; ')}`);
}

export async function runRoute(ctx: RequestContext, route: HttpRoute, checkAnswers = false): Promise<void> {
  const reply = await invoke(ctx, route, checkAnswers);
  if (reply !== null) writeAnswer(ctx.res, answerOf(reply));
}

/** The route run once per Idempotency-Key; errors are thrown for the server to write (and kept first when final). */
/** `tap`: the body's tap when the server made it already (before waiting to authenticate). */
export async function runKeyed(ctx: RequestContext, route: HttpRoute, store: IdempotencyStore, scope: string, key: string, tap = new BodyTap(ctx.req), checkAnswers = false): Promise<void> {
  const shape = JSON.stringify([ctx.req.method, route.path, ctx.params, ctx.url.search]);
  for (;;) {
    const claim = store.claim(scope, key, shape);
    if (claim.kind === 'repeat') {
      const answer = await claim.wait(await tap.drain(REPEAT_BODY_LIMIT));
      if (answer === null) continue; // the first's answer was one a retry may redo: this one runs
      ctx.log.info({ event: 'idempotent_replay', route: route.path }, 'answered from the idempotency key');
      writeAnswer(ctx.res, answer, { 'idempotent-replayed': 'true' });
      return;
    }
    let reply: Reply;
    try {
      reply = await invoke(ctx, route, checkAnswers);
    } catch (err) {
      const e = toHttpError(err);
      const final = e.headers['x-should-retry'] !== 'true' && !e.unexpected;
      claim.settle(final ? { status: e.status, headers: { ...e.headers, 'content-type': 'application/json; charset=utf-8' }, body: Buffer.from(JSON.stringify(e.body)) } : null, tap.digest());
      throw err;
    }
    if (reply === null) {
      claim.settle(null, null); // the handler wrote its own answer (a stream): nothing to replay
      return;
    }
    const answer = answerOf(reply);
    claim.settle(answer, tap.digest());
    writeAnswer(ctx.res, answer);
    return;
  }
}
