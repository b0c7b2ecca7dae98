// The request bodies of the computer routes, field for field as @onkernel/sdk 0.84 declares them
// (resources/browsers/computer.d.ts), strict (an unknown field is 400), with the limits of
// BROWSERD_COMPUTER_* and the constants below. Key names are resolved here: an unknown one is a
// bad_request detail naming its place (`keys.2`, `actions.0.press_key.hold_keys.1`).
import { z } from 'zod';
import { lazy } from '../core/lazy.js';
import { parseCombo, type KeyDef } from './keys.js';

/** num_clicks of one click request. */
export const MAX_CLICKS = 10;
/** Points of one drag path. */
export const MAX_DRAG_POINTS = 1000;
/** steps_per_segment of a drag. */
const MAX_STEPS_PER_SEGMENT = 100;
/** Moves of one drag: (points − 1) × steps_per_segment (each takes about a frame). */
export const MAX_DRAG_MOVES = 2000;
/** Default steps_per_segment: intermediate moves let pages that need several (HTML drag and drop, sliders) see a drag. */
export const DEFAULT_STEPS_PER_SEGMENT = 10;
/** |delta_x| and |delta_y| of one scroll, in wheel units. */
export const MAX_SCROLL_UNITS = 100;
/** Items of one press_key request. */
export const MAX_KEYS = 100;
/** Keys held during one action. */
export const MAX_HOLD_KEYS = 8;
/** Length of one key name or combination. */
const MAX_KEY_NAME = 64;

export interface ComputerLimits {
  /** BROWSERD_COMPUTER_TIMEOUT_MS: the browser's share of one request's deadline. */
  timeoutMs: number;
  /** BROWSERD_COMPUTER_MAX_WAIT_MS: the waits one request may ask for, summed. */
  maxWaitMs: number;
  /** BROWSERD_COMPUTER_MAX_BATCH: actions of one batch. */
  maxBatch: number;
  /** BROWSERD_COMPUTER_MAX_TEXT: characters (UTF-16 code units) typed or written to the clipboard at once. */
  maxText: number;
}

const combo = lazy(() => z
  .string()
  .max(MAX_KEY_NAME, `must be at most ${MAX_KEY_NAME} characters`)
  .transform((name, ctx): KeyDef[] => {
    const parsed = parseCombo(name);
    if ('problem' in parsed) {
      ctx.addIssue({ code: 'custom', message: parsed.problem });
      return z.NEVER;
    }
    return parsed.keys;
  }));

const holdKeys = lazy(() => z
  .array(combo())
  .max(MAX_HOLD_KEYS, `at most ${MAX_HOLD_KEYS} keys`)
  .optional()
  .meta({ description: 'Modifier keys (or any keys) held during the action: pressed in order before it, released in reverse after it.' }));

const coord = (axis: 'x' | 'y', what: string) => z.number().meta({ description: `${axis.toUpperCase()} coordinate ${what}, in CSS pixels of the viewport` });
const ms = (max: number, description: string) => z.number().min(0).max(max, `must be at most ${max} ms`).optional().meta({ description });

type Schemas = ReturnType<typeof computerSchemas>;

