// The one way a part of the daemon attaches to a target (a page, a worker): a flat session opened
// by that part's own browser-level client (Browser.onLaunch, Browser.withCdp), so that the domains
// it enables there, its bindings and its isolated worlds are its alone, as a CDP client's are
// behind the multiplexer. The session's commands carry its id; its events are those of that session
// only; it ends when the part detaches it, when the target goes, or with the client.
import type { Protocol } from 'devtools-protocol';
import type { Deadline } from '../core/deadline.js';
import { DEFAULT_CALL_TIMEOUT_MS, type CdpClient, type CommandName, type EventName, type EventParams, type Params, type Result } from './client.js';

/** The deadline of a command (else `timeoutMs`, else the client's default). */
export interface CallOptions {
  deadline?: Deadline;
  timeoutMs?: number;
}

/** Commands sent after the session ended (detach, closing the target) wait at most this long. */
const END_TIMEOUT_MS = 5000;

export class PageSession {
  private ended = false;
  /** The listeners of this session's events (a warm tab serves many requests: each removes its own). */
  private readonly offs = new Set<() => void>();
  private readonly endListeners: (() => void)[] = [];

  constructor(
    readonly cdp: CdpClient,
    readonly targetId: string,
    readonly sessionId: string,
  ) {
    this.offs.add(
      cdp.on('Target.detachedFromTarget', (p, parent) => {
        if (parent === undefined && p.sessionId === sessionId) this.end();
      }),
    );
  }

  /** The session ended (detached by the part, the target gone, the client closed). */
  get isDetached(): boolean {
    return this.ended || this.cdp.isClosed;
  }

  send<M extends CommandName>(method: M, params: Params<M>, opts: CallOptions = {}): Promise<Result<M>> {
    return this.cdp.send(method, params, { ...opts, sessionId: this.sessionId });
  }

  /** Every `event` of this session; returns the unsubscribe function (all are dropped when the session ends). */
  on<E extends EventName>(event: E, listener: (params: EventParams<E>) => void): () => void {
    const remove = this.cdp.on(event, (p, s) => {
      if (s === this.sessionId) listener(p);
    });
    const off = (): void => {
      remove();
      this.offs.delete(off);
    };
    this.offs.add(off);
    return off;
  }

  /** Called once when the session is detached or its target goes (at once when it has already; not when the client closes: its owner knows). */
  onDetached(listener: () => void): void {
    if (this.isDetached) listener();
    else this.endListeners.push(listener);
  }

  /** Detaches the session (not awaited: a target that hangs may never answer). Idempotent. */
  detach(): void {
    if (this.isDetached) return;
    this.cdp.send('Target.detachFromTarget', { sessionId: this.sessionId }, { timeoutMs: END_TIMEOUT_MS }).catch(() => undefined);
    this.end();
  }

  /** Closes the target itself (a tab the part opened); the session ends with it. Resolves once Chromium answered, never rejects. */
  async close(): Promise<void> {
    this.end();
    if (this.cdp.isClosed) return;
    await this.cdp.send('Target.closeTarget', { targetId: this.targetId }, { timeoutMs: END_TIMEOUT_MS }).catch(() => undefined);
  }

  private end(): void {
    if (this.ended) return;
    this.ended = true;
    for (const off of [...this.offs]) off();
    this.offs.clear();
    for (const l of this.endListeners.splice(0)) l();
  }
}

/**
 * A command that makes something in Chromium (a tab, a session) under the caller's deadline. The
 * command is not withdrawn when the deadline ends first: Chromium may still make the thing, and its
 * answer then goes to `undo` (close the tab, detach the session), so nothing is left that nobody
 * knows of. Without a deadline it is a plain command.
 */
async function sendOrUndo<M extends CommandName>(cdp: CdpClient, method: M, params: Params<M>, opts: CallOptions, undo: (late: Result<M>) => void): Promise<Result<M>> {
  const { deadline } = opts;
  if (deadline === undefined) return cdp.send(method, params, opts);
  // The answer is awaited past the deadline (by the client's default), so that a late one can still be undone.
  const sent = cdp.send(method, params, { timeoutMs: (Number.isFinite(deadline.at) ? deadline.left() : 0) + DEFAULT_CALL_TIMEOUT_MS });
  try {
    return await deadline.race(sent);
  } catch (err) {
    sent.then(undo, () => undefined);
    throw err;
  }
}

/** A flat session on `targetId` over the part's browser-level client `cdp` (a session attached after the deadline ended is detached). */
export async function attachPage(cdp: CdpClient, targetId: string, opts: CallOptions = {}): Promise<PageSession> {
  const detach = ({ sessionId }: { sessionId: string }): void => void cdp.send('Target.detachFromTarget', { sessionId }, { timeoutMs: END_TIMEOUT_MS }).catch(() => undefined);
  const { sessionId } = await sendOrUndo(cdp, 'Target.attachToTarget', { targetId, flatten: true }, opts, detach);
  return new PageSession(cdp, targetId, sessionId);
}

/**
 * A new tab (Target.createTarget with `params`) and a session on it. No tab is left behind: one whose
 * attach fails is closed, and so is one Chromium makes after the caller's deadline ended (the command
 * was sent; its answer, when it comes, names a tab nobody else knows of).
 */
export async function openPage(cdp: CdpClient, params: Protocol.Target.CreateTargetRequest, opts: CallOptions = {}): Promise<PageSession> {
  const { targetId } = await sendOrUndo(cdp, 'Target.createTarget', params, opts, (late) => closeTarget(cdp, late.targetId));
  try {
    return await attachPage(cdp, targetId, opts);
  } catch (err) {
    closeTarget(cdp, targetId);
    throw err;
  }
}

function closeTarget(cdp: CdpClient, targetId: string): void {
  void cdp.send('Target.closeTarget', { targetId }, { timeoutMs: END_TIMEOUT_MS }).catch(() => undefined);
}
