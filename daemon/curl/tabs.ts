// The hidden tabs requests through the browser are made in, kept warm between requests: opening a
// tab (Target.createTarget, its renderer, the attach, Fetch.enable) was most of what a small request
// cost beyond the request itself (docs/curl.md). Each Chromium run gives the module a browser-level
// session of its own (Browser.onLaunch); the tabs are opened there, lazily, hidden, in the default
// browser context (the profile's cookies and proxy), on about:blank, with Fetch enabled so that every
// request the tab makes is paused at the request stage. A request takes a tab, or opens one when
// none is idle (at most BROWSERD_CURL_MAX_CONCURRENT are in use: the fetcher's limit); a tab is
// handed back only after a clean end (the body read to its end, the request cancelled before it
// committed, the navigation answered: the tab is still on its about:blank, with nothing of the
// request in it), else it is closed. At most KEEP_IDLE tabs wait between requests; one closed by
// someone else (a CDP client closing every page) is never handed out again.
import { openPage, type PageSession } from '../cdp/attach.js';
import type { CdpClient } from '../cdp/client.js';
import type { Deadline } from '../core/deadline.js';
import { BrowserUnavailableError } from '../core/errors.js';

/** Tabs kept open between requests (more at once are opened for the burst and closed after). */
export const KEEP_IDLE = 1;

export class WarmTabs {
  private cdp: CdpClient | null = null;
  private idle: PageSession[] = [];
  /** Tabs taken and not yet handed back, or being closed (their close not yet answered). */
  private inUse = 0;

  /** `counted`: told of the tabs in use and idle at each change (browserd_curl_tabs). */
  constructor(private readonly counted: (inUse: number, idle: number) => void = () => undefined) {}

  /** A new Chromium run and the module's session of it (the old run's tabs went with the old Chromium). */
  runStarted(cdp: CdpClient): void {
    this.cdp = cdp;
    this.idle = [];
    this.count();
  }

  private count(): void {
    this.counted(this.inUse, this.idle.length);
  }

  /** How many tabs wait for a request now. */
  get idleCount(): number {
    return this.idle.length;
  }

  /** An idle tab, else a new one; BrowserUnavailableError when the run's session is gone. */
  async take(deadline: Deadline): Promise<PageSession> {
    const cdp = this.cdp;
    if (cdp === null || cdp.isClosed) throw new BrowserUnavailableError('Chromium is not ready: it went away a moment ago', { retryable: true });
    this.inUse++;
    for (let tab = this.idle.pop(); tab !== undefined; tab = this.idle.pop()) {
      if (!tab.isDetached) {
        this.count();
        return tab;
      }
    }
    this.count();
    let tab: PageSession;
    try {
      tab = await openPage(cdp, { url: 'about:blank', background: true, hidden: true }, { deadline });
    } catch (err) {
      this.inUse--;
      this.count();
      throw err;
    }
    try {
      await tab.send('Fetch.enable', { patterns: [{ urlPattern: '*', requestStage: 'Request' }] }, { deadline });
      // Fetch never shows Set-Cookie: the raw header lines come from Network's ExtraInfo events (set-cookie.ts).
      await tab.send('Network.enable', {}, { deadline });
    } catch (err) {
      this.close(tab);
      throw err;
    }
    return tab;
  }

  /** A request is over: its tab waits for the next one when `reusable` (and there is room), else it is closed. */
  give(tab: PageSession, reusable: boolean): void {
    if (reusable && !tab.isDetached && tab.cdp === this.cdp && this.idle.length < KEEP_IDLE) {
      this.idle.push(tab);
      this.inUse--;
      this.count();
    } else this.close(tab);
  }

  /** Closes a taken tab; it counts as in use until Chromium has answered. */
  private close(tab: PageSession): void {
    void tab.close().finally(() => {
      this.inUse--;
      this.count();
    });
  }
}
