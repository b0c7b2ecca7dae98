// Batches: the SDK's list of actions, run in order on the page current at each action, stopping at
// the first failure. The whole list is validated before anything runs (schema, key names, the sum
// of its waits); what can only be known when an action runs (its coordinates against the viewport
// of that moment, a page gone) fails that action, and the error names its index: the message
// starts with `actions[i] (type): `, bad_request details name the field as `actions.i.type.field`,
// and every other error carries the detail `{code: "failed_action", message: "actions[i]"}`.
import type { Deadline } from '../core/deadline.js';
import { BrowserdError, BadRequestError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { actionContext, clickMouse, dragMouse, moveMouse, pressKey, scroll, setCursor, typeText } from './actions.js';
import type { Computer, Run } from './controller.js';
import { autoDurationMs, SMOOTH_AUTO_MAX_MS } from './mouse.js';
import { DEFAULT_STEPS_PER_SEGMENT, type BatchAction, type ClickParams, type DragParams, type MoveParams, type PressKeyParams, type ScrollParams, type TypeParams } from './schemas.js';

type ActionType = BatchAction['type'];

/** The waits an action asks for (delays, durations, sleeps), in ms: the part of its deadline that is not the browser's work. */
export function plannedWaitMs(a: BatchAction): number {
  switch (a.type) {
    case 'move_mouse':
      return moveWait(a.move_mouse as MoveParams);
    case 'drag_mouse':
      return dragWait(a.drag_mouse as DragParams);
    case 'type_text':
      return typeWait(a.type_text as TypeParams);
    case 'press_key':
      return pressWait(a.press_key as PressKeyParams);
    case 'sleep':
      return a.sleep?.duration_ms ?? 0;
    default:
      return 0;
  }
}

export function moveWait(p: MoveParams): number {
  return p.smooth === true ? (p.duration_ms ?? SMOOTH_AUTO_MAX_MS) : 0;
}

export function dragWait(p: DragParams): number {
  const segments = p.path.length - 1;
  const moving =
    p.smooth === true
      ? (p.duration_ms ?? segments * autoDurationMs(Number.POSITIVE_INFINITY))
      : (p.step_delay_ms ?? 0) * Math.max(0, segments * (p.steps_per_segment ?? DEFAULT_STEPS_PER_SEGMENT) - 1);
  return (p.delay ?? 0) + moving;
}

export function typeWait(p: TypeParams): number {
  return (p.delay ?? 0) * Math.max(0, p.text.length - 1);
}

export function pressWait(p: PressKeyParams): number {
  return (p.duration ?? 0) * p.keys.length;
}

/** 400 when the waits of a request add up to more than BROWSERD_COMPUTER_MAX_WAIT_MS. */
export function checkWaits(totalMs: number, maxMs: number, field: string): void {
  if (totalMs > maxMs) {
    throw BadRequestError.field(field, `the delays, durations and sleeps asked for add up to ${Math.round(totalMs)} ms, over BROWSERD_COMPUTER_MAX_WAIT_MS (${maxMs} ms)`);
  }
}

/** The error of action `index` as the batch's answer: the same code, its index in the message and details. */
function atIndex(err: unknown, index: number, type: ActionType): unknown {
  if (!(err instanceof BrowserdError)) return err;
  const label = `actions[${index}] (${type})`;
  const details =
    err.code === 'bad_request'
      ? err.details?.map((d) => ({ code: d.code, message: d.message.startsWith('actions.') ? d.message : `actions.${index}.${type}.${d.message}` }))
      : [...(err.details ?? []), { code: 'failed_action', message: `actions[${index}]` }];
  const wrapped = new BrowserdError(err.code, `${label}: ${err.message}`, {
    details,
    inner: err.inner,
    retryable: err.retryable,
    retryAfterMs: err.retryAfterMs,
    cause: err,
  });
  return wrapped;
}

/** Runs the actions in order; the first failure ends the batch with its index. */
export async function runBatch(computer: Computer, run: Run, actions: BatchAction[], deadline: Deadline, budget: number, log: Logger): Promise<void> {
  for (const [i, a] of actions.entries()) {
    try {
      await runAction(computer, run, a, deadline, log);
    } catch (err) {
      throw atIndex(computer.explain(err, deadline, `batch action ${a.type}`, budget), i, a.type);
    }
  }
}

async function runAction(computer: Computer, run: Run, a: BatchAction, deadline: Deadline, log: Logger): Promise<void> {
  if (a.type === 'sleep') return deadline.sleep(a.sleep?.duration_ms ?? 0);
  if (a.type === 'set_cursor') return setCursor(a.set_cursor as { hidden: boolean });
  const ctx = actionContext(await computer.page(run, deadline), run.mouse, deadline, log);
  switch (a.type) {
    case 'click_mouse':
      return clickMouse(ctx, a.click_mouse as ClickParams);
    case 'move_mouse':
      return moveMouse(ctx, a.move_mouse as MoveParams);
    case 'drag_mouse':
      return dragMouse(ctx, a.drag_mouse as DragParams);
    case 'scroll':
      return scroll(ctx, a.scroll as ScrollParams);
    case 'type_text':
      return typeText(ctx, a.type_text as TypeParams);
    case 'press_key':
      return pressKey(ctx, a.press_key as PressKeyParams);
  }
}
