// Which page a person is looking at. Chromium 156 (headless and headful) emits no Target event when
// a tab becomes the current one (Page.bringToFront, Target.activateTarget, a click on a tab): what
// changes is the page's `document.visibilityState`. So the tracker keeps the page targets of the run
// (Target.setDiscoverTargets on the daemon's own session), keeps one flat session attached to each
// page it has looked at, reads each page's visibility and viewport from an isolated world (the
// page's own scripts can neither see nor fake it), and keeps the order in which pages were seen to
// become visible. The current page is the visible page that became visible last; several visible
// at once (several windows) are ordered by that, then by creation. No visible page: `no_page`.
//
// A probe is one Runtime.evaluate per page per action (the first one also attaches and creates the
// world); each page has at most one probe in flight. A page that is slow to answer is never taken
// for a page that is not showing: the action waits for its answer, under the action's own deadline,
// unless the page cannot be the current one whatever it answers —
//  - its window (Browser.getWindowForTarget, answered by the browser process even when the page's
//    renderer is hung) has a page that answered visible in this action: a window shows one tab;
//  - it was visible when last asked, and a page that answered visible in this action became
//    visible after it.
// A page whose probe of an earlier action has not answered yet (a hung renderer) keeps its last
// known state and is waited for only when no page is known to be visible (a hung tab in the
// background never stalls the input to the current one; a hung current tab ends in the deadline).
import type { Protocol } from 'devtools-protocol';
import { CdpCallError, type CdpClient, type CommandName, type Params, type Result } from '../cdp/client.js';
import { Deadline } from '../core/deadline.js';
import { ConflictError } from '../core/errors.js';
import type { Logger } from '../core/log.js';

/** The name of the daemon's isolated world in every page. */
export const WORLD_NAME = 'browserd-computer';
/** A probe that has not answered by then is given up (the page keeps its last known state). */
export const PROBE_TIMEOUT_MS = 10_000;

/** The viewport of a page in CSS pixels, as the probe read it. */
export interface Viewport {
  /** innerWidth / innerHeight: the layout viewport with its scrollbars, what a screenshot shows. */
  width: number;
  height: number;
  /** devicePixelRatio (device scale factor × zoom). */
  dpr: number;
  /** The visual viewport's offset in the document (for screenshot clips). */
  pageX: number;
  pageY: number;
  /** Pinch zoom of the visual viewport (1 unless a mobile emulation zoomed in). */
  scale: number;
}

const PROBE =
  '(() => { const v = window.visualViewport; return [document.visibilityState === "visible", innerWidth, innerHeight, devicePixelRatio, v ? v.pageLeft : scrollX, v ? v.pageTop : scrollY, v ? v.scale : 1]; })()';

interface Tracked {
  targetId: string;
  info: Protocol.Target.TargetInfo;
  /** Order of discovery. */
  created: number;
  /** When it was last seen to become visible (0: never). */
  activated: number;
  session: Promise<string> | null;
  /** The isolated world's execution context in the current document. */
  world: number | null;
  frameId: string;
  probing: Promise<void> | null;
  visible: boolean | null;
  /** The last probe saw it become visible; stamped after the round. */
  becameVisible: boolean;
  viewport: Viewport | null;
  /** The clip scale that gave screenshots of one image pixel per CSS pixel (learned by the first clipped screenshot). */
  clipScale: number;
}

/** A page to act on: its session, viewport and the daemon's isolated world in it. */
export class Page {
  constructor(
    private readonly tracker: PageTracker,
    private readonly t: Tracked,
    readonly sessionId: string,
    readonly viewport: Viewport,
  ) {}

  get targetId(): string {
    return this.t.targetId;
  }

  get browserContextId(): string | undefined {
    return this.t.info.browserContextId;
  }

  /** The clip scale of Page.captureScreenshot that gives one image pixel per CSS pixel, as learned on this page. */
  get clipScale(): number {
    return this.t.clipScale;
  }

  set clipScale(scale: number) {
    this.t.clipScale = scale;
  }

  send<M extends CommandName>(method: M, params: Params<M>, deadline: Deadline): Promise<Result<M>> {
    return this.tracker.cdp.send(method, params, { sessionId: this.sessionId, deadline });
  }

  /** A command on the daemon's browser-level session (Browser.*, Target.*). */
  sendBrowser<M extends CommandName>(method: M, params: Params<M>, deadline: Deadline): Promise<Result<M>> {
    return this.tracker.cdp.send(method, params, { deadline });
  }

