// A small CDP client on the browser-level WebSocket (Extensions.* exists only there), with the
// few calls the activation needs. One short-lived connection per activation.
import WebSocket from 'ws';

export class CdpError extends Error {
  constructor(
    readonly method: string,
    /** The error itself, without the method. */
    readonly text: string,
    /** true: Chromium answered the call with this error (else no answer: timeout, connection lost). */
    readonly answered = false,
  ) {
    super(`${method}: ${text}`);
    this.name = 'CdpError';
  }
}

interface Pending {
  method: string;
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout;
}

export interface ExtensionInfo {
  id: string;
  name: string;
  version: string;
  path: string;
  enabled: boolean;
}

export interface TargetInfo {
  targetId: string;
  type: string;
  url: string;
}

export class CdpClient {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private closedError: Error | null = null;
  /** Extension ids whose service worker target was seen since watchWorkers(). */
  readonly workersSeen = new Set<string>();

  private constructor(private readonly ws: WebSocket) {
    ws.on('message', (data) => this.onMessage(data.toString()));
    ws.on('close', () => this.failAll(new Error('the DevTools connection closed')));
    ws.on('error', (err) => this.failAll(err));
  }

  static connect(wsUrl: string, timeoutMs: number): Promise<CdpClient> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(wsUrl, { handshakeTimeout: timeoutMs, perMessageDeflate: false });
      ws.once('open', () => resolve(new CdpClient(ws)));
      ws.once('error', (err) => reject(new Error(`cannot reach DevTools: ${err.message}`)));
    });
  }

  send<T>(method: string, params: Record<string, unknown> = {}, timeoutMs = 10_000, sessionId?: string): Promise<T> {
    if (this.closedError) return Promise.reject(this.closedError);
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new CdpError(method, `no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, { method, resolve: resolve as (v: unknown) => void, reject, timer });
      this.ws.send(JSON.stringify(sessionId === undefined ? { id, method, params } : { id, method, params, sessionId }));
    });
  }

  close(): void {
    this.failAll(new Error('closed'));
    this.ws.terminate();
  }

  private onMessage(text: string): void {
    let msg: { id?: number; method?: string; params?: { targetInfo?: TargetInfo }; result?: unknown; error?: { message?: string } };
    try {
      msg = JSON.parse(text) as typeof msg;
    } catch {
      return;
    }
    if (msg.id === undefined) {
      const info = msg.params?.targetInfo;
      if ((msg.method === 'Target.targetCreated' || msg.method === 'Target.targetInfoChanged') && info) this.noteTarget(info);
      return;
    }
    const p = this.pending.get(msg.id);
    if (!p) return;
    this.pending.delete(msg.id);
    clearTimeout(p.timer);
    if (msg.error) p.reject(new CdpError(p.method, msg.error.message ?? 'error', true));
    else p.resolve(msg.result ?? {});
  }

  private failAll(err: Error): void {
    this.closedError ??= err;
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.reject(err);
    }
    this.pending.clear();
  }

  private noteTarget(t: TargetInfo): void {
    const m = /^chrome-extension:\/\/([a-p]{32})\//.exec(t.url);
    if (t.type === 'service_worker' && m) this.workersSeen.add(m[1] as string);
  }

  // ---- the calls the activation uses ----

  /**
   * Target discovery: records every extension service worker that appears from now on, even one
   * that stops again before the next poll (an idle MV3 worker is stopped after ~30 s).
   */
  async watchWorkers(timeoutMs: number): Promise<void> {
    await this.send('Target.setDiscoverTargets', { discover: true }, timeoutMs);
  }

  /** Chromium's refusal (a bad manifest, reserved file names, ...) is a CdpError with `answered`. */
  async loadUnpacked(absPath: string, timeoutMs: number): Promise<string> {
    const r = await this.send<{ id: string }>('Extensions.loadUnpacked', { path: absPath }, timeoutMs);
    return r.id;
  }

  async getExtensions(timeoutMs: number): Promise<ExtensionInfo[]> {
    const r = await this.send<{ extensions?: ExtensionInfo[] }>('Extensions.getExtensions', {}, timeoutMs);
    return r.extensions ?? [];
  }

  async getTargets(timeoutMs: number): Promise<TargetInfo[]> {
    const r = await this.send<{ targetInfos?: TargetInfo[] }>('Target.getTargets', {}, timeoutMs);
    for (const t of r.targetInfos ?? []) this.noteTarget(t);
    return r.targetInfos ?? [];
  }

  async uninstall(id: string, timeoutMs: number): Promise<void> {
    await this.send('Extensions.uninstall', { id }, timeoutMs);
  }

  async closeTarget(targetId: string, timeoutMs: number): Promise<void> {
    await this.send('Target.closeTarget', { targetId }, timeoutMs);
  }

  /**
   * What Chromium's extensions page knows about every extension, policy installs included (which
   * Extensions.getExtensions does not list): id → version and state. Opens chrome://extensions in
   * a background tab and reads chrome.developerPrivate.getExtensionsInfo() there; close() ends it.
   */
  async openExtensionsPage(timeoutMs: number): Promise<ExtensionsPage> {
    const { targetId } = await this.send<{ targetId: string }>('Target.createTarget', { url: 'chrome://extensions', background: true }, timeoutMs);
    const close = (): Promise<void> => this.closeTarget(targetId, 5000).catch(() => undefined);
    try {
      const { sessionId } = await this.send<{ sessionId: string }>('Target.attachToTarget', { targetId, flatten: true }, timeoutMs);
      const evaluate = async <T>(expression: string, ms: number): Promise<T> => {
        const r = await this.send<{ result?: { value?: T }; exceptionDetails?: { text?: string } }>(
          'Runtime.evaluate',
          { expression, awaitPromise: true, returnByValue: true },
          ms,
          sessionId,
        );
        if (r.exceptionDetails) throw new CdpError('Runtime.evaluate', r.exceptionDetails.text ?? 'exception');
        return r.result?.value as T;
      };
      const deadline = Date.now() + timeoutMs;
      while (!(await evaluate<boolean>("typeof chrome === 'object' && typeof chrome.developerPrivate === 'object'", timeoutMs))) {
        if (Date.now() > deadline) throw new CdpError('chrome://extensions', 'the page did not load in time');
        await new Promise((r) => setTimeout(r, 50));
      }
      return {
        info: async (ms) => {
          const list = await evaluate<{ id: string; version: string; state: string }[]>(
            'chrome.developerPrivate.getExtensionsInfo({ includeDisabled: true, includeTerminated: true }).then((l) => l.map((e) => ({ id: e.id, version: e.version, state: e.state })))',
            ms,
          );
          return new Map(list.map((e) => [e.id, { version: e.version, state: e.state }]));
        },
        close,
      };
    } catch (err) {
      await close();
      throw err;
    }
  }
}

export interface ExtensionsPage {
  /** id → version and state (ENABLED, DISABLED, TERMINATED, BLOCKLISTED) of every installed extension. */
  info(timeoutMs: number): Promise<Map<string, { version: string; state: string }>>;
  close(): Promise<void>;
}
