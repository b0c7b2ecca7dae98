// The helpers a REPL cell finds as globals (docs/repl.md lists each with an example). Small on
// purpose: each is a few CDP commands on the current tab (browser.ts), so an agent can read what
// it does and use `cdp()` itself for anything else.
import type { CommandName, Params } from '../../cdp/client.js';
import { effective, MOD, parseCombo } from '../../computer/keys.js';
import { Deadline } from '../../core/deadline.js';
// The webmcp module's own parts, not its face (which loads its routes and zod): this process loads only what it runs.
import { invokeTool, listTools } from '../../webmcp/tools.js';
import { decodeToolRef } from '../../webmcp/tool-ref.js';
import type { ReplBrowser } from './browser.js';
import type { Content } from './content.js';

const DEFAULT_WAIT_MS = 30_000;
const POLL_MS = 100;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Point {
  x: number;
  y: number;
}

export function makeHelpers(browser: ReplBrowser, content: () => Content): Record<string, unknown> {
  /** Evaluates `expression` in the current tab; its value (JSON) or a thrown Error with the page's message. */
  const evaluate = async <T>(expression: string): Promise<T> => {
    const r = await browser.page('Runtime.evaluate', { expression, returnByValue: true, awaitPromise: true });
    if (r.exceptionDetails !== undefined) throw new Error(`in the page: ${r.exceptionDetails.exception?.description ?? r.exceptionDetails.text}`);
    return r.result.value as T;
  };

  const pointOf = async (target: string | Point): Promise<Point> => {
    if (typeof target !== 'string') return target;
    const p = await evaluate<Point | null>(
      `(() => { const e = document.querySelector(${JSON.stringify(target)}); if (!e) return null; e.scrollIntoView({ block: 'center', inline: 'center' }); const r = e.getBoundingClientRect(); return { x: r.x + r.width / 2, y: r.y + r.height / 2 }; })()`,
    );
    if (p === null) throw new Error(`no element matches ${target}`);
    return p;
  };

  const pageInfo = async (): Promise<{ target_id: string; url: string; title: string }> => {
    const { tab, client } = await browser.current();
    const { targetInfo } = await client.send('Target.getTargetInfo', { targetId: tab.targetId });
    return { target_id: targetInfo.targetId, url: targetInfo.url, title: targetInfo.title };
  };

  const waitFor = async <T>(what: string, check: () => Promise<T | null | false>, timeoutMs: number): Promise<T> => {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const v = await check();
      if (v !== null && v !== false) return v;
      if (Date.now() > end) throw new Error(`${what}: not within ${timeoutMs} ms`);
      await sleep(POLL_MS);
    }
  };

  const waitForLoad = (opts: { timeoutMs?: number } = {}): Promise<true> =>
    waitFor('waitForLoad', async () => (await evaluate<string>('document.readyState')) === 'complete', opts.timeoutMs ?? DEFAULT_WAIT_MS);

  const cdp = Object.assign(
    /** A CDP command on the current tab's session. */
    (method: string, params: Record<string, unknown> = {}) => browser.page(method as CommandName, params as Params<CommandName>),
    {
      /** A CDP command on the browser's own session (Target.*, Browser.*). */
      browser: async (method: string, params: Record<string, unknown> = {}) => (await browser.browser()).send(method as CommandName, params as Params<CommandName>),
    },
  );

  return {
    repl: {
      /** Text into the answer, on `channel` (default stdout). */
      write: (text: unknown, channel = 'stdout') => void content().text(channel, typeof text === 'string' ? text : String(text)),
      /** An image into the answer: bytes or base64, PNG unless `mimeType` says otherwise. */
      emitImage: (data: Uint8Array | string, mimeType = 'image/png') => void content().image(data, mimeType),
    },
    cdp,
    /** The next CDP event of the current tab (e.g. 'Page.loadEventFired') that `predicate` accepts. */
    waitForEvent: (event: string, opts: { predicate?: (params: unknown) => boolean; timeoutMs?: number } = {}) =>
      browser.waitForEvent(event, opts.predicate ?? (() => true), opts.timeoutMs ?? DEFAULT_WAIT_MS),
    /** Navigates the current tab and waits for its load event; resolves with pageInfo(). */
    gotoUrl: async (url: string, opts: { timeoutMs?: number } = {}) => {
      const timeoutMs = opts.timeoutMs ?? DEFAULT_WAIT_MS;
      const loaded = browser.waitForEvent('Page.loadEventFired', () => true, timeoutMs);
      loaded.catch(() => undefined);
      const nav = await browser.page('Page.navigate', { url });
      if (nav.errorText !== undefined && nav.errorText !== '') throw new Error(`gotoUrl ${url}: ${nav.errorText}`);
      if (nav.loaderId !== undefined) await loaded;
      return pageInfo();
    },
    pageInfo,
    /** The current tab's accessibility tree as an indented outline: `- role "name" value` per node. */
    accessibilitySnapshot: async (opts: { maxNodes?: number } = {}) => {
      const { nodes } = await browser.page('Accessibility.getFullAXTree', {});
      const byId = new Map(nodes.map((n) => [n.nodeId, n]));
      const lines: string[] = [];
      const max = opts.maxNodes ?? 5000;
      const visit = (id: string, depth: number): void => {
        const n = byId.get(id);
        if (n === undefined || lines.length >= max) return;
        const role = String(n.role?.value ?? '');
        const name = String(n.name?.value ?? '');
        const shown = !n.ignored && !((role === 'generic' || role === 'none' || role === 'InlineTextBox' || role === 'StaticText' && name === '') && name === '');
        if (shown && role !== 'InlineTextBox') {
          const value = n.value?.value;
          const flags = (n.properties ?? []).filter((p) => ['focused', 'checked', 'disabled', 'required', 'expanded', 'selected'].includes(p.name) && p.value.value !== false).map((p) => (p.value.value === true ? p.name : `${p.name}=${String(p.value.value)}`));
          lines.push(`${'  '.repeat(depth)}- ${role}${name === '' ? '' : ` ${JSON.stringify(name)}`}${value === undefined || value === '' ? '' : ` value=${JSON.stringify(value)}`}${flags.length === 0 ? '' : ` [${flags.join(', ')}]`}`);
        }
        for (const c of n.childIds ?? []) visit(c, shown ? depth + 1 : depth);
      };
      const root = nodes.find((n) => n.parentId === undefined);
      if (root !== undefined) visit(root.nodeId, 0);
      return lines.join('\n');
    },
    /** Clicks the centre of the element `selector` matches (scrolled into view), or a point {x, y}. */
    click: async (target: string | Point, opts: { button?: 'left' | 'right' | 'middle'; clickCount?: number } = {}) => {
      const { x, y } = await pointOf(target);
      const button = opts.button ?? 'left';
      const clickCount = opts.clickCount ?? 1;
      await browser.page('Input.dispatchMouseEvent', { type: 'mouseMoved', x, y });
      await browser.page('Input.dispatchMouseEvent', { type: 'mousePressed', x, y, button, clickCount });
      await browser.page('Input.dispatchMouseEvent', { type: 'mouseReleased', x, y, button, clickCount });
    },
    /** Types `text` into whatever has focus (Input.insertText). */
    typeText: async (text: string) => void (await browser.page('Input.insertText', { text })),
    /** Focuses the field `selector` matches, selects what it holds and types `value` over it. */
    fillInput: async (selector: string, value: string) => {
      const found = await evaluate<boolean>(`(() => { const e = document.querySelector(${JSON.stringify(selector)}); if (!e) return false; e.focus(); if (typeof e.select === 'function') e.select(); else document.execCommand('selectAll'); return true; })()`);
      if (!found) throw new Error(`fillInput: no element matches ${selector}`);
      if (value === '') await evaluate(`document.execCommand('delete')`);
      else await browser.page('Input.insertText', { text: value });
    },
    /** Presses a key or a combination: 'Enter', 'Tab', 'ctrl+a', 'Shift+ArrowDown' (the names of POST …/computer/press_key). */
    pressKey: async (combo: string) => {
      const parsed = parseCombo(combo);
      if ('problem' in parsed) throw new Error(`pressKey: ${parsed.problem}`);
      let modifiers = 0;
      for (const def of parsed.keys) {
        modifiers |= def.modifier | (def.needsShift ? MOD.shift : 0);
        const { key, text } = effective(def, modifiers);
        const typed = (modifiers & (MOD.ctrl | MOD.alt | MOD.meta)) === 0 ? text : '';
        await browser.page('Input.dispatchKeyEvent', { type: typed === '' ? 'rawKeyDown' : 'keyDown', key, code: def.code, windowsVirtualKeyCode: def.keyCode, text: typed, unmodifiedText: typed, location: def.location, modifiers });
      }
      for (const def of [...parsed.keys].reverse()) {
        const { key } = effective(def, modifiers);
        await browser.page('Input.dispatchKeyEvent', { type: 'keyUp', key, code: def.code, windowsVirtualKeyCode: def.keyCode, location: def.location, modifiers });
        modifiers &= ~def.modifier;
      }
    },
    /** Scrolls by (dx, dy) CSS pixels with the mouse wheel, at `at` (default the viewport's centre). */
    scroll: async (dx: number, dy: number, at?: Point) => {
      const p = at ?? (await evaluate<Point>('({ x: innerWidth / 2, y: innerHeight / 2 })'));
      await browser.page('Input.dispatchMouseEvent', { type: 'mouseWheel', x: p.x, y: p.y, deltaX: dx, deltaY: dy });
    },
    /** A screenshot of the current tab as bytes (PNG unless format says jpeg or webp): repl.emitImage(await captureScreenshot()). */
    captureScreenshot: async (opts: { format?: 'png' | 'jpeg' | 'webp'; quality?: number; fullPage?: boolean } = {}) => {
      const { data } = await browser.page('Page.captureScreenshot', { format: opts.format ?? 'png', ...(opts.quality === undefined ? {} : { quality: opts.quality }), captureBeyondViewport: opts.fullPage ?? false });
      return Buffer.from(data, 'base64');
    },
    /** The open tabs: [{target_id, url, title, current}]. */
    listTabs: async () => {
      const { targetInfos } = await (await browser.browser()).send('Target.getTargets');
      return targetInfos.filter((t) => t.type === 'page').map((t) => ({ target_id: t.targetId, url: t.url, title: t.title, current: t.targetId === browser.currentTargetId }));
    },
    /** Makes a tab current (and brings it to the front). */
    switchTab: async (targetId: string) => {
      await browser.switchTo(targetId);
      await (await browser.browser()).send('Target.activateTarget', { targetId });
      return pageInfo();
    },
    /** Opens a tab at `url` (default about:blank) and makes it current. */
    newTab: async (url = 'about:blank') => {
      const { targetId } = await (await browser.browser()).send('Target.createTarget', { url });
      await browser.switchTo(targetId);
      return pageInfo();
    },
    /** Closes a tab (default the current one; the next helper then uses the first open page). */
    closeTab: async (targetId?: string) => {
      const id = targetId ?? browser.currentTargetId ?? (await browser.current()).tab.targetId;
      browser.forget(id);
      await (await browser.browser()).send('Target.closeTarget', { targetId: id });
    },
    waitForLoad,
    /** Waits until `selector` matches an element (with `visible`: one with a size). */
    waitForSelector: (selector: string, opts: { timeoutMs?: number; visible?: boolean } = {}) =>
      waitFor(
        `waitForSelector ${selector}`,
        () => evaluate<boolean>(`(() => { const e = document.querySelector(${JSON.stringify(selector)}); if (!e) return false; ${opts.visible === true ? 'const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0;' : 'return true;'} })()`),
        opts.timeoutMs ?? DEFAULT_WAIT_MS,
      ),
    /** Waits until the current tab has had no request in flight for `idleMs` (default 500). */
    waitForNetworkIdle: async (opts: { idleMs?: number; timeoutMs?: number } = {}) => {
      const { client, tab } = await browser.current();
      const inflight = new Set<string>();
      let last = Date.now();
      const mine = (sid: string | undefined): boolean => sid === tab.sessionId;
      const offs = [
        client.on('Network.requestWillBeSent', (p, sid) => void (mine(sid) && (inflight.add(p.requestId), (last = Date.now())))),
        client.on('Network.loadingFinished', (p, sid) => void (mine(sid) && (inflight.delete(p.requestId), (last = Date.now())))),
        client.on('Network.loadingFailed', (p, sid) => void (mine(sid) && (inflight.delete(p.requestId), (last = Date.now())))),
      ];
      try {
        await client.send('Network.enable', {}, { sessionId: tab.sessionId });
        const idleMs = opts.idleMs ?? 500;
        await waitFor('waitForNetworkIdle', () => Promise.resolve(inflight.size === 0 && Date.now() - last >= idleMs), opts.timeoutMs ?? DEFAULT_WAIT_MS);
      } finally {
        for (const off of offs) off();
      }
    },
    webmcp: {
      /** The tools every open page registered (as GET …/webmcp/tools). */
      listTools: async (opts: { timeoutMs?: number } = {}) => listTools(await browser.browser(), Deadline.in(opts.timeoutMs ?? DEFAULT_WAIT_MS, 'webmcp.listTools')),
      /** Calls a tool by its tool_ref (as POST …/webmcp/invoke): {invocation_id, status, output?, error_text?}. */
      invoke: async (toolRef: string, input: Record<string, unknown> = {}, opts: { timeoutMs?: number } = {}) => {
        const timeoutMs = opts.timeoutMs ?? DEFAULT_WAIT_MS;
        return invokeTool(await browser.browser(), decodeToolRef(toolRef), input, timeoutMs, Deadline.in(timeoutMs + 10_000, 'webmcp.invoke'));
      },
    },
  };
}