  /** A function of the isolated world called with JSON arguments; its (awaited) value. */
  call<T>(fn: string, args: unknown[], deadline: Deadline, opts: { userGesture?: boolean } = {}): Promise<T> {
    return this.tracker.inWorld<T>(this.t, this.sessionId, deadline, (contextId) =>
      this.tracker.cdp.send(
        'Runtime.callFunctionOn',
        { functionDeclaration: fn, executionContextId: contextId, arguments: args.map((value) => ({ value })), awaitPromise: true, returnByValue: true, userGesture: opts.userGesture },
        { sessionId: this.sessionId, deadline },
      ),
    );
  }
}

/** Thrown by a script of the daemon's world (its message is the exception's). */
export class PageScriptError extends Error {}

export class PageTracker {
  private readonly pages = new Map<string, Tracked>();
  private seq = 0;
  private current: string | null = null;
  private readonly offs: (() => void)[] = [];

  constructor(
    readonly cdp: CdpClient,
    private readonly log: Logger,
  ) {
    const top = (fn: (p: never) => void) => (params: unknown, sessionId: string | undefined) => {
      if (sessionId === undefined) fn(params as never);
    };
    this.offs.push(
      cdp.on('Target.targetCreated', top((p: Protocol.Target.TargetCreatedEvent) => this.upsert(p.targetInfo))),
      cdp.on('Target.targetInfoChanged', top((p: Protocol.Target.TargetInfoChangedEvent) => this.upsert(p.targetInfo))),
      cdp.on('Target.targetDestroyed', top((p: Protocol.Target.TargetDestroyedEvent) => void this.pages.delete(p.targetId))),
      cdp.on('Target.targetCrashed', top((p: Protocol.Target.TargetCrashedEvent) => this.forgetWorld(p.targetId))),
      cdp.on('Target.detachedFromTarget', top((p: Protocol.Target.DetachedFromTargetEvent) => this.detached(p.sessionId))),
    );
  }

  /** Starts discovery: every existing target is reported as created. */
  async start(deadline: Deadline): Promise<void> {
    await this.cdp.send('Target.setDiscoverTargets', { discover: true }, { deadline });
  }

  /** Stops listening (the run is over). */
  close(): void {
    for (const off of this.offs.splice(0)) off();
    this.pages.clear();
  }

  /** The page a person is looking at (see the head of this file); `no_page` when there is none. */
  async currentPage(deadline: Deadline): Promise<Page> {
    const candidates = [...this.pages.values()].filter(isCandidate);
    if (candidates.length === 0) throw new ConflictError('no_page', 'the browser has no page open (open a tab first, e.g. with Target.createTarget over CDP)');
    await this.settle(candidates, deadline);
    for (const t of candidates.filter((c) => c.becameVisible).sort((a, b) => a.created - b.created)) {
      t.becameVisible = false;
      t.activated = ++this.seq;
    }
    const visible = candidates.filter((t) => t.visible === true && t.viewport !== null && t.session !== null);
    if (visible.length === 0) {
      throw new ConflictError('no_page', `no page is visible (${candidates.length} page${candidates.length === 1 ? '' : 's'} open, none showing or answering)`);
    }
    const best = visible.reduce((a, b) => (b.activated > a.activated || (b.activated === a.activated && b.created > a.created) ? b : a));
    if (best.targetId !== this.current) {
      this.log.info({ event: 'computer_page', target_id: best.targetId, pages: candidates.length, visible: visible.length }, 'computer controls act on another page');
      this.current = best.targetId;
    }
    return new Page(this, best, await (best.session as Promise<string>), best.viewport as Viewport);
  }

  /**
   * Waits, under `deadline`, until the current page among `candidates` is known (see the head of
   * this file): every page probed by this action has answered or cannot be the current one, and,
   * when no page is known to be visible, every probe still running has answered.
   */
  private async settle(candidates: Tracked[], deadline: Deadline): Promise<void> {
    /** Pages that answered during this action. */
    const answered = new Set<Tracked>();
    /** Their windows, as the browser said during this action. */
    const windows = new Map<Tracked, number>();
    /** Probes this action started (the others are an earlier action's, still running). */
    const started = new Set<Tracked>();
    let wake = (): void => undefined;
    for (const t of candidates) {
      if (t.probing === null) {
        started.add(t);
        const probing = this.probe(t).finally(() => {
          if (t.probing === probing) t.probing = null;
        });
        t.probing = probing;
      }
      void (t.probing as Promise<void>).then(() => {
        answered.add(t);
        wake();
      });
      this.cdp.send('Browser.getWindowForTarget', { targetId: t.targetId }, { deadline }).then(
        (r) => {
          windows.set(t, r.windowId);
          wake();
        },
        () => undefined, // a page gone, or the deadline: it is waited for by its probe alone
      );
    }
    const shows = (t: Tracked): boolean => t.visible === true && t.viewport !== null && t.session !== null;
    const seenVisible = (): Tracked[] => candidates.filter((o) => answered.has(o) && shows(o));
    const cannotWin = (t: Tracked): boolean => {
      const w = windows.get(t);
      return seenVisible().some((o) => o !== t && ((w !== undefined && windows.get(o) === w) || (t.visible === true && (o.becameVisible || o.activated > t.activated))));
    };
    for (;;) {
      const anyVisible = candidates.some(shows);
      const waiting = candidates.filter((t) => !answered.has(t) && (started.has(t) || !anyVisible) && !cannotWin(t));
      if (waiting.length === 0) return;
      await deadline.race(new Promise<void>((resolve) => (wake = resolve)));
    }
  }

