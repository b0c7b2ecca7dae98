// One page the computer controls act on (the handle PageTracker.currentPage gives): its session,
// viewport and the daemon's isolated world in it, and what the tracker knows of it (Tracked). Which
// page is the current one is pages.ts.
import type { Protocol } from 'devtools-protocol';
import type { PageSession } from '../cdp/attach.js';
import type { CommandName, Params, Result } from '../cdp/client.js';
import type { Deadline } from '../core/deadline.js';
import type { PageTracker } from './pages.js';

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

/** What the tracker knows of one page target. */
export interface Tracked {
  targetId: string;
  info: Protocol.Target.TargetInfo;
  /** Order of discovery. */
  created: number;
  /** When it was last seen to become visible (0: never). */
  activated: number;
  /** The tracker's own session on the page (cdp/attach.ts), once asked for. */
  session: Promise<PageSession> | null;
  /** The session once attached (for the page's events). */
  sessionId: string | null;
  /** Runtime.enable and the binding were sent on this session. */
  bound: boolean;
  /** The last probe saw the page's listeners in place (it tells of changes). */
  watched: boolean;
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
    return this.tracker.send(method, params, { sessionId: this.sessionId, deadline });
  }

  /** A command on the daemon's browser-level session (Browser.*, Target.*); the next action looks for the current page again. */
  sendBrowser<M extends CommandName>(method: M, params: Params<M>, deadline: Deadline): Promise<Result<M>> {
    this.tracker.changed();
    return this.tracker.send(method, params, { deadline }).finally(() => this.tracker.changed());
  }

  /** A function of the isolated world called with JSON arguments; its (awaited) value. */
  call<T>(fn: string, args: unknown[], deadline: Deadline, opts: { userGesture?: boolean } = {}): Promise<T> {
    return this.tracker.inWorld<T>(this.t, this.sessionId, deadline, (contextId) =>
      this.tracker.send(
        'Runtime.callFunctionOn',
        { functionDeclaration: fn, executionContextId: contextId, arguments: args.map((value) => ({ value })), awaitPromise: true, returnByValue: true, userGesture: opts.userGesture },
        { sessionId: this.sessionId, deadline },
      ),
    );
  }
}

/** Thrown by a script of the daemon's world (its message is the exception's). */
export class PageScriptError extends Error {}
