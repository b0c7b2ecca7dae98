// The actions of a person at the browser, each as the events a real mouse and keyboard make:
// click = move (when the pointer is elsewhere) + press + release with `clickCount` 1, 2, 3…;
// drag = move, press, a path of moves with the button held, release; scroll = move, then one wheel
// event per wheel unit, then two animation frames so the page has seen them; keys through the
// Keyboard. Coordinates are CSS pixels of the viewport and must lie inside it (400 naming the
// field and the viewport's size). Whatever an action holds (keys, a dragging button) is released
// even when it fails or its client goes away.
import { Deadline } from '../core/deadline.js';
import { BadRequestError, UnsupportedFieldError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { KeyDef } from './keys.js';
import { Keyboard } from './keyboard.js';
import { autoDurationMs, linearPath, smoothPath, WHEEL_UNIT_PX, type Mouse, type Point } from './mouse.js';
import type { Page, Viewport } from './page.js';
import { DEFAULT_STEPS_PER_SEGMENT, type ClickParams, type CursorParams, type DragParams, type MoveParams, type PressKeyParams, type ScrollParams, type TypeParams } from './schemas.js';

/** Time given to releasing held keys and buttons after an action failed. */
const CLEANUP_TIMEOUT_MS = 2000;
/** The most a scroll waits for the page to have handled its wheel events (two animation frames). */
const SCROLL_SETTLE_MAX_MS = 500;

export interface ActionContext {
  page: Page;
  mouse: Mouse;
  /** The keys of this action (a new Keyboard per action: nothing stays held between actions). */
  keys: Keyboard;
  deadline: Deadline;
  log: Logger;
}

export function actionContext(page: Page, mouse: Mouse, deadline: Deadline, log: Logger): ActionContext {
  return { page, mouse, keys: new Keyboard(), deadline, log };
}

/** 400 unless every point lies in the viewport; one detail per coordinate outside. */
function checkPoints(v: Viewport, points: { field: string; p: Point }[]): void {
  const problems: string[] = [];
  const size = `the viewport is ${v.width}×${v.height} CSS pixels`;
  for (const { field, p } of points) {
    if (!(p.x >= 0 && p.x < v.width)) problems.push(`${field}x: ${p.x} is outside the viewport (0 ≤ x < ${v.width}; ${size})`);
    if (!(p.y >= 0 && p.y < v.height)) problems.push(`${field}y: ${p.y} is outside the viewport (0 ≤ y < ${v.height}; ${size})`);
  }
  if (problems.length > 0) throw new BadRequestError(problems);
}

export async function clickMouse(ctx: ActionContext, p: ClickParams): Promise<void> {
  checkPoints(ctx.page.viewport, [{ field: '', p }]);
  const button = p.button ?? 'left';
  await holding(ctx, p.hold_keys, async (mods) => {
    await ctx.mouse.move(ctx.page, { x: p.x, y: p.y }, mods, ctx.deadline);
    const type = p.click_type ?? 'click';
    if (type === 'down') return ctx.mouse.press(ctx.page, button, 1, mods, ctx.deadline);
    if (type === 'up') return ctx.mouse.release(ctx.page, button, 1, mods, ctx.deadline);
    for (let n = 1; n <= (p.num_clicks ?? 1); n++) {
      await ctx.mouse.press(ctx.page, button, n, mods, ctx.deadline);
      await ctx.mouse.release(ctx.page, button, n, mods, ctx.deadline);
    }
  });
}

export async function moveMouse(ctx: ActionContext, p: MoveParams): Promise<void> {
  checkPoints(ctx.page.viewport, [{ field: '', p }]);
  const to = { x: p.x, y: p.y };
  await holding(ctx, p.hold_keys, async (mods) => {
    if (p.smooth !== true) return ctx.mouse.move(ctx.page, to, mods, ctx.deadline);
    const from = ctx.mouse.position();
    const duration = p.duration_ms ?? autoDurationMs(Math.hypot(to.x - from.x, to.y - from.y));
    await ctx.mouse.moveAlong(ctx.page, smoothPath(from, to, duration, ctx.page.viewport), duration, mods, ctx.deadline);
  });
}

export async function dragMouse(ctx: ActionContext, p: DragParams): Promise<void> {
  const points = p.path.map(([x, y]) => ({ x, y }));
  checkPoints(ctx.page.viewport, points.map((pt, i) => ({ field: `path.${i}.`, p: pt })));
  const button = p.button ?? 'left';
  const lengths = points.slice(1).map((b, i) => Math.hypot(b.x - (points[i] as Point).x, b.y - (points[i] as Point).y));
  const total = lengths.reduce((a, b) => a + b, 0);
  await holding(ctx, p.hold_keys, async (mods) => {
    const { mouse, page, deadline } = ctx;
    await mouse.move(page, points[0] as Point, mods, deadline);
    await mouse.press(page, button, 1, mods, deadline);
    let done = false;
    try {
      if ((p.delay ?? 0) > 0) await deadline.sleep(p.delay as number);
      for (let i = 1; i < points.length; i++) {
        const a = points[i - 1] as Point;
        const b = points[i] as Point;
        if (p.smooth === true) {
          const len = lengths[i - 1] as number;
          const duration = p.duration_ms !== undefined ? (total === 0 ? p.duration_ms / lengths.length : (p.duration_ms * len) / total) : autoDurationMs(len);
          await mouse.moveAlong(page, smoothPath(a, b, duration, page.viewport), duration, mods, deadline);
          continue;
        }
        const steps = linearPath(a, b, p.steps_per_segment ?? DEFAULT_STEPS_PER_SEGMENT);
        for (let s = 0; s < steps.length; s++) {
          if ((p.step_delay_ms ?? 0) > 0 && !(i === 1 && s === 0)) await deadline.sleep(p.step_delay_ms as number);
          await mouse.move(page, steps[s] as Point, mods, deadline);
        }
      }
      done = true;
    } finally {
      if (done) await mouse.release(page, button, 1, mods, deadline);
      else await cleanup(ctx, 'mouse button', (d) => mouse.release(page, button, 1, mods, d));
    }
  });
}

export async function scroll(ctx: ActionContext, p: ScrollParams): Promise<void> {
  checkPoints(ctx.page.viewport, [{ field: '', p }]);
  await holding(ctx, p.hold_keys, async (mods) => {
    const { mouse, page, deadline } = ctx;
    await mouse.move(page, { x: p.x, y: p.y }, mods, deadline);
    const dy = p.delta_y ?? 0;
    const dx = p.delta_x ?? 0;
    for (let i = 0; i < Math.abs(dy); i++) await mouse.wheel(page, 0, Math.sign(dy) * WHEEL_UNIT_PX, mods, deadline);
    for (let i = 0; i < Math.abs(dx); i++) await mouse.wheel(page, Math.sign(dx) * WHEEL_UNIT_PX, 0, mods, deadline);
    if (dx !== 0 || dy !== 0) await settle(ctx);
  });
}

export async function typeText(ctx: ActionContext, p: TypeParams): Promise<void> {
  try {
    await ctx.keys.type(ctx.page, p.text, p.delay ?? 0, ctx.deadline);
  } finally {
    await cleanup(ctx, 'keys', (d) => ctx.keys.releaseAll(ctx.page, d));
  }
}

export async function pressKey(ctx: ActionContext, p: PressKeyParams): Promise<void> {
  await holding(ctx, p.hold_keys, async () => {
    for (const item of p.keys) await ctx.keys.combo(ctx.page, item, p.duration ?? 0, ctx.deadline);
  });
}

/** Screenshots never show a pointer (they are of the page, not of a screen): hidden is what it always is. */
export function setCursor(p: CursorParams): void {
  if (!p.hidden) {
    throw new UnsupportedFieldError(
      'hidden',
      'false asks for a visible pointer, which this browser cannot show: screenshots are taken of the page by Chromium, never with a pointer drawn in them (headless or not); hidden: true is always the case',
    );
  }
}

/** Presses `keys` (in order), runs `fn` with their modifier bits, then releases them (in reverse), also on failure. */
async function holding(ctx: ActionContext, keys: KeyDef[][] | undefined, fn: (modifiers: number) => Promise<void>): Promise<void> {
  let ok = false;
  try {
    for (const k of (keys ?? []).flat()) await ctx.keys.down(ctx.page, k, ctx.deadline);
    await fn(ctx.keys.modifiers);
    ok = true;
  } finally {
    if (ok) await ctx.keys.releaseAll(ctx.page, ctx.deadline);
    else await cleanup(ctx, 'keys', (d) => ctx.keys.releaseAll(ctx.page, d));
  }
}

/** Releases after a failure, within CLEANUP_TIMEOUT_MS of its own (the action's deadline may be over); a failure here is logged, not thrown. */
async function cleanup(ctx: ActionContext, what: string, fn: (d: Deadline) => Promise<void>): Promise<void> {
  const d = Deadline.in(CLEANUP_TIMEOUT_MS, `releasing the held ${what}`);
  try {
    await fn(d);
  } catch (err) {
    ctx.log.debug({ event: 'computer_release_failed', what, reason: (err as Error).message }, 'held input could not be released (the page may be gone)');
  } finally {
    d.dispose();
  }
}

/** Two animation frames in the page: wheel events are delivered with the next frame, after Input.dispatchMouseEvent has answered. */
async function settle(ctx: ActionContext): Promise<void> {
  const d = Deadline.in(SCROLL_SETTLE_MAX_MS, 'the page handling the wheel', ctx.deadline.signal);
  try {
    await ctx.page.call('() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))', [], d);
  } catch (err) {
    ctx.deadline.check();
    ctx.log.debug({ event: 'computer_scroll_settle', reason: (err as Error).message }, 'the page did not draw two frames in time after a scroll');
  } finally {
    d.dispose();
  }
}
