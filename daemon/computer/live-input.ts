// The input of a person watching the live view, on the computer controls' one input queue: the
// agent's actions and the person's never interleave within one action, and both act on the page the
// controls call current. The mouse is the controls' mouse (one pointer per run, its buttons and
// position shared with the agent); keys are sent as the viewer's browser reported them (its own
// layout: key, code, keyCode and the text the key typed), text as Input.insertText (an input
// method's commit or a paste: any language). Coordinates come normalised to the frame (0–1) and are
// mapped to the page's viewport in CSS pixels. Also the viewer's navigation (address bar,
// back/forward/reload, tabs) and what the page has selected (copy).
import { z } from 'zod';
import { lazy } from '../core/lazy.js';
import type { Deadline } from '../core/deadline.js';
import type { Computer, Run } from './controller.js';
import type { Button } from './mouse.js';
import type { Page } from './page.js';

/** The longest text of one message (a paste): 64 Ki UTF-16 units. */
export const LIVE_TEXT_MAX = 65_536;
/** The longest URL the address bar sends. */
export const LIVE_URL_MAX = 8192;

const unit = lazy(() => z.number().min(0).max(1));
const mods = lazy(() => z.number().int().min(0).max(15));
const button = lazy(() => z.enum(['left', 'middle', 'right', 'back', 'forward']));

/** One input message of a viewer (JSON over its WebSocket). */
export const liveInputSchema = lazy(() => z.discriminatedUnion('t', [
  z.object({ t: z.literal('move'), x: unit(), y: unit(), mods: mods() }),
  z.object({ t: z.literal('down'), x: unit(), y: unit(), button: button(), clicks: z.number().int().min(1).max(3), mods: mods() }),
  z.object({ t: z.literal('up'), x: unit(), y: unit(), button: button(), clicks: z.number().int().min(1).max(3), mods: mods() }),
  z.object({ t: z.literal('wheel'), x: unit(), y: unit(), dx: z.number().min(-10_000).max(10_000), dy: z.number().min(-10_000).max(10_000), mods: mods() }),
  z.object({
    t: z.enum(['keydown', 'keyup']),
    key: z.string().min(1).max(32),
    code: z.string().max(32),
    keyCode: z.number().int().min(0).max(255),
    text: z.string().max(4).optional(),
    location: z.number().int().min(0).max(3).optional(),
    mods: mods(),
  }),
  z.object({ t: z.literal('text'), text: z.string().min(1).max(LIVE_TEXT_MAX) }),
  z.object({ t: z.literal('copy') }),
  z.object({ t: z.literal('navigate'), url: z.string().min(1).max(LIVE_URL_MAX) }),
  z.object({ t: z.enum(['back', 'forward', 'reload']) }),
  z.object({ t: z.literal('activate'), targetId: z.string().min(1).max(128) }),
]));
export type LiveInput = z.infer<ReturnType<typeof liveInputSchema>>;

/** What the viewer shows around the frame. */
export interface LiveState {
  tabs: { targetId: string; title: string; url: string; current: boolean }[];
  url: string;
  canGoBack: boolean;
  canGoForward: boolean;
}

/** The selected text of the page (a text field's selection, else the document's). */
const SELECTION = `function () {
  const a = document.activeElement;
  if (a && (a.tagName === 'INPUT' || a.tagName === 'TEXTAREA') && typeof a.selectionStart === 'number') return a.value.slice(a.selectionStart, a.selectionEnd);
  return String(getSelection());
}`;

/** Sends one input message through the queue; `copy` answers the selected text, the others null. */
export async function dispatchLiveInput(computer: Computer, msg: LiveInput, signal: AbortSignal): Promise<string | null> {
  return computer.act(`live_${msg.t}`, signal, { exclusive: true }, async (run, deadline) => {
    const page = await computer.page(run, deadline);
    return apply(run, page, msg, deadline);
  });
}

async function apply(run: Run, page: Page, msg: LiveInput, deadline: Deadline): Promise<string | null> {
  const at = (x: number, y: number): { x: number; y: number } => ({
    x: Math.min(page.viewport.width - 1, Math.max(0, Math.round(x * page.viewport.width))),
    y: Math.min(page.viewport.height - 1, Math.max(0, Math.round(y * page.viewport.height))),
  });
  switch (msg.t) {
    case 'move':
      await run.mouse.move(page, at(msg.x, msg.y), msg.mods, deadline);
      return null;
    case 'down':
      await run.mouse.move(page, at(msg.x, msg.y), msg.mods, deadline);
      await run.mouse.press(page, msg.button as Button, msg.clicks, msg.mods, deadline);
      return null;
    case 'up':
      await run.mouse.move(page, at(msg.x, msg.y), msg.mods, deadline);
      if (run.mouse.isDown(msg.button)) await run.mouse.release(page, msg.button, msg.clicks, msg.mods, deadline);
      return null;
    case 'wheel':
      await run.mouse.move(page, at(msg.x, msg.y), msg.mods, deadline);
      await run.mouse.wheel(page, msg.dx, msg.dy, msg.mods, deadline);
      return null;
    case 'keydown':
    case 'keyup': {
      const down = msg.t === 'keydown';
      const text = down && msg.text !== undefined && msg.text !== '' ? msg.text : undefined;
      await page.send(
        'Input.dispatchKeyEvent',
        {
          type: down ? (text === undefined ? 'rawKeyDown' : 'keyDown') : 'keyUp',
          modifiers: msg.mods,
          key: msg.key,
          code: msg.code,
          windowsVirtualKeyCode: msg.keyCode,
          nativeVirtualKeyCode: msg.keyCode,
          text,
          unmodifiedText: text,
          location: msg.location,
          isKeypad: msg.location === 3,
        },
        deadline,
      );
      return null;
    }
    case 'text':
      await page.send('Input.insertText', { text: msg.text }, deadline);
      return null;
    case 'copy':
      return page.call<string>(SELECTION, [], deadline);
    case 'navigate': {
      const url = /^[a-z][a-z0-9+.-]*:/i.test(msg.url) ? msg.url : `https://${msg.url}`;
      await page.send('Page.navigate', { url }, deadline);
      return null;
    }
    case 'back':
    case 'forward': {
      const h = await page.send('Page.getNavigationHistory', {}, deadline);
      const entry = h.entries[h.currentIndex + (msg.t === 'back' ? -1 : 1)];
      if (entry !== undefined) await page.send('Page.navigateToHistoryEntry', { entryId: entry.id }, deadline);
      return null;
    }
    case 'reload':
      await page.send('Page.reload', {}, deadline);
      return null;
    case 'activate':
      await page.sendBrowser('Target.activateTarget', { targetId: msg.targetId }, deadline);
      return null;
  }
}

/** The tabs, the current page's URL and history (not on the input queue: it reads only). */
export async function liveState(computer: Computer, signal: AbortSignal): Promise<LiveState> {
  return computer.act('live_state', signal, { exclusive: false }, async (run, deadline) => {
    const page = await computer.page(run, deadline);
    const [{ targetInfos }, h] = await Promise.all([page.sendBrowser('Target.getTargets', {}, deadline), page.send('Page.getNavigationHistory', {}, deadline)]);
    const tabs = targetInfos.filter((t) => t.type === 'page').map((t) => ({ targetId: t.targetId, title: t.title, url: t.url, current: t.targetId === page.targetId }));
    return { tabs, url: h.entries[h.currentIndex]?.url ?? '', canGoBack: h.currentIndex > 0, canGoForward: h.currentIndex < h.entries.length - 1 };
  });
}
