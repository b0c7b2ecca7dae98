// A screenshot of what a person sees of the current page: its viewport (scrollbars included), one
// image pixel per CSS pixel, so that the image's coordinates are those of the input routes. PNG:
// the SDK sends `Accept: image/png` and declares no format or quality field. Chromium renders a
// fresh frame for each capture (Page.captureScreenshot, never beyond the viewport).
//
// Pixels per CSS pixel: a capture without a clip is in the device pixels of the page as shown
// (devicePixelRatio, which another client's Emulation.setDeviceMetricsOverride may have changed); a
// capture with a clip is scaled by clip.scale × the widget's own device scale factor, which the page
// cannot see (Chromium 156, PageHandler::CaptureScreenshot). So: with devicePixelRatio 1 and no
// region, the plain capture (the fast path); otherwise a clip of the visual viewport in document
// coordinates at the scale learned for the page (1 at first). The PNG's header says how large the
// image came out; when it is not the CSS size, the scale is corrected and the capture taken again
// (and remembered), so a capture is repeated at most once per page, not per request.
import type { Deadline } from '../core/deadline.js';
import { BadRequestError } from '../core/errors.js';
import type { Page } from './page.js';
import type { Region } from './schemas.js';

/**
 * Page.captureScreenshot's `optimizeForSpeed` (Chromium's fastest PNG encoder settings). On: on a
 * 1280 × 720 page of text, a table and gradients it made the capture 3.7× faster (230 vs 847 ms on 2
 * loaded cores) for a PNG 1.7× larger (936 vs 553 kB); the bytes stay on loopback.
 */
const OPTIMIZE_FOR_SPEED = true;

export const SCREENSHOT_TYPE = 'image/png';

export async function captureScreenshot(page: Page, region: Region | undefined, deadline: Deadline): Promise<Buffer> {
  const v = page.viewport;
  if (region !== undefined) checkRegion(region, v.width, v.height);
  const want = { width: region?.width ?? v.width, height: region?.height ?? v.height };
  const capture = async (clipScale: number | null): Promise<Buffer> => {
    const clip =
      clipScale === null ? undefined : { x: v.pageX + (region?.x ?? 0), y: v.pageY + (region?.y ?? 0), width: want.width, height: want.height, scale: clipScale };
    const shot = await page.send('Page.captureScreenshot', { format: 'png', captureBeyondViewport: false, optimizeForSpeed: OPTIMIZE_FOR_SPEED, clip }, deadline);
    return Buffer.from(shot.data, 'base64');
  };
  if (region === undefined && v.dpr === 1 && v.scale === 1) {
    const png = await capture(null);
    if (pngWidth(png) === want.width) return png;
  }
  const png = await capture(page.clipScale);
  const width = pngWidth(png);
  if (width === want.width || width <= 0) return png;
  page.clipScale = (page.clipScale * want.width) / width;
  return capture(page.clipScale);
}

function checkRegion(region: Region, width: number, height: number): void {
  const problems: string[] = [];
  const size = `the viewport is ${width}×${height} CSS pixels`;
  if (region.x >= width) problems.push(`region.x: ${region.x} is outside the viewport (0 ≤ x < ${width}; ${size})`);
  if (region.y >= height) problems.push(`region.y: ${region.y} is outside the viewport (0 ≤ y < ${height}; ${size})`);
  if (region.x < width && region.x + region.width > width) problems.push(`region.width: x + width = ${region.x + region.width} reaches past the viewport's width ${width} (${size})`);
  if (region.y < height && region.y + region.height > height) problems.push(`region.height: y + height = ${region.y + region.height} reaches past the viewport's height ${height} (${size})`);
  if (problems.length > 0) throw new BadRequestError(problems);
}

/** The width in a PNG's IHDR (bytes 16–19), or -1 when it is not a PNG. */
function pngWidth(png: Buffer): number {
  return png.length >= 24 && png.readUInt32BE(12) === 0x49484452 ? png.readUInt32BE(16) : -1;
}
