// The computer of one browser: per Chromium run a page tracker and a mouse (the mouse survives tab
// switches, not a restart), one queue for everything that moves input (a person has one mouse and
// one keyboard: concurrent requests act one after the other, in order), and one deadline per
// request: its own waits plus BROWSERD_COMPUTER_TIMEOUT_MS. Screenshots and the mouse position do
// not queue. A browser that is not ready answers 503 at once (retryable unless it failed or is
// stopped): an action meant for the page a person saw must not land on a fresh browser.
import { SerialQueue } from '../core/serial-queue.js';
import { CdpCallError, type CdpClient } from '../cdp/client.js';
import type { Browser } from '../chromium/types.js';
import { Deadline, deadlineEnded } from '../core/deadline.js';
import { BrowserdError, BrowserUnavailableError, ConflictError, InternalError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { Metrics } from '../core/metrics.js';
import { Mouse, type Point } from './mouse.js';
import type { Page } from './page.js';
import { PageTracker } from './pages.js';
import type { ComputerLimits } from './schemas.js';

/** Time the page tracker of a new run gets to start discovering targets. */
const START_TIMEOUT_MS = 10_000;

export interface Run {
  readonly cdp: CdpClient;
  readonly tracker: PageTracker;
  readonly mouse: Mouse;
  readonly queue: Queue;
  readonly started: Promise<void>;
}

interface ActOptions {
  /** Waits for the input queue (everything that sends input or changes the page's focus). */
  exclusive: boolean;
  /** The waits the request asks for, added to its deadline. */
  plannedWaitMs?: number;
}

export class Computer {
  private run: Run | null = null;
  /** The computer controls' own browser-level session of the latest run (given at its launch). */
  private session: CdpClient | null = null;

  constructor(
    private readonly deps: { browser: Browser; log: Logger; metrics: Metrics; limits: ComputerLimits },
  ) {
    // Tracking starts with every launch, on a session of the controls' own (the tab Chromium opens
    // at launch is reported by its discovery whatever the daemon's other parts did first), so the
    // order of the pages is known from the first one on; the launch does not wait for it (computer
    // controls never delay or fail a launch).
    deps.browser.use({
      name: 'computer',
      onLaunch: async (cdp) => {
        this.session = cdp;
        this.runFor(cdp).started.catch((err: unknown) => {
          deps.log.warn({ event: 'computer_tracking_failed', reason: (err as Error).message }, 'page tracking did not start; the next computer request tries again');
        });
      },
    });
  }

  /** Where the mouse is (0, 0 before the first move of a run). */
  mousePosition(): Point {
    return this.run?.mouse.position() ?? { x: 0, y: 0 };
  }

  /**
   * Runs `fn` with the current run and the request's deadline; CDP failures become the contract's
   * errors (a page gone: 409 no_page, the browser gone: 503, the deadline: 504).
   */
  async act<T>(action: string, signal: AbortSignal, opts: ActOptions, fn: (run: Run, deadline: Deadline) => Promise<T>): Promise<T> {
    const budget = this.budget(opts.plannedWaitMs);
    const deadline = Deadline.in(budget, `computer ${action}`, signal);
    let outcome = 'ok';
    try {
      const run = await this.ready(deadline);
      const release = opts.exclusive ? await run.queue.acquire(deadline) : null;
      try {
        return await fn(run, deadline);
      } finally {
        release?.();
      }
    } catch (err) {
      const e = this.explain(err, deadline, action, budget);
      outcome = e instanceof BrowserdError ? e.code : 'internal_error';
      throw e;
    } finally {
      deadline.dispose();
      this.deps.metrics.computerActions.inc({ action, outcome });
    }
  }

  /** The deadline budget of a request that asks for `plannedWaitMs` of waits. */
  budget(plannedWaitMs = 0): number {
    return plannedWaitMs + this.deps.limits.timeoutMs;
  }

  /**
   * The page a person sees, for those who show it (the screencast of recordings): the daemon's
   * client of the run and the page. The browser not ready: 503; no page: 409 no_page.
   */
  async shownPage(deadline: Deadline): Promise<{ cdp: CdpClient; page: Page }> {
    const run = await this.ready(deadline);
    return { cdp: run.cdp, page: await run.tracker.currentPage(deadline) };
  }

  /** The current page of `run` (each action of a batch asks again: a click may have opened a tab); `fresh`: PageTracker.currentPage. */
  page(run: Run, deadline: Deadline, opts: { fresh?: boolean } = {}): Promise<Page> {
    return run.tracker.currentPage(deadline, opts);
  }

  private async ready(deadline: Deadline): Promise<Run> {
    const { browser } = this.deps;
    browser.ensureReady();
    const cdp = this.session;
    // Ready, yet the run's session is gone: Chromium ended a moment ago (the state follows).
    if (cdp === null || cdp.isClosed) throw new BrowserUnavailableError('Chromium is not ready: it went away a moment ago', { retryable: true });
    const run = this.runFor(cdp);
    await deadline.race(run.started);
    return run;
  }

  /** The run of the controls' session; a new one (tracker, mouse, queue) when Chromium was launched again. */
  private runFor(cdp: CdpClient): Run {
    if (this.run !== null && this.run.cdp === cdp) return this.run;
    this.run?.tracker.close();
    const tracker = new PageTracker(cdp, this.deps.log, (how) => this.deps.metrics.computerPageLookups.inc({ how }));
    const d = Deadline.in(START_TIMEOUT_MS, 'starting page tracking');
    const run: Run = {
      cdp,
      tracker,
      mouse: new Mouse(),
      queue: new Queue(),
      started: tracker.start(d).finally(() => d.dispose()),
    };
    run.started.catch(() => {
      if (this.run === run) this.run = null; // the next request starts it again
    });
    this.run = run;
    return run;
  }

  /** The contract's error for what an action threw (also for each action of a batch, before its index is added). */
  explain(err: unknown, deadline: Deadline, action: string, budget: number): unknown {
    if (err instanceof BrowserdError) return err;
    const ended = deadlineEnded(err, deadline, {
      timedOut: `the ${action} did not finish within its deadline of ${budget} ms (BROWSERD_COMPUTER_TIMEOUT_MS plus the waits it asked for)`,
      abandoned: `the ${action} was abandoned: the client went away or browserd is stopping`,
    });
    if (ended !== null) return ended;
    if (err instanceof CdpCallError) {
      // Not known whether the input reached the page: not safe to repeat as is.
      if (err.malformed) return new BrowserUnavailableError(`Chromium sent a malformed answer to ${err.method} during the ${action}: ${err.text}`, { retryable: false });
      if (!err.answered) return new BrowserUnavailableError(`Chromium went away during the ${action}: ${err.text}`);
      if (/no target|session|not found|closed|detached|crashed/i.test(err.text)) return new ConflictError('no_page', `the page closed during the ${action} (${err.text})`);
    }
    this.deps.log.error({ event: 'computer_error', action, err }, 'a computer action failed unexpectedly');
    return new InternalError();
  }
}

/** A FIFO lock: the input of one request is not interleaved with another's. */
class Queue {
  private readonly queue = new SerialQueue();

  /** Resolves with the release function once every earlier holder released; gives up its place when the deadline ends first. */
  async acquire(deadline: Deadline): Promise<() => void> {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const turn = new Promise<void>((resolve) => {
      void this.queue.run(() => {
        resolve();
        return held;
      });
    });
    try {
      await deadline.race(turn);
    } catch (err) {
      release();
      throw err;
    }
    return release;
  }
}
