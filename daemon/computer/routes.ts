// The HTTP face of the computer controls: the routes of @onkernel/sdk 0.84's `browsers.computer`
// (resources/browsers/computer.js: every one a POST under /browsers/{id}/computer/), scope
// `computer`. Actions answer 204 (the SDK's methods resolve to nothing); the screenshot answers the
// PNG bytes; get_mouse_position, clipboard/read and cursor answer JSON.
import { z, type ZodType } from 'zod';
import { lazy } from '../core/lazy.js';
import type { Logger } from '../core/log.js';
import type { Route } from '../http/router.js';
import { routesIn } from '../http/route.js';
import { actionContext, type ActionContext, clickMouse, dragMouse, moveMouse, pressKey, scroll, setCursor, typeText } from './actions.js';
import { checkWaits, dragWait, moveWait, plannedWaitMs, pressWait, runBatch, typeWait } from './batch.js';
import { readClipboard, writeClipboard } from './clipboard.js';
import type { Computer } from './controller.js';
import { KEY_NAME_SUMMARY } from './keys.js';
import { FRAME_MS, WHEEL_UNIT_PX } from './mouse.js';
import {
  DEFAULT_STEPS_PER_SEGMENT,
  MAX_CLICKS,
  MAX_DRAG_MOVES,
  MAX_DRAG_POINTS,
  MAX_HOLD_KEYS,
  MAX_KEYS,
  MAX_SCROLL_UNITS,
  computerSchemas,
  type ComputerLimits,
} from './schemas.js';
import { captureScreenshot, SCREENSHOT_TYPE } from './screenshot.js';

const route = routesIn('daemon/computer/routes.ts');

const P = '/browsers/{id}/computer';

export interface RouteDeps {
  computer: Computer;
  limits: ComputerLimits;
  log: Logger;
}

/** What every route that acts on a page says about it. */
const PAGE_RULE =
  'It acts on the current page: the tab a person would be looking at, i.e. the page target that most recently became visible ' +
  '(a tab opened in the foreground, a popup, Target.activateTarget, Page.bringToFront by any CDP client, a click on a tab in headful mode). ' +
  'Chromium 156 emits no Target event when a tab becomes the current one, so the daemon reads every page\u2019s ' +
  `document.visibilityState from an isolated world (the page cannot see or fake it; a page slow to answer is waited for within the request's deadline, ` +
  'unless another tab of its window answered visible; a page that has not answered an earlier request keeps its last state) and orders the pages by when they were seen to become visible; with several visible (several windows), the latest wins. ' +
  'That answer is kept for the next requests until something changes (a Target event, any CDP client\u2019s command, a page shown, hidden or resized, a new document). ' +
  'Known limit: in headless mode, Page.bringToFront on a tab that is already visible in its own window (another window\u2019s tab being current) ' +
  'changes nothing a page or the protocol can see, so it does not make that tab current. No visible page: 409 no_page. ' +
  'Coordinates are CSS pixels of that page\u2019s viewport (innerWidth × innerHeight, scrollbars included), the space of the screenshot; a point ' +
  'outside it is 400 bad_request naming the field and the viewport\u2019s size. Chromium not ready (starting, restarting): 503 browser_unavailable ' +
  'at once, with Retry-After (not retried by the daemon: an action meant for the page the caller saw must not land on a fresh browser). ' +
  'Requests that send input run one at a time, in the order they came. The deadline is the waits the request asks for plus ' +
  'BROWSERD_COMPUTER_TIMEOUT_MS; past it 504 timeout. Held keys and buttons are released also when the request fails or its client goes away.';

const WAITS = (limits: ComputerLimits): string => `The waits a request asks for (delays, durations, sleeps) may add up to BROWSERD_COMPUTER_MAX_WAIT_MS (${limits.maxWaitMs} ms), else 400.`;

const done = { 204: { description: 'done (no body)' } };
const ACTION_ERRORS = [409, 503, 504];

