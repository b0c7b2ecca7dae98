// The mouse of the browser: where it is, which buttons are down, and the page that last saw it. One
// per Chromium run; it outlives tab switches (a person's pointer stays where it was). Every event
// goes through Input.dispatchMouseEvent to the page's session with the held buttons as `buttons`,
// so the page sees what a real pointer does (pointer* and mouse* events, `detail`, hover).
import type { Deadline } from '../core/deadline.js';
import type { Page, Viewport } from './page.js';

export type Button = 'left' | 'middle' | 'right' | 'back' | 'forward';

/** MouseEvent.buttons bits. */
const BUTTON_BITS: Record<Button, number> = { left: 1, right: 2, middle: 4, back: 8, forward: 16 };

/** Pixels one xdotool wheel unit scrolls in Chromium on X11 (ui/events/x: kWheelScrollAmount, as GTK). */
export const WHEEL_UNIT_PX = 53;
/** One step of a smooth move per frame, about. */
export const FRAME_MS = 16;
/** Smooth moves without duration_ms: 0.5 ms per pixel, within these bounds. */
const SMOOTH_AUTO_MIN_MS = 200;
export const SMOOTH_AUTO_MAX_MS = 1000;
/** The most steps one smooth segment is cut into. */
const SMOOTH_MAX_STEPS = 120;

export interface Point {
  x: number;
  y: number;
}

export class Mouse {
  x = 0;
  y = 0;
  /** Buttons held down (a `click_type: down` leaves one held until its `up`). */
  private buttons = 0;
  /** The page that received the last mouse event. */
  private lastTarget: string | null = null;

  position(): Point {
    return { x: this.x, y: this.y };
  }

  get held(): Button[] {
    return (Object.keys(BUTTON_BITS) as Button[]).filter((b) => (this.buttons & BUTTON_BITS[b]) !== 0);
  }

  /** Moves the pointer; nothing is sent when it is already there on this page (a person's pointer that does not move makes no event). */
  async move(page: Page, to: Point, modifiers: number, deadline: Deadline): Promise<void> {
    if (to.x === this.x && to.y === this.y && this.lastTarget === page.targetId) return;
    await page.send('Input.dispatchMouseEvent', { type: 'mouseMoved', x: to.x, y: to.y, modifiers, button: this.held[0] ?? 'none', buttons: this.buttons, pointerType: 'mouse' }, deadline);
    this.x = to.x;
    this.y = to.y;
    this.lastTarget = page.targetId;
  }

  async press(page: Page, button: Button, clickCount: number, modifiers: number, deadline: Deadline): Promise<void> {
    const buttons = this.buttons | BUTTON_BITS[button];
    await page.send('Input.dispatchMouseEvent', { type: 'mousePressed', x: this.x, y: this.y, modifiers, button, buttons, clickCount, pointerType: 'mouse' }, deadline);
    this.buttons = buttons;
    this.lastTarget = page.targetId;
  }

  async release(page: Page, button: Button, clickCount: number, modifiers: number, deadline: Deadline): Promise<void> {
    const buttons = this.buttons & ~BUTTON_BITS[button];
    this.buttons = buttons; // even when the page is gone: the button is up
    await page.send('Input.dispatchMouseEvent', { type: 'mouseReleased', x: this.x, y: this.y, modifiers, button, buttons, clickCount, pointerType: 'mouse' }, deadline);
  }

  isDown(button: Button): boolean {
    return (this.buttons & BUTTON_BITS[button]) !== 0;
  }

  /** One wheel notch (or a part of one) at the pointer. */
  async wheel(page: Page, deltaX: number, deltaY: number, modifiers: number, deadline: Deadline): Promise<void> {
    await page.send('Input.dispatchMouseEvent', { type: 'mouseWheel', x: this.x, y: this.y, modifiers, button: 'none', buttons: this.buttons, deltaX, deltaY, pointerType: 'mouse' }, deadline);
    this.lastTarget = page.targetId;
  }

  /** Moves along `points`, one event each, paced so that the last one is sent `durationMs` after the first (when there is time). */
  async moveAlong(page: Page, points: Point[], durationMs: number, modifiers: number, deadline: Deadline): Promise<void> {
    const t0 = Date.now();
    for (let i = 0; i < points.length; i++) {
      const due = t0 + (points.length > 1 ? (durationMs * i) / (points.length - 1) : 0);
      const wait = due - Date.now();
      if (wait > 0) await deadline.sleep(wait);
      await this.move(page, points[i] as Point, modifiers, deadline);
    }
  }
}

/** The duration of a smooth move without `duration_ms`. */
export function autoDurationMs(distance: number): number {
  return Math.min(SMOOTH_AUTO_MAX_MS, Math.max(SMOOTH_AUTO_MIN_MS, distance * 0.5));
}

/** The points of a human-like move from `a` to `b`: a cubic Bézier with control points off the straight line, eased in and out; ends exactly at `b`. */
export function smoothPath(a: Point, b: Point, durationMs: number, viewport: Viewport, random: () => number = Math.random): Point[] {
  const steps = Math.min(SMOOTH_MAX_STEPS, Math.max(2, Math.round(durationMs / FRAME_MS)));
  const dx = b.x - a.x;
  const dy = b.y - a.y;
  const dist = Math.hypot(dx, dy);
  const nx = dist === 0 ? 0 : -dy / dist;
  const ny = dist === 0 ? 0 : dx / dist;
  const bend = (): number => (random() - 0.5) * Math.min(dist * 0.5, 200);
  const c1 = clamp({ x: a.x + dx * 0.3 + nx * bend(), y: a.y + dy * 0.3 + ny * bend() }, viewport);
  const c2 = clamp({ x: a.x + dx * 0.7 + nx * bend(), y: a.y + dy * 0.7 + ny * bend() }, viewport);
  const points: Point[] = [];
  for (let i = 1; i < steps; i++) {
    const t = ease(i / steps);
    const u = 1 - t;
    const x = u * u * u * a.x + 3 * u * u * t * c1.x + 3 * u * t * t * c2.x + t * t * t * b.x;
    const y = u * u * u * a.y + 3 * u * u * t * c1.y + 3 * u * t * t * c2.y + t * t * t * b.y;
    points.push(clamp({ x: Math.round(x), y: Math.round(y) }, viewport));
  }
  points.push(b);
  return points;
}

/** `steps` evenly spaced points from `a` (excluded) to `b` (included). */
export function linearPath(a: Point, b: Point, steps: number): Point[] {
  const points: Point[] = [];
  for (let i = 1; i < steps; i++) points.push({ x: Math.round(a.x + ((b.x - a.x) * i) / steps), y: Math.round(a.y + ((b.y - a.y) * i) / steps) });
  points.push(b);
  return points;
}

function ease(t: number): number {
  return t < 0.5 ? 2 * t * t : 1 - (-2 * t + 2) ** 2 / 2;
}

function clamp(p: Point, v: Viewport): Point {
  return { x: Math.min(Math.max(p.x, 0), v.width - 1), y: Math.min(Math.max(p.y, 0), v.height - 1) };
}
