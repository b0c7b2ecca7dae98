// A telemetry event in the SDK's shape (@onkernel/sdk `BrowserTelemetryEvent`): `{ts, type,
// category, source: {kind, event?, metadata?}, data?, truncated?}`, wrapped as `{seq, event}` on the
// wire. The categories and which are on by default are the SDK's (BrowserTelemetryCategoriesConfig).

export const CATEGORIES = ['console', 'network', 'page', 'interaction', 'control', 'connection', 'system', 'screenshot', 'captcha'] as const;
export type Category = (typeof CATEGORIES)[number];
/** Collector health: not switchable; flows whenever a CDP category is on (and for gap markers). */
export type EventCategory = Category | 'monitor';

/** The operational categories are on by default; the CDP ones and screenshots are opt-in. */
export const DEFAULT_ON: ReadonlySet<Category> = new Set<Category>(['control', 'connection', 'system', 'captcha']);
/** The categories the DevTools monitor serves. */
export const CDP_CATEGORIES: readonly Category[] = ['console', 'network', 'page', 'interaction'];

export interface EventSource {
  kind: 'cdp' | 'kernel_api' | 'extension' | 'local_process';
  event?: string;
  metadata?: Record<string, string>;
}

export interface TelemetryEvent {
  /** Unix microseconds. */
  ts: number;
  type: string;
  category: EventCategory;
  source: EventSource;
  data?: Record<string, unknown>;
  truncated?: boolean;
}

export interface Envelope {
  seq: number;
  event: TelemetryEvent;
}

/** Now, in Unix microseconds. */
export function nowMicros(): number {
  return Math.round((performance.timeOrigin + performance.now()) * 1000);
}
