// The viewport: the size every tab renders at, its limits and its written form (BROWSERD_VIEWPORT,
// `WIDTHxHEIGHT` or `WIDTHxHEIGHT@HZ`).

export interface Viewport {
  width: number;
  height: number;
  /** Kept and reported; headless Chromium has no refresh rate (a recorder or the live view may use it). */
  refresh_rate?: number;
}

/** CSS pixels and Hz. 8K at most: a larger screen makes every frame and screenshot a memory hog. */
export const VIEWPORT_LIMITS = { minWidth: 100, maxWidth: 7680, minHeight: 100, maxHeight: 4320, minRefreshRate: 1, maxRefreshRate: 240 } as const;

export const DEFAULT_VIEWPORT: Viewport = { width: 1920, height: 1080 };

/** `1920x1080` or `1920x1080@25` → the viewport; throws with why (limits included). */
export function parseViewport(raw: string): Viewport {
  const m = /^(\d{1,5})x(\d{1,5})(?:@(\d{1,4}))?$/.exec(raw);
  if (m === null) throw new Error(`"${raw}" is not WIDTHxHEIGHT or WIDTHxHEIGHT@HZ (e.g. 1920x1080, 1920x1080@25)`);
  const v: Viewport = { width: Number(m[1]), height: Number(m[2]), ...(m[3] !== undefined ? { refresh_rate: Number(m[3]) } : {}) };
  const problems = viewportProblems(v);
  if (problems.length > 0) throw new Error(problems.join('; '));
  return v;
}

export function viewportProblems(v: Viewport): string[] {
  const L = VIEWPORT_LIMITS;
  const out: string[] = [];
  if (v.width < L.minWidth || v.width > L.maxWidth) out.push(`width ${v.width} is outside ${L.minWidth} to ${L.maxWidth}`);
  if (v.height < L.minHeight || v.height > L.maxHeight) out.push(`height ${v.height} is outside ${L.minHeight} to ${L.maxHeight}`);
  if (v.refresh_rate !== undefined && (v.refresh_rate < L.minRefreshRate || v.refresh_rate > L.maxRefreshRate)) {
    out.push(`refresh rate ${v.refresh_rate} is outside ${L.minRefreshRate} to ${L.maxRefreshRate}`);
  }
  return out;
}
