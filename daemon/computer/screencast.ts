// One screencast of the page a person would see — the page the computer controls act on — for
// every consumer at once (recordings and live viewers). It runs only while someone
// consumes it: the first subscriber starts it, the last one's leaving stops it. Every
// FOLLOW_MS it asks which page is current and moves to it when the tab changed, so a tab switch
// shows in the frames; a Chromium restart is a pause (the last frame stays the latest) until the
// new run has a page. Frames are JPEG, as Chromium sends them (Page.screencastFrame, acknowledged
// at once so that Chromium keeps sending, or later when every consumer asked for fewer frames a
// second: Chromium encodes no frame while two wait for their acknowledgement, so a recording at
// 10 fps does not pay for 60 JPEGs a second); a page that does not change sends no frames, so a
// consumer that needs a constant rate repeats the latest frame.
import { Buffer } from 'node:buffer';
import type { CdpClient } from '../cdp/client.js';
import type { ShownPage } from './index.js';
import { Deadline } from '../core/deadline.js';
import type { Logger } from '../core/log.js';

/** How often the source checks which page is current. */
export const FOLLOW_MS = 500;
/**
 * How long a move to the current page may take (its lookup, a screenshot, the screencast's start):
 * while another page is shown, a move that takes longer is tried again at the next check; while
 * none is, the longer bound, so that a page just opened on a busy machine (its first probe and a
 * first screenshot of a large, repainting viewport) can get there at all.
 */
const MOVE_MS = FOLLOW_MS * 4;
const FIRST_MOVE_MS = 10_000;
/** JPEG quality of the frames (0–100). */
const QUALITY = 80;

export interface Frame {
  /** JPEG bytes. */
  jpeg: Buffer;
  width: number;
  height: number;
  /** When Chromium captured it (epoch ms; its own timestamp), which may be well before it arrives on a busy machine. */
  at: number;
}


export interface ScreencastDeps {
  log: Logger;
  /** The page a person sees (the computer controls' current page); rejects when there is none. */
  currentPage(deadline: Deadline): Promise<ShownPage>;
}

/** Width and height of a baseline or progressive JPEG (its first SOF marker); null when it has none. */
export function jpegSize(b: Buffer): { width: number; height: number } | null {
  if (b.length < 4 || b[0] !== 0xff || b[1] !== 0xd8) return null;
  let i = 2;
  while (i + 9 < b.length) {
    if (b[i] !== 0xff) return null;
    const marker = b[i + 1] as number;
    if (marker === 0xff) {
      i++;
      continue;
    }
    const len = b.readUInt16BE(i + 2);
    // SOF0–SOF15 but DHT (c4), JPG (c8) and DAC (cc).
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) return { height: b.readUInt16BE(i + 5), width: b.readUInt16BE(i + 7) };
    i += 2 + len;
  }
  return null;
}

export class Screencast {
  /** Each consumer and the frames a second it needs (Infinity: all of them). */
  private readonly consumers = new Map<(frame: Frame) => void, number>();
  /** When the last acknowledgement is (or was) sent, to space them by the rate consumers need. */
  private lastAck = 0;
  private latestFrame: Frame | null = null;
  private shown: { cdp: CdpClient; sessionId: string; off: () => void } | null = null;
  private timer: NodeJS.Timeout | null = null;
  private following: Promise<void> | null = null;

  constructor(private readonly deps: ScreencastDeps) {}

  /** The newest frame (of this or an earlier page), or null before the first. */
  latest(): Frame | null {
    return this.latestFrame;
  }

  get active(): boolean {
    return this.consumers.size > 0;
  }

  /**
   * Frames to `consumer` from now on, at least `maxFps` a second when the page changes that often
   * (Chromium sends no more than the most any consumer asks for); the returned function
   * unsubscribes (the last one stops the screencast).
   */
  subscribe(consumer: (frame: Frame) => void, maxFps = Infinity): () => void {
    this.consumers.set(consumer, maxFps);
    if (this.timer === null) {
      this.timer = setInterval(() => this.follow(), FOLLOW_MS);
      this.follow();
    }
    return () => {
      if (!this.consumers.delete(consumer) || this.consumers.size > 0) return;
      if (this.timer !== null) clearInterval(this.timer);
      this.timer = null;
      this.stopShown();
    };
  }

