// The live view's message protocol: the input of a person watching, sent through the computer
// controls' neutral input operations (computer/input.ts) on their one input queue: the agent's
// actions and the person's never interleave within one action, and both act on the page the
// controls call current. The mouse is the controls' mouse (one pointer per run, its buttons and
// position shared with the agent); keys are sent as the viewer's browser reported them (its own
// layout: key, code, keyCode and the text the key typed), text as Input.insertText (an input
// method's commit or a paste: any language). Coordinates come normalised to the frame (0–1) and are
// mapped to the page's viewport in CSS pixels. Also the viewer's navigation (address bar,
// back/forward/reload, tabs) and what the page has selected (copy).
import { z } from 'zod';
import { lazy } from '../core/lazy.js';
import type { ComputerModule, TabsState } from '../computer/index.js';

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
export type LiveState = TabsState;

/** Sends one input message through the controls' input queue; `copy` answers the selected text, the others null. */
export function dispatchLiveInput(computer: ComputerModule, msg: LiveInput, signal: AbortSignal): Promise<string | null> {
  return computer.input(`live_${msg.t}`, signal, async (input) => {
    switch (msg.t) {
      case 'move':
        await input.move(input.at(msg.x, msg.y), msg.mods);
        return null;
      case 'down':
        await input.move(input.at(msg.x, msg.y), msg.mods);
        await input.press(msg.button, msg.clicks, msg.mods);
        return null;
      case 'up':
        await input.move(input.at(msg.x, msg.y), msg.mods);
        await input.release(msg.button, msg.clicks, msg.mods);
        return null;
      case 'wheel':
        await input.move(input.at(msg.x, msg.y), msg.mods);
        await input.wheel(msg.dx, msg.dy, msg.mods);
        return null;
      case 'keydown':
      case 'keyup':
        await input.key({ ...msg, type: msg.t });
        return null;
      case 'text':
        await input.insertText(msg.text);
        return null;
      case 'copy':
        return input.selectedText();
      case 'navigate':
        // What a person types in an address bar: a URL without a scheme is https.
        await input.navigate(/^[a-z][a-z0-9+.-]*:/i.test(msg.url) ? msg.url : `https://${msg.url}`);
        return null;
      case 'back':
      case 'forward':
        await input.history(msg.t === 'back' ? -1 : 1);
        return null;
      case 'reload':
        await input.reload();
        return null;
      case 'activate':
        await input.activateTab(msg.targetId);
        return null;
    }
  });
}

/** The tabs, the current page's URL and history. */
export function liveState(computer: ComputerModule, signal: AbortSignal): Promise<LiveState> {
  return computer.tabs('live_state', signal);
}
