// Helpers of the browser-configuration tests: an expression evaluated in a new tab (after its
// load), and the pages Chromium has open.
import { daemonCdp } from '../kit/browser.js';
import type { Daemon } from '../kit/daemon.js';

/** Opens a tab at `url`, waits for its load, evaluates `expression` there (by value), closes the tab. */
export async function evalInTab<T>(d: Daemon, url: string, expression: string): Promise<T> {
  const cdp = await daemonCdp(d);
  try {
    const { targetId } = await cdp.send('Target.createTarget', { url: 'about:blank' });
    try {
      const { sessionId } = await cdp.send('Target.attachToTarget', { targetId, flatten: true });
      await cdp.send('Page.enable', {}, { sessionId });
      const loaded = new Promise<void>((resolve) => {
        const off = cdp.on('Page.loadEventFired', (_p, sid) => {
          if (sid !== sessionId) return;
          off();
          resolve();
        });
      });
      const nav = await cdp.send('Page.navigate', { url }, { sessionId });
      if (nav.errorText !== undefined) throw new Error(`navigation to ${url} failed: ${nav.errorText}`);
      await loaded;
      const r = await cdp.send('Runtime.evaluate', { expression, returnByValue: true }, { sessionId });
      return r.result.value as T;
    } finally {
      await cdp.send('Target.closeTarget', { targetId }).catch(() => undefined);
    }
  } finally {
    cdp.close();
  }
}

/** The URLs of the open pages. */
export async function pageUrls(d: Daemon): Promise<string[]> {
  const cdp = await daemonCdp(d);
  try {
    const { targetInfos } = await cdp.send('Target.getTargets');
    return targetInfos.filter((t) => t.type === 'page').map((t) => t.url);
  } finally {
    cdp.close();
  }
}
