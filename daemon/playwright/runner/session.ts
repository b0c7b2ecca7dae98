// The runner's one Playwright connection: playwright-core over CDP to the daemon's own
// authenticated endpoint (each client gets its own session there). It is opened at the runner's
// start and kept; when it closes (a Chromium restart closes it with 1012) a new one is opened at
// once, and, if that fails (the browser is stopped), again at the next execution.
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

export interface Session {
  browser: Browser;
  context: BrowserContext;
  page: Page;
  /** The page's CDP target id. */
  targetId: string;
  /** The page was opened for this session. */
  created: boolean;
}

/** A page's CDP target id (it stays the page's for its life: asked once). */
const targetIds = new WeakMap<Page, Promise<string>>();
export function targetIdOf(page: Page): Promise<string> {
  let id = targetIds.get(page);
  if (id === undefined) {
    id = (async () => {
      const s = await page.context().newCDPSession(page);
      try {
        const { targetInfo } = await s.send('Target.getTargetInfo');
        return targetInfo.targetId;
      } finally {
        await s.detach().catch(() => {});
      }
    })();
    id.catch(() => targetIds.delete(page));
    targetIds.set(page, id);
  }
  return id;
}

/** Chromium could not be reached; the code did not run. */
export class UnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnavailableError';
  }
}

/** How long one connection attempt may take (the daemon itself waits up to 15 s for a restarting Chromium). */
const CONNECT_TIMEOUT_MS = 30_000;

export class Connection {
  private current: Promise<Browser> | null = null;
  /** A named executor's own tab (ownTab), once opened or taken over. */
  private own: Page | null = null;

  constructor(
    private readonly url: string,
    private readonly token: string,
    /** Playwright's artifacts folder: the daemon's downloads folder (never cleaned up by Playwright). */
    private readonly downloadsDir: string,
    /** A named executor's runner: a tab of its own, not the first open page. */
    private readonly ownTab: boolean,
  ) {}

  /** Opens the connection now (its failure is kept for nobody: the next session() tries again). */
  prime(): void {
    this.browser().catch(() => {});
  }

  /**
   * The default context and the page to run in: a named executor's own tab (the one it had,
   * `targetId`, while that is open; else a new one), or else the first open page (a new one when
   * there is none).
   */
  async session(targetId?: string): Promise<Session> {
    let browser = await this.browser();
    if (!browser.isConnected()) {
      this.current = null;
      browser = await this.browser();
    }
    const context = browser.contexts()[0];
    if (context === undefined) throw new UnavailableError('the browser has no default context');
    if (this.ownTab) {
      if (this.own === null || this.own.isClosed() || this.own.context() !== context) {
        this.own = null;
        if (targetId !== undefined) {
          for (const p of context.pages()) if (!p.isClosed() && (await targetIdOf(p).catch(() => '')) === targetId) this.own = p;
        }
      }
      const created = this.own === null;
      const page = (this.own ??= await context.newPage());
      return { browser, context, page, targetId: await targetIdOf(page), created };
    }
    let page = context.pages().find((p) => !p.isClosed());
    const created = page === undefined;
    page ??= await context.newPage();
    return { browser, context, page, targetId: await targetIdOf(page), created };
  }

  private browser(): Promise<Browser> {
    if (this.current !== null) return this.current;
    const attempt = chromium
      .connectOverCDP(this.url, {
        headers: { authorization: `Bearer ${this.token}` },
        // Same host: file uploads by path, and downloads saved by path (download.saveAs). Playwright
        // sets the download behaviour with its artifacts folder (events on, files named by GUID):
        // the daemon's downloads folder, so a download the code makes is listed and served, and
        // outlives the runner. Without noDefaults, which would leave Playwright blind to downloads;
        // its one other effect is focus emulation on the pages it attaches (they report focus).
        isLocal: true,
        artifactsDir: this.downloadsDir,
        timeout: CONNECT_TIMEOUT_MS,
      })
      .then(
        (browser) => {
          browser.on('disconnected', () => {
            if (this.current !== attempt) return;
            this.current = null;
            this.prime(); // at once: the next execution finds it open
          });
          return browser;
        },
        (err: unknown) => {
          if (this.current === attempt) this.current = null;
          throw new UnavailableError(`cannot connect to Chromium: ${(err as Error).message.split('\n')[0]}`);
        },
      );
    this.current = attempt;
    return attempt;
  }
}
