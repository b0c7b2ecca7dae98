// The Set-Cookie lines of an answer taken through the Fetch domain. Chromium never shows Set-Cookie
// to request interception (Fetch.requestPaused's responseHeaders lack it, whatever the target sent),
// while the Network domain's responseReceivedExtraInfo carries the raw header lines the network
// service received, Set-Cookie included (several lines joined with "\n" in one value). Both name the
// request by its network id; each hop of a redirect chain gets its own ExtraInfo, told apart by status.
import type { Protocol } from 'devtools-protocol';
import type { PageSession } from '../cdp/attach.js';
import type { Deadline } from '../core/deadline.js';

/** How long an answer waits for its ExtraInfo when it is not in yet (the two come over separate pipes inside Chromium). */
export const EXTRA_INFO_WAIT_MS = 2000;

export class SetCookieLines {
  /** network id → the raw headers of its latest hop (status and Set-Cookie lines). */
  private readonly seen = new Map<string, { status: number | undefined; lines: string[] }>();
  private wake: (() => void) | null = null;
  private readonly off: () => void;

  /** `page`: its Network domain enabled (curl/tabs.ts does it when it opens the tab). */
  constructor(page: Pick<PageSession, 'on'>) {
    this.off = page.on('Network.responseReceivedExtraInfo', (p: Protocol.Network.ResponseReceivedExtraInfoEvent) => {
      const lines: string[] = [];
      for (const [name, value] of Object.entries(p.headers)) if (name.toLowerCase() === 'set-cookie') lines.push(...String(value).split('\n').filter((l) => l !== ''));
      this.seen.set(p.requestId, { status: p.statusCode, lines });
      this.wake?.();
    });
  }

  /**
   * The Set-Cookie lines of the answer of `networkId` with `status`: waits for its ExtraInfo at most
   * EXTRA_INFO_WAIT_MS (and the deadline); none when it does not come (then the answer has none).
   */
  async of(networkId: string, status: number, deadline: Deadline): Promise<string[]> {
    const until = Date.now() + EXTRA_INFO_WAIT_MS;
    for (;;) {
      const s = this.seen.get(networkId);
      if (s !== undefined && (s.status === undefined || s.status === status)) return s.lines;
      const left = until - Date.now();
      if (left <= 0) return [];
      let timer: NodeJS.Timeout | undefined;
      await deadline.race(
        new Promise<void>((resolve) => {
          this.wake = resolve;
          timer = setTimeout(resolve, left);
        }),
      );
      clearTimeout(timer);
      this.wake = null;
    }
  }

  close(): void {
    this.off();
  }
}