export function computerRoutes(deps: RouteDeps): Route[] {
  const { computer, limits, log } = deps;
  const s = lazy(() => computerSchemas(limits));
  /**
   * An input action on the current page, named as its route: the body read, the waits it asks for
   * (`waits`: how many ms, and the fields that ask) checked, the action run in the input queue, 204.
   */
  const action = <T>(
    name: string,
    facts: { summary: string; description: string; body: () => ZodType<T> },
    perform: (ctx: ActionContext, body: T) => Promise<void>,
    waits?: { of: (body: T) => number; fields: string },
  ): Route =>
    route({
      method: 'POST',
      path: `${P}/${name}`,
      scope: 'computer',
      doc: () => ({ summary: facts.summary, description: facts.description + (waits === undefined ? '' : `${WAITS(limits)} `) + PAGE_RULE, body: facts.body(), responses: done, errors: ACTION_ERRORS }),
      handler: async (ctx) => {
        const body = ctx.body as T;
        let plannedWaitMs: number | undefined;
        if (waits !== undefined) {
          plannedWaitMs = waits.of(body);
          checkWaits(plannedWaitMs, limits.maxWaitMs, waits.fields);
        }
        await computer.act(name, ctx.signal, { exclusive: true, plannedWaitMs }, async (run, d) => perform(actionContext(await computer.page(run, d), run.mouse, d, log), body));
        return { status: 204 };
      },
    });

  return [
    route({
      method: 'POST',
      path: `${P}/screenshot`,
      scope: 'computer',
      doc: () => ({
        summary: 'A PNG of the current page\u2019s viewport',
        description:
          'The answer is the image bytes (Content-Type image/png), one image pixel per CSS pixel whatever the device scale factor, of the ' +
          'viewport with its scrollbars, never beyond it; `region` (whole CSS pixels) must lie inside the viewport. Always PNG: the SDK ' +
          'declares no format or quality. No pointer is drawn. ' +
          PAGE_RULE,
        body: s().screenshot,
        bodyRequired: false,
        responses: { 200: { description: 'the PNG', mediaType: SCREENSHOT_TYPE, schema: { type: 'string', contentMediaType: SCREENSHOT_TYPE } } },
        errors: ACTION_ERRORS,
      }),
      handler: async (ctx) => {
        const body = ctx.body;
        const png = await computer.act('screenshot', ctx.signal, { exclusive: false }, async (run, d) => captureScreenshot(await computer.page(run, d, { fresh: true }), body.region, d));
        ctx.res.writeHead(200, { 'content-type': SCREENSHOT_TYPE, 'content-length': png.length, 'cache-control': 'no-store' });
        ctx.res.end(png);
        return null;
      },
    }),
    action(
      'click_mouse',
      {
        summary: 'Click (or press, or release) a mouse button at a point',
        description:
          'Moves the pointer there (when it is elsewhere), then presses and releases the button num_clicks times with clickCount 1, 2, … ' +
          `(the page sees detail 1, 2, …, and dblclick after the second; at most ${MAX_CLICKS}). click_type down presses and keeps the button ` +
          'held (later moves and drags see it in `buttons`), up releases it. Separate requests are separate clicks: detail starts at 1 each ' +
          `time. hold_keys (at most ${MAX_HOLD_KEYS}) are pressed before and released after, their modifier bits set on the mouse events. `,
        body: () => s().click,
      },
      clickMouse,
    ),
    action(
      'move_mouse',
      {
        summary: 'Move the pointer',
        description:
          'One mouse move to the point, or with smooth a human-like Bézier curve of moves from where the pointer is, about one per frame ' +
          `(${FRAME_MS} ms; the page sees each move), lasting duration_ms. The pointer's position is kept per browser across tab switches. `,
        body: () => s().move,
      },
      moveMouse,
      { of: moveWait, fields: 'duration_ms' },
    ),
    action(
      'drag_mouse',
      {
        summary: 'Drag along a path with a button held',
        description:
          `Moves to the first point, presses the button, waits delay, moves through the points (${DEFAULT_STEPS_PER_SEGMENT} evenly spaced moves ` +
          'per segment by default, step_delay_ms between moves; or with smooth Bézier curves lasting duration_ms), and releases at the last ' +
          `point. At most ${MAX_DRAG_POINTS} points and ${MAX_DRAG_MOVES} moves ((points − 1) × steps_per_segment); every point must lie in the ` +
          'viewport. Each move takes about a frame. ',
        body: () => s().drag,
      },
      dragMouse,
      { of: dragWait, fields: 'delay, step_delay_ms, duration_ms' },
    ),
    action(
      'scroll',
      {
        summary: 'Turn the mouse wheel at a point',
        description:
          `Moves the pointer there, then sends one wheel event per unit (${WHEEL_UNIT_PX} CSS pixels each, what one notch scrolls in Chromium on ` +
          `X11): vertical units first, then horizontal; at most ${MAX_SCROLL_UNITS} units each way. Answers once the page has drawn two frames ` +
          'after the last one (wheel events reach the page with the next frame), so a screenshot taken next shows the scroll. ',
        body: () => s().scroll,
      },
      scroll,
    ),
    action(
      'type',
      {
        summary: 'Type text',
        description:
          'Each character is a key press on a US layout, as xdotool types: capitals and shifted symbols with Shift, a line break as Enter, ' +
          'a tab as Tab; a character without a key on that layout (é, 你, 😀) is a key press with that character as `key`, no `code` and ' +
          'keyCode 0, and one longer than a key event carries (a composed emoji of several code points) is committed with Input.insertText, ' +
          'as an input method would (beforeinput/input only). The page sees keydown, keypress, beforeinput, input and keyup for each. ' +
          `delay is the pause between two characters. At most BROWSERD_COMPUTER_MAX_TEXT (${limits.maxText}) characters. `,
        body: () => s().type,
      },
      typeText,
      { of: typeWait, fields: 'delay' },
    ),
    action(
      'press_key',
      {
        summary: 'Press keys and key combinations',
        description:
          `Each item of keys (at most ${MAX_KEYS}) is pressed in order: its keys down one after the other (modifiers first), held \`duration\` ms, ` +
          'released in reverse; the modifier bits of the held keys are set on every event in between. Key names: ' +
          KEY_NAME_SUMMARY +
          ' An unknown name is 400 naming its place. Keys go to the page (Input.dispatchKeyEvent): editing shortcuts work (ctrl+a, ctrl+c, ' +
          'ctrl+v, Backspace), but shortcuts of the browser\u2019s own window (ctrl+t, ctrl+w, ctrl+l, F5) reach the page as key events and do ' +
          'not drive the browser (use CDP for tabs and navigation). A held key does not auto-repeat. ',
        body: () => s().pressKey,
      },
      pressKey,
      { of: pressWait, fields: 'duration' },
    ),
    route({
      method: 'POST',
      path: `${P}/get_mouse_position`,
      scope: 'computer',
      doc: () => ({
        summary: 'Where the pointer is',
        description: 'The last position the computer routes moved the pointer to, in CSS pixels of the viewport; kept per browser across tab switches, 0, 0 at each launch of Chromium. Takes no body.',
        body: s().none,
        bodyRequired: false,
        responses: { 200: { description: 'the position', schema: z.object({ x: z.number(), y: z.number() }) } },
      }),
      handler: async () => {
        return { status: 200, body: computer.mousePosition() };
      },
    }),
    route({
      method: 'POST',
      path: `${P}/cursor`,
      scope: 'computer',
      doc: () => ({
        summary: 'Set the pointer\u2019s visibility',
        description:
          'Screenshots are taken of the page by Chromium and never show a pointer, headless or not: hidden true is always the case and ' +
          'answers ok; hidden false (a visible pointer) cannot be honoured and is 422 unsupported_field.',
        body: s().cursor,
        responses: { 200: { description: 'ok', schema: z.object({ ok: z.boolean() }) } },
        errors: [422],
      }),
      handler: async (ctx) => {
        setCursor(ctx.body);
        return { status: 200, body: { ok: true } };
      },
    }),
    route({
      method: 'POST',
      path: `${P}/batch`,
      scope: 'computer',
      doc: () => ({
        summary: 'Run a list of actions in order',
        description:
          `At most BROWSERD_COMPUTER_MAX_BATCH (${limits.maxBatch}) actions: click_mouse, move_mouse, drag_mouse, scroll, type_text, press_key ` +
          '(each as its own route does), set_cursor (as the cursor route) and sleep. Each action object carries exactly the field named by its ' +
          'type. The whole list is validated first (nothing runs when one action is invalid); then each action runs on the page current at ' +
          'that moment (a click may open a tab) and the first failure ends the batch: its message starts with actions[i] (type), bad_request ' +
          'details name the field as actions.i.type.field, and other errors carry the detail {code: failed_action, message: actions[i]}; the ' +
          'actions before it were done. ' +
          WAITS(limits) +
          ' ' +
          PAGE_RULE,
        body: s().batch,
        responses: done,
        errors: [...ACTION_ERRORS, 422],
      }),
      handler: async (ctx) => {
        const body = ctx.body;
        const waits = body.actions.reduce((t, a) => t + plannedWaitMs(a), 0);
        checkWaits(waits, limits.maxWaitMs, 'actions');
        const budget = computer.budget(waits);
        await computer.act('batch', ctx.signal, { exclusive: true, plannedWaitMs: waits }, (run, d) => runBatch(computer, run, body.actions, d, budget, log));
        return { status: 204 };
      },
    }),
    route({
      method: 'POST',
      path: `${P}/clipboard/read`,
      scope: 'computer',
      doc: () => ({
        summary: 'The clipboard\u2019s text',
        description:
          'Read through the current page\u2019s Clipboard API (navigator.clipboard.readText from the daemon\u2019s isolated world): the daemon ' +
          'gives the page focus (focus emulation on its own session) and Chromium\u2019s clipboard read-write permission (the clipboard-read ' +
          'descriptor) for the page\u2019s origin for the call only (Browser.setPermission, which leaves the origin\u2019s other permissions ' +
          'alone, set back to the state navigator.permissions reported before), so the page cannot read the clipboard by itself afterwards. ' +
          'The page must be a secure context (https, http://localhost or 127.0.0.1): about:blank, data: and plain http to other hosts have no ' +
          'clipboard, 409 clipboard_unavailable. Takes no body. ' +
          PAGE_RULE,
        body: s().none,
        bodyRequired: false,
        responses: { 200: { description: 'the text', schema: z.object({ text: z.string() }) } },
        errors: ACTION_ERRORS,
      }),
      handler: async (ctx) => {
        const text = await computer.act('clipboard_read', ctx.signal, { exclusive: true }, async (run, d) => readClipboard(await computer.page(run, d), d, log));
        return { status: 200, body: { text } };
      },
    }),
    route({
      method: 'POST',
      path: `${P}/clipboard/write`,
      scope: 'computer',
      doc: () => ({
        summary: 'Put text on the clipboard',
        description:
          'Written through the current page\u2019s Clipboard API (navigator.clipboard.writeText), with focus and the same permission for the ' +
          'call only, as for clipboard/read (Chromium lets writeText without a user gesture only with it; no gesture is faked, it would let ' +
          `the page open popups); the page sees no event. At most BROWSERD_COMPUTER_MAX_TEXT (${limits.maxText}) characters. ` +
          'A page that is not a secure context: 409 clipboard_unavailable. ' +
          PAGE_RULE,
        body: s().clipboardWrite,
        responses: done,
        errors: ACTION_ERRORS,
      }),
      handler: async (ctx) => {
        const body = ctx.body;
        await computer.act('clipboard_write', ctx.signal, { exclusive: true }, async (run, d) => writeClipboard(await computer.page(run, d), body.text, d, log));
        return { status: 204 };
      },
    }),
  ];
}
