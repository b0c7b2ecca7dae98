// The browser's clipboard, read and written as text through the current page's async Clipboard API
// (navigator.clipboard, called from the daemon's isolated world), as a page the person trusted would.
// Chromium 156 lets a page use it when the page is a secure context, its document has focus, and —
// for readText, and for writeText without a user gesture — its origin holds Chromium's clipboard
// read-write permission (the descriptor `clipboard-read`; `clipboard-write` alone is the sanitized
// write that needs a gesture). The daemon arranges focus and permission for the call only: focus
// emulation on its own session of the page (headless reports no focus before the first input), and
// Browser.setPermission of `clipboard-read` for the page's origin (not Browser.grantPermissions,
// which would deny every other permission of that origin), set back afterwards to the state
// navigator.permissions reported, so the page cannot read the clipboard later on its own. No user
// gesture is faked (it would let the page open popups). A page without a secure context
// (about:blank, data:, plain http to a public host) has no navigator.clipboard: 409
// clipboard_unavailable.
import { Deadline } from '../core/deadline.js';
import { ConflictError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { PageScriptError, type Page } from './page.js';

/** The permission descriptor of Chromium's clipboard read-write setting. */
const PERMISSION = 'clipboard-read';

/** Time given to restoring the permission and focus after the call. */
const RESTORE_TIMEOUT_MS = 2000;

interface PageClipboard {
  usable: boolean;
  origin: string;
  state: 'granted' | 'denied' | 'prompt' | null;
}

export function readClipboard(page: Page, deadline: Deadline, log: Logger): Promise<string> {
  return withClipboard(page, deadline, log, () => page.call<string>('() => navigator.clipboard.readText()', [], deadline));
}

export async function writeClipboard(page: Page, text: string, deadline: Deadline, log: Logger): Promise<void> {
  await withClipboard(page, deadline, log, () => page.call<boolean>('(text) => navigator.clipboard.writeText(text).then(() => true)', [text], deadline));
}

async function withClipboard<T>(page: Page, deadline: Deadline, log: Logger, fn: () => Promise<T>): Promise<T> {
  const info = await page.call<PageClipboard>(
    `async () => {
      const usable = isSecureContext && !!navigator.clipboard;
      let state = null;
      if (usable) try { state = (await navigator.permissions.query({ name: ${JSON.stringify(PERMISSION)} })).state; } catch {}
      return { usable, origin: location.origin, state };
    }`,
    [],
    deadline,
  );
  if (!info.usable) {
    const where = info.origin === 'null' ? 'a page of an opaque origin (about:blank, data:)' : `a page of ${info.origin}`;
    throw new ConflictError(
      'clipboard_unavailable',
      `the current page is ${where}, which is not a secure context and so has no clipboard; open an https page (or http://localhost, http://127.0.0.1) first`,
    );
  }
  const grant = info.state !== 'granted';
  const restore = async (): Promise<void> => {
    const d = Deadline.in(RESTORE_TIMEOUT_MS, 'restoring the clipboard permission');
    try {
      await page.send('Emulation.setFocusEmulationEnabled', { enabled: false }, d);
      if (grant) await page.sendBrowser('Browser.setPermission', { permission: { name: PERMISSION }, setting: info.state ?? 'prompt', origin: info.origin, browserContextId: page.browserContextId }, d);
    } catch (err) {
      log.warn({ event: 'computer_clipboard_restore_failed', permission: PERMISSION, reason: (err as Error).message }, 'the clipboard permission or focus emulation could not be set back');
    } finally {
      d.dispose();
    }
  };
  try {
    if (grant) await page.sendBrowser('Browser.setPermission', { permission: { name: PERMISSION }, setting: 'granted', origin: info.origin, browserContextId: page.browserContextId }, deadline);
    await page.send('Emulation.setFocusEmulationEnabled', { enabled: true }, deadline);
    return await fn();
  } catch (err) {
    if (err instanceof PageScriptError) throw new ConflictError('clipboard_unavailable', `the page's clipboard refused: ${err.message}`);
    throw err;
  } finally {
    await restore();
  }
}
