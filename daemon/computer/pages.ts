// Which page a person is looking at. Chromium 156 (headless and headful) emits no Target event when
// a tab becomes the current one (Page.bringToFront, Target.activateTarget, a click on a tab): what
// changes is the page's `document.visibilityState`. So the tracker keeps the page targets of the run
// (Target.setDiscoverTargets on the computer controls' own browser-level session, opened for them at
// every launch: see "The launch tab" below), keeps one flat session attached to each page it has
// looked at (cdp/attach.ts, on that session), reads each page's visibility and viewport from an isolated world (the
// page's own scripts can neither see nor fake it), and keeps the order in which pages were seen to
// become visible. The current page is the visible page that became visible last; several visible
// at once (several windows) are ordered by that, then by creation. Pages open but none visible: the
// action waits up to NO_PAGE_GRACE_MS for one to show (a tab switch reaches each renderer on its
// own, so for a moment none reads visible), then `no_page`.
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
//
// Between changes, the answer of the last round is kept and no page is asked again. A round's answer
// stays current until one of these, each of which makes the next action probe again:
//  - a Target event on the controls' session about a page (a tab opened, closed, navigated, crashed,
//    detached; not one about another kind of target: a worker, /curl's hidden tabs of type `other`);
//  - a command to the browser from anyone but the computer controls (a CDP client's
//    Page.bringToFront, Target.activateTarget, Emulation.*, the daemon's own live viewport change,
//    …: the multiplexer counts every client's commands, Channel.browserCommands, and the tracker
//    its own), or a browser-level command of the computer controls (the live view's tab switch);
//  - a page saying that it changed: the probe leaves listeners in the daemon's world of each page
//    (visibilitychange, the window's and the visual viewport's resize) that call a binding
//    (Runtime.addBinding, on the controls' session of the page, which needs Runtime.enable there);
//  - a new document in a page (its listeners are gone with the old one).
// A round is kept only when every page answered it and has its listeners, and nothing above
// happened while it ran. What a page's listeners cannot say (its scroll position) is read by a new
// round when it is needed: screenshots ask for a fresh round.
//
// The launch tab. Chromium reports the targets that exist to a session only when that session turns
// discovery on (a second Target.setDiscoverTargets on the same session is answered and reports
// nothing). So the tracker turns it on on a browser-level session of its own, which no other part
// of the daemon uses: the tab Chromium opens at launch (after every restart, crash recovery,
// configure, profile switch) is known to it from the start, with no CDP client ever attached. (When
// the daemon's parts shared one session, the window fitting and telemetry turned discovery on
// first, and the tracker learnt of the launch tab only once it navigated: 409 no_page until then.)
// Its page sessions are its own too: what it enables there (Runtime, its binding, its world) no
// other part can turn off, and their events reach no other part.
import type { Protocol } from 'devtools-protocol';
import { attachPage, type PageSession } from '../cdp/attach.js';
import { CdpCallError, type CdpClient, type CommandName, type Params, type Result, type SendOptions } from '../cdp/client.js';
import { Deadline } from '../core/deadline.js';
import { ConflictError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { Page, PageScriptError, type Tracked, type Viewport } from './page.js';

/** The name of the daemon's isolated world in every page. */
export const WORLD_NAME = 'browserd-computer';
/** A probe that has not answered by then is given up (the page keeps its last known state). */
export const PROBE_TIMEOUT_MS = 10_000;
/**
 * Pages open but none visible: the request waits this long (within its own deadline) for one to show
 * before it answers `no_page`. A tab switch (Target.activateTarget, Page.bringToFront, a tab closed)
 * tells each renderer on its own: for a moment the old tab reads hidden and the new one not yet visible.
 */
export const NO_PAGE_GRACE_MS = 1000;
/** While waiting out NO_PAGE_GRACE_MS, the pages are asked again at least this often (a page's own change report ends the wait sooner). */
const NO_PAGE_RECHECK_MS = 100;
/** The binding the daemon's world of each page calls when the page's visibility or viewport changed (not in the page's own world). */
export const CHANGED_BINDING = '__browserdComputerChanged';


// Also installs, once per document, the listeners that tell the daemon of a change; the last value
// says whether they are there (the binding exists once Runtime is enabled on the daemon's session).
const PROBE =
  '(() => { const v = window.visualViewport; const b = globalThis.' + CHANGED_BINDING + '; ' +
  'if (typeof b === "function" && !globalThis.__browserdWatching) { globalThis.__browserdWatching = true; const changed = () => b(""); ' +
  'document.addEventListener("visibilitychange", changed); addEventListener("resize", changed); if (v) v.addEventListener("resize", changed); } ' +
  'return [document.visibilityState === "visible", innerWidth, innerHeight, devicePixelRatio, v ? v.pageLeft : scrollX, v ? v.pageTop : scrollY, v ? v.scale : 1, globalThis.__browserdWatching === true]; })()';



export class PageTracker {
  private readonly pages = new Map<string, Tracked>();
  private seq = 0;
  private current: string | null = null;
  private readonly offs: (() => void)[] = [];
  /** Bumped by every change that may make the last round's answer wrong (see the head of this file). */
  private gen = 0;
  /** The last round's answer, while it is current: the generation and the other clients' commands it was taken at. */
  private known: { gen: number; others: number; t: Tracked } | null = null;
  /** Sessions of the pages → their page (for the pages' own events). */
  private readonly bySession = new Map<string, Tracked>();
  /** Commands the tracker and its pages sent (the rest of the browser's commands are others'). */
  private mine = 0;
  /** Resolved at the next change (see changed()): requests waiting for a page to show. */
  private readonly changeWaiters = new Set<() => void>();

  constructor(
    readonly cdp: CdpClient,
    private readonly log: Logger,
    /** Told of each lookup of the current page: found by probing the pages, or kept from the last probe. */
    private readonly onLookup: (how: 'probed' | 'kept') => void = () => undefined,
  ) {
    const top = (fn: (p: never) => void) => (params: unknown, sessionId: string | undefined) => {
      if (sessionId === undefined) fn(params as never);
    };
    const page = (fn: (t: Tracked, p: never) => void) => (params: unknown, sessionId: string | undefined) => {
      const t = sessionId === undefined ? undefined : this.bySession.get(sessionId);
      if (t !== undefined) fn(t, params as never);
    };
    this.offs.push(
      cdp.on('Target.targetCreated', top((p: Protocol.Target.TargetCreatedEvent) => this.upsert(p.targetInfo))),
      cdp.on('Target.targetInfoChanged', top((p: Protocol.Target.TargetInfoChangedEvent) => this.upsert(p.targetInfo))),
      cdp.on('Target.targetDestroyed', top((p: Protocol.Target.TargetDestroyedEvent) => this.destroyed(p.targetId))),
      cdp.on('Target.targetCrashed', top((p: Protocol.Target.TargetCrashedEvent) => this.forgetWorld(p.targetId))),
      cdp.on('Runtime.bindingCalled', page((_t, p: Protocol.Runtime.BindingCalledEvent) => {
        if (p.name === CHANGED_BINDING) this.changed();
      })),
      // A new document in the page: its listeners (and the daemon's world) went with the old one.
      cdp.on('Runtime.executionContextsCleared', page((t) => this.newDocument(t))),
      cdp.on('Runtime.executionContextCreated', page((t, p: Protocol.Runtime.ExecutionContextCreatedEvent) => {
        const aux = p.context.auxData as { isDefault?: boolean; frameId?: string } | undefined;
        if (aux?.isDefault === true && aux.frameId === t.frameId) this.newDocument(t);
      })),
    );
  }

  /** Starts discovery: every existing target is reported as created. */
  async start(deadline: Deadline): Promise<void> {
    await this.send('Target.setDiscoverTargets', { discover: true }, { deadline });
  }

  /** Stops listening (the run is over). */
  close(): void {
    for (const off of this.offs.splice(0)) off();
    this.pages.clear();
    this.bySession.clear();
    this.known = null;
  }

  /** A command of the computer controls (counted as theirs: see `others`). */
  send<M extends CommandName>(method: M, params: Params<M>, opts: SendOptions): Promise<Result<M>> {
    this.mine++;
    return this.cdp.send(method, params, opts);
  }

  /** How many commands the browser's other clients have sent so far; null when they cannot be counted. */
  private others(): number | null {
    const all = this.cdp.browserCommands();
    return all === null ? null : all - this.mine;
  }

  /** Something may have changed which page is current, or its viewport: the next action probes the pages again. */
  changed(): void {
    this.gen++;
    this.known = null;
    const waiters = [...this.changeWaiters];
    this.changeWaiters.clear();
    for (const w of waiters) w();
  }

  /** Resolves at the next change or after `ms`, whichever comes first; rejects when the deadline ends first. */
  private nextChange(ms: number, deadline: Deadline): Promise<void> {
    let done = (): void => undefined;
    const p = new Promise<void>((resolve) => {
      const timer = setTimeout(() => done(), ms);
      done = () => {
        clearTimeout(timer);
        this.changeWaiters.delete(done);
        resolve();
      };
      this.changeWaiters.add(done);
    });
    return deadline.race(p).finally(done);
  }

  /**
   * The page a person is looking at (see the head of this file); `no_page` when there is none.
   * `fresh`: probe the pages even when nothing changed since the last round (the scroll position
   * of the viewport is needed: screenshots).
   */
  async currentPage(deadline: Deadline, opts: { fresh?: boolean } = {}): Promise<Page> {
    const others = this.others();
    const k = this.known;
    if (opts.fresh !== true && k !== null && others !== null && k.gen === this.gen && k.others === others) {
      const { t } = k;
      if (t.sessionId !== null && t.viewport !== null) {
        this.onLookup('kept');
        return new Page(this, t, t.sessionId, t.viewport);
      }
    }
    this.onLookup('probed');
    if (this.log.isLevelEnabled('debug')) this.log.debug({ event: 'computer_page_probe', fresh: opts.fresh === true, known: k !== null, gen_moved: k !== null && k.gen !== this.gen, others_moved: k === null || others === null ? null : others - k.others }, 'the computer controls ask the pages which one is current');
    /** Until when pages open but none visible are waited for (NO_PAGE_GRACE_MS), from the first round that found none. */
    let graceUntil: number | null = null;
    for (;;) {
      this.known = null;
      const gen = this.gen;
      const othersNow = this.others();
      const candidates = [...this.pages.values()].filter(isCandidate);
      if (candidates.length === 0) throw new ConflictError('no_page', 'the browser has no page open (open a tab first, e.g. with Target.createTarget over CDP)');
      const answered = await this.settle(candidates, deadline);
      for (const t of candidates.filter((c) => c.becameVisible).sort((a, b) => a.created - b.created)) {
        t.becameVisible = false;
        t.activated = ++this.seq;
      }
      const visible = candidates.filter((t) => t.visible === true && t.viewport !== null && t.session !== null);
      if (visible.length === 0) {
        graceUntil ??= Date.now() + NO_PAGE_GRACE_MS;
        const left = graceUntil - Date.now();
        if (left > 0) {
          await this.nextChange(Math.min(left, NO_PAGE_RECHECK_MS), deadline);
          continue;
        }
        throw new ConflictError('no_page', `no page is visible (${candidates.length} page${candidates.length === 1 ? '' : 's'} open, none showing or answering)`);
      }
      return this.chosen(visible, candidates, answered, gen, othersNow);
    }
  }

  /** The current page among the visible ones of a round; kept for the next actions when the round allows (see currentPage). */
  private async chosen(visible: Tracked[], candidates: Tracked[], answered: Set<Tracked>, gen: number, others: number | null): Promise<Page> {
    const best = visible.reduce((a, b) => (b.activated > a.activated || (b.activated === a.activated && b.created > a.created) ? b : a));
    if (best.targetId !== this.current) {
      this.log.info({ event: 'computer_page', target_id: best.targetId, pages: candidates.length, visible: visible.length }, 'computer controls act on another page');
      this.current = best.targetId;
    }
    const { sessionId } = await (best.session as Promise<PageSession>);
    // Kept for the next actions only when every page answered this round and tells of its changes,
    // and nothing changed while the round ran.
    if (others !== null && this.gen === gen && this.others() === others && candidates.every((t) => answered.has(t) && t.watched && t.probing === null)) {
      this.known = { gen, others, t: best };
    } else if (this.log.isLevelEnabled('debug')) {
      const unsettled = candidates.filter((t) => !(answered.has(t) && t.watched && t.probing === null)).map((t) => ({ target_id: t.targetId, answered: answered.has(t), watched: t.watched, probing: t.probing !== null }));
      this.log.debug({ event: 'computer_page_not_kept', gen_moved: this.gen !== gen, others_moved: others === null ? null : (this.others() ?? 0) - others, unsettled }, 'the round is not kept: the next action asks the pages again');
    }
    return new Page(this, best, sessionId, best.viewport as Viewport);
  }

  /**
   * Waits, under `deadline`, until the current page among `candidates` is known (see the head of
   * this file): every page probed by this action has answered or cannot be the current one, and,
   * when no page is known to be visible, every probe still running has answered.
   */
  private async settle(candidates: Tracked[], deadline: Deadline): Promise<Set<Tracked>> {
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
      this.send('Browser.getWindowForTarget', { targetId: t.targetId }, { deadline }).then(
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
      if (waiting.length === 0) return answered;
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

  // Only targets that are, or were, pages change which page is current: the others (workers, /curl's
  // hidden tabs, of type `other`) come and go without making the next action ask the pages again.
  private upsert(info: Protocol.Target.TargetInfo): void {
    const known = this.pages.get(info.targetId);
    if (known !== undefined) {
      this.changed();
      known.info = info;
      return;
    }
    if (info.type !== 'page') return;
    this.changed();
    this.pages.set(info.targetId, {
      targetId: info.targetId,
      info,
      created: ++this.seq,
      activated: 0,
      session: null,
      sessionId: null,
      bound: false,
      watched: false,
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
    if (t !== undefined) {
      this.changed();
      t.world = null;
      t.watched = false;
    }
  }

  private destroyed(targetId: string): void {
    const t = this.pages.get(targetId);
    if (t === undefined) return;
    this.changed();
    if (t.sessionId !== null) this.bySession.delete(t.sessionId);
    this.pages.delete(targetId);
  }

  private newDocument(t: Tracked): void {
    this.changed();
    t.world = null;
    t.watched = false;
  }

  /** The page's session ended (detached by Chromium, the page gone): the next probe attaches again. */
  private detached(t: Tracked, session: PageSession): void {
    this.changed();
    this.bySession.delete(session.sessionId);
    if (t.sessionId !== session.sessionId) return;
    t.session = null;
    t.sessionId = null;
    t.bound = false;
    t.watched = false;
    t.world = null;
  }

  private async probe(t: Tracked): Promise<void> {
    const deadline = Deadline.in(PROBE_TIMEOUT_MS, `probing page ${t.targetId}`);
    try {
      if (t.session === null) {
        this.mine++;
        t.session = attachPage(this.cdp, t.targetId, { deadline });
      }
      let session: PageSession;
      try {
        session = await t.session;
      } catch (err) {
        t.session = null;
        throw err;
      }
      if (!this.pages.has(t.targetId)) return;
      const { sessionId } = session;
      if (t.sessionId !== sessionId) {
        t.sessionId = sessionId;
        this.bySession.set(sessionId, t);
        session.onDetached(() => this.detached(t, session));
      }
      if (!t.bound) {
        // Sent before the probe on the same session, so Chromium has them when the probe runs (the
        // probe says whether the binding is there: a failure here only means probing every time).
        t.bound = true;
        const quiet = (err: unknown): void => this.log.debug({ event: 'computer_watch_failed', target_id: t.targetId, reason: (err as Error).message }, 'a page cannot tell the daemon of its changes');
        this.send('Runtime.enable', {}, { sessionId, deadline }).catch(quiet);
        this.send('Runtime.addBinding', { name: CHANGED_BINDING, executionContextName: WORLD_NAME }, { sessionId, deadline }).catch(quiet);
      }
      const [visible, width, height, dpr, pageX, pageY, scale, watched] = await this.inWorld<[boolean, number, number, number, number, number, number, boolean]>(t, sessionId, deadline, (contextId) =>
        this.send('Runtime.evaluate', { expression: PROBE, contextId, returnByValue: true, silent: true }, { sessionId, deadline }),
      );
      if (!this.pages.has(t.targetId)) return;
      if (visible && t.visible !== true) t.becameVisible = true;
      t.visible = visible;
      t.watched = watched;
      // No binding in the world (the enable failed, or reached the page before its first document
      // did): enable it again with the next probe; until then the page is asked at every action.
      // (No other part of the daemon uses this session: none turns Runtime off here.)
      if (!watched) t.bound = false;
      t.viewport = { width, height, dpr, pageX, pageY, scale };
    } catch (err) {
      this.log.debug({ event: 'computer_probe_failed', target_id: t.targetId, reason: (err as Error).message }, 'a page did not say whether it is visible');
    } finally {
      deadline.dispose();
    }
  }

  private async createWorld(t: Tracked, sessionId: string, deadline: Deadline): Promise<number> {
    const create = (frameId: string) =>
      this.send('Page.createIsolatedWorld', { frameId, worldName: WORLD_NAME, grantUniveralAccess: false }, { sessionId, deadline }).then((r) => r.executionContextId);
    try {
      return await create(t.frameId);
    } catch (err) {
      if (!(err instanceof CdpCallError) || !err.answered) throw err;
      // The main frame's id is not the target's (a prerendered page was activated): ask for it.
      const tree = await this.send('Page.getFrameTree', {}, { sessionId, deadline });
      t.frameId = tree.frameTree.frame.id;
      return create(t.frameId);
    }
  }
}

/** Pages a person could be looking at: tabs and popups, not prerenders or DevTools windows. */
function isCandidate(t: Tracked): boolean {
  return t.info.type === 'page' && t.info.subtype !== 'prerender' && !t.info.url.startsWith('devtools://');
}
