// A small CDP client on the browser-level WebSocket (Extensions.* exists only there), with the
// few calls the activation needs. One short-lived connection per activation.
import WebSocket from 'ws';

export class CdpError extends Error {
  constructor(
    readonly method: string,
    message: string,
  ) {
    super(`${method}: ${message}`);
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
    if (msg.error) p.reject(new CdpError(p.method, msg.error.message ?? 'error'));
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
   * Whether chrome-extension://<id>/manifest.json opens in a fresh page: it does for an installed
   * extension, and fails with net::ERR_BLOCKED_BY_CLIENT otherwise (measured on Chromium 156).
   * The one check that also works for policy installs, which Extensions.getExtensions does not list.
   */
  async probeInstalled(id: string, timeoutMs: number): Promise<boolean> {
    const { targetId } = await this.send<{ targetId: string }>('Target.createTarget', { url: 'about:blank', background: true }, timeoutMs);
    try {
      const { sessionId } = await this.send<{ sessionId: string }>('Target.attachToTarget', { targetId, flatten: true }, timeoutMs);
      const nav = await this.send<{ errorText?: string }>('Page.navigate', { url: `chrome-extension://${id}/manifest.json` }, timeoutMs, sessionId);
      return nav.errorText === undefined;
    } finally {
      await this.closeTarget(targetId, timeoutMs).catch(() => undefined);
    }
  }
}
