// What the browser's state means to a caller: why it is not ready (the 503 message of /readyz and
// of every route that needs Chromium), and the metric label of a restart reason.
import type { BrowserState } from '../types.js';

export function notReadyReason(state: BrowserState, reason: string | null, closed: boolean): string | null {
  switch (state) {
    case 'ready':
      return null;
    case 'starting':
      return 'Chromium is starting';
    case 'restarting':
      return reason === null ? 'Chromium is restarting' : `Chromium is restarting after: ${reason}`;
    case 'failed':
      return `Chromium failed: ${reason ?? 'unknown reason'}; POST /browsers/{id}/restart starts it afresh`;
    case 'stopped':
      return closed ? 'browserd is stopping' : 'Chromium is not started (BROWSERD_BROWSER_AUTOSTART=false); POST /browsers/{id}/restart starts it';
  }
}

/** A low-cardinality metric label from a restart reason ('request', 'extensions', 'policy', 'client_close', ...). */
export function metricReason(reason: string): string {
  return /^[a-z_]{1,32}$/.test(reason) ? reason : 'other';
}
