// The REPL's browser: the daemon's one CDP client (cdp/client.ts) over the daemon's authenticated
// CDP endpoint, with its own token (scope `cdp`), and a current tab the helpers act on (a flat
// session attached to it). Opened at the first use and again after it closed (a Chromium restart
// closes it): the current tab is then found again by its target id, or else the first open page.
import { CdpClient, type CommandName, type EventName, type Params, type Result } from '../../cdp/client.js';

/** One command without a deadline of its own waits at most this long. */
const COMMAND_TIMEOUT_MS = 30_000;
/** CDP messages up to this size (screenshots of big pages, full accessibility trees). */
const MAX_PAYLOAD = 256 * 1024 * 1024;

export interface Tab {
  targetId: string;
  sessionId: string;
}

export class ReplBrowser {
  private client: Promise<CdpClient> | null = null;
  private tab: Tab | null = null;
  private wantedTarget: string | null = null;
  /** The attach under way when there is no current tab yet. */
  private finding: Promise<Tab> | null = null;

  constructor(
    private readonly url: string,
    private readonly token: string,
  ) {}

  /** The browser-level client (opened when needed). */
  async browser(): Promise<CdpClient> {
    const current = this.client;
    if (current !== null) {
      const c = await current.catch(() => null);
      if (c !== null && !c.isClosed) return c;
      if (this.client === current) {
        this.client = null;
        if (this.tab !== null) this.wantedTarget = this.tab.targetId;
        this.tab = null;
      }
    }
    this.client ??= CdpClient.overWebSocket(this.url, { headers: { authorization: `Bearer ${this.token}` }, timeoutMs: COMMAND_TIMEOUT_MS, maxPayload: MAX_PAYLOAD });
    const opening = this.client;
    opening.catch(() => {
      if (this.client === opening) this.client = null;
    });
    return opening;
  }

  /** The current tab (the first open page at first; a new one when there is none). Helpers that ask at once share one attach. */
  async current(): Promise<{ client: CdpClient; tab: Tab }> {
    const client = await this.browser();
    if (this.tab !== null) return { client, tab: this.tab };
    this.finding ??= this.find(client).finally(() => (this.finding = null));
    return { client, tab: await this.finding };
  }

  private async find(client: CdpClient): Promise<Tab> {
    const { targetInfos } = await client.send('Target.getTargets', {}, { timeoutMs: COMMAND_TIMEOUT_MS });
    const pages = targetInfos.filter((t) => t.type === 'page');
    const target = pages.find((p) => p.targetId === this.wantedTarget) ?? pages[0];
    const targetId = target?.targetId ?? (await client.send('Target.createTarget', { url: 'about:blank' })).targetId;
    return this.attach(client, targetId);
  }

  /** Makes `targetId` the current tab. */
  async switchTo(targetId: string): Promise<Tab> {
    const client = await this.browser();
    const tab = await this.attach(client, targetId);
    return tab;
  }

  /** The current tab's id, if one is attached. */
  get currentTargetId(): string | null {
    return this.tab?.targetId ?? null;
  }

  /** Forgets the current tab (it closed). */
  forget(targetId: string): void {
    if (this.tab?.targetId === targetId) this.tab = null;
    if (this.wantedTarget === targetId) this.wantedTarget = null;
  }

  /** A command on the current tab's session. */
  async page<M extends CommandName>(method: M, params?: Params<M>, timeoutMs = COMMAND_TIMEOUT_MS): Promise<Result<M>> {
    const { client, tab } = await this.current();
    return client.send(method, params, { sessionId: tab.sessionId, timeoutMs });
  }

  /** The next event `event` of the current tab that `pred` accepts, within `timeoutMs`. */
  async waitForEvent(event: string, pred: (params: unknown) => boolean, timeoutMs: number): Promise<unknown> {
    const { client, tab } = await this.current();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        off();
        reject(new Error(`waitForEvent: no ${event} within ${timeoutMs} ms`));
      }, timeoutMs);
      const off = client.on(event as EventName, (params, sessionId) => {
        if (sessionId !== tab.sessionId || !pred(params)) return;
        clearTimeout(timer);
        off();
        resolve(params);
      });
    });
  }

  close(): void {
    void this.client?.then((c) => c.close()).catch(() => undefined);
  }

  private async attach(client: CdpClient, targetId: string): Promise<Tab> {
    const { sessionId } = await client.send('Target.attachToTarget', { targetId, flatten: true }, { timeoutMs: COMMAND_TIMEOUT_MS });
    // Page events for the helpers that wait (load, navigation).
    await client.send('Page.enable', {}, { sessionId, timeoutMs: COMMAND_TIMEOUT_MS });
    const old = this.tab;
    this.tab = { targetId, sessionId };
    this.wantedTarget = targetId;
    if (old !== null && old.sessionId !== sessionId) await client.send('Target.detachFromTarget', { sessionId: old.sessionId }).catch(() => undefined);
    return this.tab;
  }
}
