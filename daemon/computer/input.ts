// Neutral input and tab operations on the page the controls call current, for other modules that
// drive the page on a person's behalf (the live view): each call goes through the controls' one
// input queue, so an agent's action and theirs never interleave, and acts with the controls' one
// mouse (its buttons and position shared with the agent). Positions are CSS pixels of the page's
// viewport; `at` clamps a position given as a fraction of it (0–1).
import type { Deadline } from '../core/deadline.js';
import type { Computer, Run } from './controller.js';
import type { Button } from './mouse.js';
import type { Page } from './page.js';

/** A key event as a keyboard reported it (its layout's key, code and key code, and the text it typed). */
export interface KeyEvent {
  type: 'keydown' | 'keyup';
  key: string;
  code: string;
  keyCode: number;
  text?: string;
  location?: number;
  mods: number;
}

/** The operations of one turn on the input queue, on the current page. */
export interface PageInput {
  readonly viewport: { width: number; height: number };
  /** A fraction of the viewport (0–1) as a position in CSS pixels, inside it. */
  at(x: number, y: number): { x: number; y: number };
  move(to: { x: number; y: number }, mods: number): Promise<void>;
  press(button: Button, clicks: number, mods: number): Promise<void>;
  /** Releases a held button (nothing when it is not held). */
  release(button: Button, clicks: number, mods: number): Promise<void>;
  wheel(dx: number, dy: number, mods: number): Promise<void>;
  key(e: KeyEvent): Promise<void>;
  /** Text as an input method's commit or a paste (Input.insertText): any language. */
  insertText(text: string): Promise<void>;
  /** The page's selected text (a text field's selection, else the document's). */
  selectedText(): Promise<string>;
  navigate(url: string): Promise<void>;
  /** One step back (-1) or forward (1) in the tab's history; nothing at either end. */
  history(step: -1 | 1): Promise<void>;
  reload(): Promise<void>;
  /** Brings a tab to the front (it becomes the current page). */
  activateTab(targetId: string): Promise<void>;
}

/** The tabs, the current page's URL and its history. */
export interface TabsState {
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

/** Runs `fn` on the input queue with the current page's operations (`action` names it in the metrics). */
export function withInput<T>(computer: Computer, action: string, signal: AbortSignal, fn: (input: PageInput) => Promise<T>): Promise<T> {
  return computer.act(action, signal, { exclusive: true }, async (run, deadline) => fn(pageInput(run, await computer.page(run, deadline), deadline)));
}

function pageInput(run: Run, page: Page, deadline: Deadline): PageInput {
  const { mouse } = run;
  return {
    viewport: page.viewport,
    at: (x, y) => ({
      x: Math.min(page.viewport.width - 1, Math.max(0, Math.round(x * page.viewport.width))),
      y: Math.min(page.viewport.height - 1, Math.max(0, Math.round(y * page.viewport.height))),
    }),
    move: (to, mods) => mouse.move(page, to, mods, deadline),
    press: (button, clicks, mods) => mouse.press(page, button, clicks, mods, deadline),
    release: async (button, clicks, mods) => {
      if (mouse.isDown(button)) await mouse.release(page, button, clicks, mods, deadline);
    },
    wheel: (dx, dy, mods) => mouse.wheel(page, dx, dy, mods, deadline),
    key: async (e) => {
      const down = e.type === 'keydown';
      const text = down && e.text !== undefined && e.text !== '' ? e.text : undefined;
      await page.send(
        'Input.dispatchKeyEvent',
        {
          type: down ? (text === undefined ? 'rawKeyDown' : 'keyDown') : 'keyUp',
          modifiers: e.mods,
          key: e.key,
          code: e.code,
          windowsVirtualKeyCode: e.keyCode,
          nativeVirtualKeyCode: e.keyCode,
          text,
          unmodifiedText: text,
          location: e.location,
          isKeypad: e.location === 3,
        },
        deadline,
      );
    },
    insertText: async (text) => void (await page.send('Input.insertText', { text }, deadline)),
    selectedText: () => page.call<string>(SELECTION, [], deadline),
    navigate: async (url) => void (await page.send('Page.navigate', { url }, deadline)),
    history: async (step) => {
      const h = await page.send('Page.getNavigationHistory', {}, deadline);
      const entry = h.entries[h.currentIndex + step];
      if (entry !== undefined) await page.send('Page.navigateToHistoryEntry', { entryId: entry.id }, deadline);
    },
    reload: async () => void (await page.send('Page.reload', {}, deadline)),
    activateTab: async (targetId) => void (await page.sendBrowser('Target.activateTarget', { targetId }, deadline)),
  };
}

/** The tabs, the current page's URL and history (not on the input queue: it reads only; `action` names it in the metrics). */
export function tabsState(computer: Computer, action: string, signal: AbortSignal): Promise<TabsState> {
  return computer.act(action, signal, { exclusive: false }, async (run, deadline) => {
    const page = await computer.page(run, deadline);
    const [{ targetInfos }, h] = await Promise.all([page.sendBrowser('Target.getTargets', {}, deadline), page.send('Page.getNavigationHistory', {}, deadline)]);
    const tabs = targetInfos.filter((t) => t.type === 'page').map((t) => ({ targetId: t.targetId, title: t.title, url: t.url, current: t.targetId === page.targetId }));
    return { tabs, url: h.entries[h.currentIndex]?.url ?? '', canGoBack: h.currentIndex > 0, canGoForward: h.currentIndex < h.entries.length - 1 };
  });
}
