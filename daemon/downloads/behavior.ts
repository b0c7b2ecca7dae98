// Who sets the download behaviour of the shared browser. Chromium keeps one behaviour per browser
// context, whichever session set it last, and drops it back to its own default (a Downloads folder
// under Chromium's TMPDIR, which nothing serves) when that session detaches. So one client's
// `Browser.setDownloadBehavior` would decide, and then lose, every later client's downloads.
//
// The daemon owns it instead. A client's command is rewritten before it reaches Chromium:
// - a download path that exists on this VM as a folder the browser may write to is honoured (a
//   client on the VM itself: the Playwright runner, an agent's process); any other path (a
//   client elsewhere names a folder of its own machine) becomes the daemon's downloads folder;
// - `default` means the daemon's behaviour, not Chromium's;
// - `deny` and the events flag are the client's to choose.
// Every client's setting is remembered per browser context, newest last; when a client's session
// is detached, the newest setting still held by a connected client is applied again, else the
// daemon's own (allow, into the downloads folder, with events for the daemon's session).
import type { Protocol } from 'devtools-protocol';

/** The default browser context (no browserContextId). */
const DEFAULT_CONTEXT = '';

export type BehaviorParams = Protocol.Browser.SetDownloadBehaviorRequest;

export interface BehaviorDeps {
  /** The daemon's downloads folder (its real path). */
  downloadsDir: string;
  /** Whether `dir` is a folder the browser may write into on this VM (synchronous: commands keep their order). */
  writableDir(dir: string): boolean;
}

interface Held {
  owner: object;
  params: BehaviorParams;
}

export class DownloadBehaviors {
  /** Per browser context: the settings connected clients made, oldest first. */
  private readonly held = new Map<string, Held[]>();

  constructor(private readonly deps: BehaviorDeps) {}

  /** The daemon's own behaviour for a context (its session gets the events: the downloads listing needs them). */
  daemonParams(browserContextId?: string): BehaviorParams {
    return { behavior: 'allow', downloadPath: this.deps.downloadsDir, eventsEnabled: true, ...(browserContextId === undefined ? {} : { browserContextId }) };
  }

  /**
   * A client's Browser.setDownloadBehavior or Page.setDownloadBehavior: the params to send. The
   * page form has no context of its own here: it is kept under the default context.
   */
  rewrite(owner: object, method: string, params: Record<string, unknown>): Record<string, unknown> | undefined {
    if (method !== 'Browser.setDownloadBehavior' && method !== 'Page.setDownloadBehavior') return undefined;
    const context = typeof params.browserContextId === 'string' ? params.browserContextId : DEFAULT_CONTEXT;
    const list = (this.held.get(context) ?? []).filter((h) => h.owner !== owner);
    const out: Record<string, unknown> = { ...params };
    if (params.behavior === 'default') {
      // Back to the daemon's behaviour (or the newest other client's), as if this client had left.
      if (list.length === 0) this.held.delete(context);
      else this.held.set(context, list);
      const now = this.effective(context);
      out.behavior = now.behavior;
      out.downloadPath = now.downloadPath;
      return out;
    }
    if (params.behavior === 'allow' || params.behavior === 'allowAndName') {
      const wanted = typeof params.downloadPath === 'string' ? params.downloadPath : '';
      out.downloadPath = wanted.startsWith('/') && this.deps.writableDir(wanted) ? wanted : this.deps.downloadsDir;
    }
    list.push({ owner, params: out as unknown as BehaviorParams });
    this.held.set(context, list);
    return out;
  }

  /**
   * The client is gone (its session detached, so Chromium dropped what it set): the params to
   * apply again on the daemon's session, one per context the client had set; empty when it set none.
   */
  released(owner: object): BehaviorParams[] {
    const again: BehaviorParams[] = [];
    for (const [context, list] of this.held) {
      if (!list.some((h) => h.owner === owner)) continue;
      const rest = list.filter((h) => h.owner !== owner);
      if (rest.length === 0) this.held.delete(context);
      else this.held.set(context, rest);
      again.push(this.effective(context));
    }
    return again;
  }

  /** A new Chromium: no client's setting survives it. */
  reset(): void {
    this.held.clear();
  }

  /** What a context's behaviour should be now, as the daemon's session sends it (events on). */
  private effective(context: string): BehaviorParams {
    const id = context === DEFAULT_CONTEXT ? undefined : context;
    const newest = this.held.get(context)?.at(-1);
    if (newest === undefined) return this.daemonParams(id);
    const { behavior, downloadPath } = newest.params;
    return { behavior: behavior === 'allow' || behavior === 'allowAndName' || behavior === 'deny' ? behavior : 'allow', ...(downloadPath === undefined ? {} : { downloadPath }), eventsEnabled: true, ...(id === undefined ? {} : { browserContextId: id }) };
  }
}