export function computerSchemas(limits: ComputerLimits) {
  const W = limits.maxWaitMs;
  const click = z.strictObject({
    x: coord('x', 'of the click position'),
    y: coord('y', 'of the click position'),
    button: z.enum(['left', 'right', 'middle', 'back', 'forward']).optional().meta({ description: 'Mouse button to interact with (default left)' }),
    click_type: z.enum(['down', 'up', 'click']).optional().meta({ description: 'down: press and keep the button held; up: release it; click (default): press and release num_clicks times' }),
    hold_keys: holdKeys(),
    num_clicks: z.int().min(1).max(MAX_CLICKS, `must be at most ${MAX_CLICKS}`).optional().meta({ description: `Number of clicks (default 1; 2 is a double click, 3 a triple click; at most ${MAX_CLICKS}); only with click_type click` }),
  }).refine((c) => c.num_clicks === undefined || c.num_clicks === 1 || (c.click_type ?? 'click') === 'click', { path: ['num_clicks'], message: 'more than 1 click needs click_type click (down and up press or release the button once)' });
  const move = z.strictObject({
    x: coord('x', 'to move the cursor to'),
    y: coord('y', 'to move the cursor to'),
    duration_ms: ms(W, 'Total duration of a smooth move (default: 0.5 ms per pixel, 200–1000 ms); ignored unless smooth'),
    hold_keys: holdKeys(),
    smooth: z.boolean().optional().meta({ description: 'A human-like Bézier curve of moves (about one per frame) instead of one jump' }),
  });
  const drag = z.strictObject({
    path: z
      .array(z.tuple([z.number(), z.number()]))
      .min(2, 'must contain at least 2 points')
      .max(MAX_DRAG_POINTS, `must contain at most ${MAX_DRAG_POINTS} points`)
      .meta({ description: `Ordered [x, y] points to move through while dragging (2 to ${MAX_DRAG_POINTS})` }),
    button: z.enum(['left', 'middle', 'right']).optional().meta({ description: 'Mouse button to drag with (default left)' }),
    delay: ms(W, 'Delay between the button press and the first move (default 0)'),
    duration_ms: ms(W, 'Total duration of a smooth drag (default: 0.5 ms per pixel of the path, 200–1000 ms per segment); ignored unless smooth'),
    hold_keys: holdKeys(),
    smooth: z.boolean().optional().meta({ description: 'Bézier curves between the points instead of straight steps; steps_per_segment and step_delay_ms are then ignored' }),
    step_delay_ms: ms(W, 'Delay between two moves of the drag (default 0)'),
    steps_per_segment: z
      .int()
      .min(1)
      .max(MAX_STEPS_PER_SEGMENT, `must be at most ${MAX_STEPS_PER_SEGMENT}`)
      .optional()
      .meta({ description: `Moves per segment between two points (default ${DEFAULT_STEPS_PER_SEGMENT}, 1 to ${MAX_STEPS_PER_SEGMENT})` }),
  }).refine((d) => d.smooth === true || (d.path.length - 1) * (d.steps_per_segment ?? DEFAULT_STEPS_PER_SEGMENT) <= MAX_DRAG_MOVES, {
    path: ['steps_per_segment'],
    message: `the path and steps_per_segment make more than ${MAX_DRAG_MOVES} moves ((points − 1) × steps_per_segment)`,
  });
  const units = (dir: string) =>
    z
      .int('must be a whole number of wheel units')
      .min(-MAX_SCROLL_UNITS, `must be at least -${MAX_SCROLL_UNITS}`)
      .max(MAX_SCROLL_UNITS, `must be at most ${MAX_SCROLL_UNITS}`)
      .optional()
      .meta({ description: `${dir} in wheel units (one unit is one wheel notch of 53 CSS pixels)` });
  const scroll = z.strictObject({
    x: coord('x', 'at which to scroll'),
    y: coord('y', 'at which to scroll'),
    delta_x: units('Horizontal scroll amount: positive right, negative left'),
    delta_y: units('Vertical scroll amount: positive down, negative up'),
    hold_keys: holdKeys(),
  });
  const text = (what: string) => z.string().max(limits.maxText, `must be at most ${limits.maxText} characters (BROWSERD_COMPUTER_MAX_TEXT)`).meta({ description: what });
  const type = z.strictObject({
    text: text('Text to type'),
    delay: ms(W, 'Delay between two keystrokes (default 0)'),
  });
  const pressKey = z.strictObject({
    keys: z
      .array(combo())
      .min(1, 'must name at least one key')
      .max(MAX_KEYS, `at most ${MAX_KEYS} items`)
      .meta({ description: 'Keys to press one after the other; each an xdotool key name or combination (Return, ctrl+a, Ctrl+Shift+Tab)' }),
    duration: ms(W, 'How long each item is held down (default 0: tapped)'),
    hold_keys: holdKeys(),
  });
  const cursor = z.strictObject({ hidden: z.boolean().meta({ description: 'Whether the cursor should be hidden' }) });
  const sleep = z.strictObject({ duration_ms: z.number().min(0).max(W, `must be at most ${W} ms`).meta({ description: 'Duration to sleep in milliseconds' }) });
  const clipboardWrite = z.strictObject({ text: text('Text to write to the clipboard') });
  const region = z.strictObject({
    x: z.int().min(0).meta({ description: "X of the region's top-left corner, in CSS pixels of the viewport" }),
    y: z.int().min(0).meta({ description: "Y of the region's top-left corner" }),
    width: z.int().min(1).meta({ description: 'Width of the region' }),
    height: z.int().min(1).meta({ description: 'Height of the region' }),
  });
  const screenshot = z.strictObject({ region: region.optional().meta({ description: 'A part of the viewport (default: all of it)' }) });
  const none = z.strictObject({});

  const ACTIONS = ['click_mouse', 'move_mouse', 'type_text', 'press_key', 'scroll', 'drag_mouse', 'set_cursor', 'sleep'] as const;
  const action = z
    .strictObject({
      type: z.enum(ACTIONS).meta({ description: 'The action; the field of the same name carries its parameters' }),
      click_mouse: click.optional(),
      drag_mouse: drag.optional(),
      move_mouse: move.optional(),
      press_key: pressKey.optional(),
      scroll: scroll.optional(),
      set_cursor: cursor.optional(),
      sleep: sleep.optional(),
      type_text: type.optional(),
    })
    .superRefine((a, ctx) => {
      if (a[a.type] === undefined) ctx.addIssue({ code: 'custom', path: [a.type], message: `is required with type ${a.type}` });
      for (const other of ACTIONS) {
        if (other !== a.type && a[other] !== undefined) ctx.addIssue({ code: 'custom', path: [other], message: `must be absent with type ${a.type} (exactly one action field, the one of the type)` });
      }
    });
  const batch = z.strictObject({
    actions: z
      .array(action)
      .max(limits.maxBatch, `at most ${limits.maxBatch} actions (BROWSERD_COMPUTER_MAX_BATCH)`)
      .meta({ description: 'Actions executed in order; execution stops at the first failure' }),
  });

  return { click, move, drag, scroll, type, pressKey, cursor, sleep, clipboardWrite, screenshot, batch, none };
}

export type ClickParams = z.output<Schemas['click']>;
export type MoveParams = z.output<Schemas['move']>;
export type DragParams = z.output<Schemas['drag']>;
export type ScrollParams = z.output<Schemas['scroll']>;
export type TypeParams = z.output<Schemas['type']>;
export type PressKeyParams = z.output<Schemas['pressKey']>;
export type CursorParams = z.output<Schemas['cursor']>;
export type Region = NonNullable<z.output<Schemas['screenshot']>['region']>;
export type BatchAction = z.output<Schemas['batch']>['actions'][number];