  /** Waits for a frame (the current page's first one) within `deadline`; the latest when one exists already. */
  async firstFrame(deadline: Deadline): Promise<Frame> {
    if (this.latestFrame !== null) return this.latestFrame;
    return deadline.race(
      new Promise<Frame>((resolve) => {
        const off = this.subscribe((f) => {
          off();
          resolve(f);
        });
      }),
    );
  }

  /** Moves to the current page when it is another one (one check at a time). */
  private follow(): void {
    if (this.following !== null || this.consumers.size === 0) return;
    this.following = this.moveToCurrent()
      .catch((err: unknown) => this.deps.log.debug({ event: 'screencast_follow_failed', reason: (err as Error).message }, 'no page to show yet'))
      .finally(() => (this.following = null));
  }

  private async moveToCurrent(): Promise<void> {
    const deadline = Deadline.in(this.shown === null ? FIRST_MOVE_MS : MOVE_MS, 'the screencast page');
    try {
      const page = await this.deps.currentPage(deadline);
      if (this.consumers.size === 0) return;
      const s = this.shown;
      if (s !== null && s.cdp === page.cdp && s.sessionId === page.sessionId && !page.cdp.isClosed) return;
      this.stopShown();
      const { cdp, sessionId } = page;
      const off = cdp.on('Page.screencastFrame', (p, sid) => {
        if (sid !== sessionId) return;
        const ack = (): void => void cdp.send('Page.screencastFrameAck', { sessionId: p.sessionId }, { sessionId }).catch(() => undefined);
        const wait = this.ackAt() - Date.now();
        if (wait <= 0) ack();
        else setTimeout(ack, wait).unref();
        const ts = p.metadata.timestamp;
        this.emit(Buffer.from(p.data, 'base64'), ts === undefined ? Date.now() : Math.min(Date.now(), ts * 1000));
      });
      this.shown = { cdp, sessionId, off };
      this.deps.log.debug({ event: 'screencast_page', session_id: sessionId }, 'the screencast shows another page');
      const still = (): boolean => this.shown?.cdp === cdp && this.shown.sessionId === sessionId;
      // A frame at once (a page that does not change sends none until it does).
      const shot = await cdp.send('Page.captureScreenshot', { format: 'jpeg', quality: QUALITY }, { sessionId, deadline });
      // The last consumer may have left meanwhile (stopShown): then no screencast is started, since
      // one whose frames nobody acknowledges stalls at its first frame, for the next consumer too.
      if (!still()) return;
      this.emit(Buffer.from(shot.data, 'base64'), Date.now());
      await cdp.send('Page.startScreencast', { format: 'jpeg', quality: QUALITY, maxWidth: page.width, maxHeight: page.height, everyNthFrame: 1 }, { sessionId, deadline });
      if (!still()) await cdp.send('Page.stopScreencast', {}, { sessionId, timeoutMs: 2000 }).catch(() => undefined);
    } finally {
      deadline.dispose();
    }
  }

  /** When the next acknowledgement may go: acknowledgements spaced by 1 / (the highest rate any consumer needs). */
  private ackAt(): number {
    const fps = Math.max(0, ...this.consumers.values());
    const now = Date.now();
    this.lastAck = fps === Infinity || fps <= 0 ? now : Math.max(now, this.lastAck + 1000 / fps);
    return this.lastAck;
  }

  private emit(jpeg: Buffer, at: number): void {
    const size = jpegSize(jpeg);
    if (size === null) return;
    const frame: Frame = { jpeg, width: size.width, height: size.height, at };
    this.latestFrame = frame;
    for (const c of [...this.consumers.keys()]) c(frame);
  }

  private stopShown(): void {
    const s = this.shown;
    if (s === null) return;
    this.shown = null;
    s.off();
    if (!s.cdp.isClosed) s.cdp.send('Page.stopScreencast', {}, { sessionId: s.sessionId, timeoutMs: 2000 }).catch(() => undefined);
  }
}
