// The viewport every window and tab of the browser renders at: its limits, the launch flags that
// give it from the start, and the live change (no restart).
//
// Headless: the virtual screen is the viewport (--screen-info) and every window is fullscreen on it
// (--kiosk: no toolbar, no infobar), so window.innerWidth/innerHeight of every tab equal the
// viewport without any Emulation override a client could clobber. A live change resizes the
// screen (Emulation.updateScreen, headless only) and re-fits every window to it (fullscreen off and
// on again: Chromium does not re-fit a fullscreen window when the screen changes); a window opened
// later (window.open, Target.createTarget newWindow) is made fullscreen when its target appears.
// Headful: the display is not the daemon's; the window is placed at 0,0 with the viewport's size
// (its toolbar included) and resized live with Browser.setWindowBounds.
import { z } from 'zod';
import { lazy } from '../../core/lazy.js';
import type { Protocol } from 'devtools-protocol';
import type { CdpClient } from '../../cdp/client.js';
import type { Logger } from '../../core/log.js';
import { VIEWPORT_LIMITS, type Viewport } from '../../core/viewport.js';

export type { Viewport };

const L = VIEWPORT_LIMITS;
const intIn = (what: string, min: number, max: number) =>
  z
    .number({ error: (issue) => (issue.input === undefined ? `${what} is required (a whole number of CSS pixels)` : `${what} must be a number`) })
    .int(`${what} must be a whole number`)
    .min(min, `must be at least ${min}`)
    .max(max, `must be at most ${max}`);

export const viewportSchema = lazy(() => z
  .strictObject({
    width: intIn('width', L.minWidth, L.maxWidth).meta({ description: `CSS pixels, ${L.minWidth} to ${L.maxWidth}` }),
    height: intIn('height', L.minHeight, L.maxHeight).meta({ description: `CSS pixels, ${L.minHeight} to ${L.maxHeight}` }),
    refresh_rate: intIn('refresh_rate', L.minRefreshRate, L.maxRefreshRate)
      .optional()
      .meta({ description: `Hz, ${L.minRefreshRate} to ${L.maxRefreshRate}; kept and reported (headless Chromium has no refresh rate)` }),
  })
  .meta({ description: "The SDK's BrowserViewport: the size every tab renders at" }));

/** The launch flags of a viewport, each with its reason. */
export function viewportFlags(v: Viewport, headless: boolean): string[] {
  const size = `${v.width},${v.height}`;
  if (!headless) {
    return [
      // Headful: the first window at the display's top left corner, the viewport's size.
      `--window-size=${size}`,
      '--window-position=0,0',
    ];
  }
  return [
    // Headless: the virtual screen is the viewport (screen.width/height say so too); default 800×600.
    `--screen-info={0,0 ${v.width}x${v.height}}`,
    // Every window fullscreen without toolbar or infobar: each tab's innerWidth/innerHeight is the screen.
    '--kiosk',
    // Windows that are not (yet) fullscreen start at the viewport's size too, not 800×600.
    `--window-size=${size}`,
  ];
}

type Bounds = Protocol.Browser.Bounds;

/** The windows of every page target (a target without a window, such as a worker, is left out). */
async function windowIds(cdp: CdpClient): Promise<number[]> {
  const { targetInfos } = await cdp.send('Target.getTargets');
  const ids = new Set<number>();
  for (const t of targetInfos) {
    if (t.type !== 'page') continue;
    const w = await cdp.send('Browser.getWindowForTarget', { targetId: t.targetId }).catch(() => null);
    if (w !== null) ids.add(w.windowId);
  }
  return [...ids];
}

/** Fits one window to the viewport (headless: fullscreen on the viewport-sized screen). */
async function fitWindow(cdp: CdpClient, windowId: number, v: Viewport, headless: boolean, refit: boolean): Promise<void> {
  const { bounds } = await cdp.send('Browser.getWindowBounds', { windowId });
  if (headless) {
    if (bounds.windowState === 'fullscreen' && !refit && bounds.width === v.width && bounds.height === v.height) return;
    if (bounds.windowState !== 'normal') await cdp.send('Browser.setWindowBounds', { windowId, bounds: { windowState: 'normal' } });
    await cdp.send('Browser.setWindowBounds', { windowId, bounds: { windowState: 'fullscreen' } });
    return;
  }
  const want: Bounds = { left: 0, top: 0, width: v.width, height: v.height };
  if (bounds.windowState !== 'normal') await cdp.send('Browser.setWindowBounds', { windowId, bounds: { windowState: 'normal' } });
  await cdp.send('Browser.setWindowBounds', { windowId, bounds: want });
}

/** The live change: the screen (headless) and every window now. */
export async function applyViewport(cdp: CdpClient, v: Viewport, headless: boolean): Promise<void> {
  if (headless) {
    const { screenInfos } = await cdp.send('Emulation.getScreenInfos');
    const primary = screenInfos.find((s) => s.isPrimary) ?? screenInfos[0];
    if (primary === undefined) throw new Error('headless Chromium reported no screen');
    await cdp.send('Emulation.updateScreen', { screenId: primary.id, width: v.width, height: v.height });
  }
  for (const id of await windowIds(cdp)) {
    try {
      await fitWindow(cdp, id, v, headless, true);
    } catch (err) {
      // A window closed meanwhile is no failure; one that is still there is.
      if ((await windowIds(cdp)).includes(id)) throw err;
    }
  }
}

/**
 * Every window opened later gets the viewport: on the browser module's own session of a run (kept for the
 * run's life), each new page target's window is fitted when the target appears.
 */
export async function fitNewWindows(cdp: CdpClient, viewport: () => Viewport, headless: boolean, log: Logger): Promise<void> {
  cdp.on('Target.targetCreated', ({ targetInfo }) => {
    if (targetInfo.type !== 'page') return;
    void (async () => {
      const w = await cdp.send('Browser.getWindowForTarget', { targetId: targetInfo.targetId });
      await fitWindow(cdp, w.windowId, viewport(), headless, false);
    })().catch((err: unknown) => {
      if (!cdp.isClosed) log.debug({ event: 'viewport_fit_failed', target_id: targetInfo.targetId, err }, 'a new window could not be fitted to the viewport');
    });
  });
  await cdp.send('Target.setDiscoverTargets', { discover: true });
}
