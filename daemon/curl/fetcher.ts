// Requests through the browser: at most BROWSERD_CURL_MAX_CONCURRENT at once (each in a hidden tab
// of its own, kept warm between requests: tabs.ts), each under one deadline (timeout_ms) that covers
// its answer too; what fails is turned into the contract's errors.
import { BrowserUnavailableError, BrowserdError, InternalError } from '../core/errors.js';
import { Slots } from '../core/slots.js';
import { CdpCallError } from '../cdp/client.js';
import type { Config } from '../core/config.js';
import { Deadline, deadlineEnded } from '../core/deadline.js';
import type { Logger } from '../core/log.js';
import type { Metrics } from '../core/metrics.js';
import type { Browser } from '../chromium/index.js';
import { WarmTabs } from './tabs.js';
import { requestThroughBrowser, type BrowserAnswer, type BrowserRequest } from './through-browser.js';

export interface FetchOptions {
  timeoutMs: number;
  /** The request's signal (the client gone, shutdown). */
  signal: AbortSignal;
  maxBytes: number;
  limitName: string;
}

export class BrowserFetcher {
  private readonly slots: Slots;
  readonly tabs: WarmTabs;

  constructor(private readonly deps: { config: Config; log: Logger; browser: Browser; metrics: Metrics }) {
    const gauge = deps.metrics.curlTabs;
    this.tabs = new WarmTabs((inUse, idle) => {
      gauge.set({ state: 'in_use' }, inUse);
      gauge.set({ state: 'idle' }, idle);
    });
    const max = deps.config.curl.maxConcurrent;
    this.slots = new Slots({ what: 'requests through the browser', max, message: `too many requests through the browser at once (limit ${max}, BROWSERD_CURL_MAX_CONCURRENT)` });
    // A session of the module's own in every run: its tabs, their sessions and Fetch are its alone.
    deps.browser.use({ name: 'curl', onLaunch: async (cdp) => this.tabs.runStarted(cdp) });
  }

  /** Makes the request and hands its answer to `use` (which reads the body); the request is ended after. */
  async run<T>(req: BrowserRequest, opts: FetchOptions, use: (answer: BrowserAnswer, deadline: Deadline) => Promise<T>): Promise<T> {
    const { browser } = this.deps;
    this.slots.check();
    browser.ensureReady();
    const release = this.slots.take();
    const deadline = Deadline.in(opts.timeoutMs, 'the request through the browser', opts.signal);
    try {
      const tab = await this.tabs.take(deadline);
      const answer = await requestThroughBrowser(tab, req, deadline, { maxBytes: opts.maxBytes, limitName: opts.limitName }, (reusable) => this.tabs.give(tab, reusable));
      try {
        return await use(answer, deadline);
      } finally {
        await answer.release();
      }
    } catch (err) {
      throw this.explain(err, deadline, req.url, opts.timeoutMs);
    } finally {
      release();
      deadline.dispose();
    }
  }

  private explain(err: unknown, deadline: Deadline, url: string, timeoutMs: number): unknown {
    if (err instanceof BrowserdError) return err;
    const host = URL.canParse(url) ? new URL(url).host : url;
    const ended = deadlineEnded(err, deadline, {
      timedOut: `the request to ${host} through the browser did not complete within ${timeoutMs} ms (timeout_ms, default BROWSERD_CURL_TIMEOUT_MS)`,
      abandoned: 'the request through the browser was abandoned: the client went away or browserd is stopping',
    });
    if (ended !== null) return ended;
    if (err instanceof CdpCallError && !err.answered) return new BrowserUnavailableError(`Chromium went away during the request to ${host}: ${err.text}`);
    this.deps.log.error({ event: 'curl_error', err }, 'a request through the browser failed unexpectedly');
    return new InternalError();
  }
}