  /** Runs `run` with the world's context id; a context gone with its document is made again, once. */
  async inWorld<T>(t: Tracked, sessionId: string, deadline: Deadline, run: (contextId: number) => Promise<Protocol.Runtime.EvaluateResponse>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      const contextId = t.world ?? (t.world = await this.createWorld(t, sessionId, deadline));
      let res: Protocol.Runtime.EvaluateResponse;
      try {
        res = await run(contextId);
      } catch (err) {
        if (attempt === 0 && err instanceof CdpCallError && err.answered && /context/i.test(err.text)) {
          if (t.world === contextId) t.world = null;
          continue;
        }
        throw err;
      }
      if (res.exceptionDetails !== undefined) {
        const text = res.exceptionDetails.exception?.description ?? res.exceptionDetails.text;
        throw new PageScriptError(text.split('\n')[0] ?? text);
      }
      return res.result.value as T;
    }
  }

  private upsert(info: Protocol.Target.TargetInfo): void {
    const known = this.pages.get(info.targetId);
    if (known !== undefined) {
      known.info = info;
      return;
    }
    if (info.type !== 'page') return;
    this.pages.set(info.targetId, {
      targetId: info.targetId,
      info,
      created: ++this.seq,
      activated: 0,
      session: null,
      world: null,
      frameId: info.targetId,
      probing: null,
      visible: null,
      becameVisible: false,
      viewport: null,
      clipScale: 1,
    });
  }

  private forgetWorld(targetId: string): void {
    const t = this.pages.get(targetId);
    if (t !== undefined) t.world = null;
  }

  private detached(sessionId: string): void {
    for (const t of this.pages.values()) {
      void t.session?.then(
        (sid) => {
          if (sid !== sessionId) return;
          t.session = null;
          t.world = null;
        },
        () => undefined,
      );
    }
  }

  private async probe(t: Tracked): Promise<void> {
    const deadline = Deadline.in(PROBE_TIMEOUT_MS, `probing page ${t.targetId}`);
    try {
      t.session ??= this.cdp.send('Target.attachToTarget', { targetId: t.targetId, flatten: true }, { deadline }).then((r) => r.sessionId);
      let sessionId: string;
      try {
        sessionId = await t.session;
      } catch (err) {
        t.session = null;
        throw err;
      }
      const [visible, width, height, dpr, pageX, pageY, scale] = await this.inWorld<[boolean, number, number, number, number, number, number]>(t, sessionId, deadline, (contextId) =>
        this.cdp.send('Runtime.evaluate', { expression: PROBE, contextId, returnByValue: true, silent: true }, { sessionId, deadline }),
      );
      if (!this.pages.has(t.targetId)) return;
      if (visible && t.visible !== true) t.becameVisible = true;
      t.visible = visible;
      t.viewport = { width, height, dpr, pageX, pageY, scale };
    } catch (err) {
      this.log.debug({ event: 'computer_probe_failed', target_id: t.targetId, reason: (err as Error).message }, 'a page did not say whether it is visible');
    } finally {
      deadline.dispose();
    }
  }

  private async createWorld(t: Tracked, sessionId: string, deadline: Deadline): Promise<number> {
    const create = (frameId: string) =>
      this.cdp.send('Page.createIsolatedWorld', { frameId, worldName: WORLD_NAME, grantUniveralAccess: false }, { sessionId, deadline }).then((r) => r.executionContextId);
    try {
      return await create(t.frameId);
    } catch (err) {
      if (!(err instanceof CdpCallError) || !err.answered) throw err;
      // The main frame's id is not the target's (a prerendered page was activated): ask for it.
      const tree = await this.cdp.send('Page.getFrameTree', {}, { sessionId, deadline });
      t.frameId = tree.frameTree.frame.id;
      return create(t.frameId);
    }
  }
}

/** Pages a person could be looking at: tabs and popups, not prerenders or DevTools windows. */
function isCandidate(t: Tracked): boolean {
  return t.info.type === 'page' && t.info.subtype !== 'prerender' && !t.info.url.startsWith('devtools://');
}
