// The DevTools monitor: on a browser-level session of its own in each Chromium run (opened for it
// at every launch, so it is set up again after every restart; no other part of the daemon uses it),
// it follows targets
// (Target.setDiscoverTargets: crashes; Target.setAutoAttach, flat, on the browser and on each page:
// pages, frames, workers: one session of the monitor per target) and turns what it sees into the SDK's event types: console_log /
// console_error (Runtime), network_request / network_response / network_loading_failed (Network;
// headers redacted, never bodies), page_navigation / page_dom_content_loaded / page_load (Page),
// page_tab_opened and browserd's page_tab_closed (targets), and browserd's page_crashed
// (Target.targetCrashed). Only the domains of the categories switched on are enabled, and with no
// CDP category on nothing is attached at all. The sessions the daemon's other parts open on the same
// pages (the computer controls, /curl) are on their own browser-level sessions: Chromium reports
// none of them here, and what the monitor enables or disables on its sessions touches none of theirs.
import type { Protocol } from 'devtools-protocol';
import type { CdpClient, EventParams } from '../cdp/client.js';
import type { Logger } from '../core/log.js';
import type { CategorySwitches, TelemetryBus } from './bus.js';
import type { EventCategory } from './event.js';
import { cutString, MAX_ARGS, redactHeaders, redactText, redactUrl, type Cut } from './redact.js';

type TargetType = 'page' | 'background_page' | 'service_worker' | 'shared_worker' | 'other';

interface Session {
  sessionId: string;
  targetId: string;
  targetType: TargetType;
  /** A page, frame or worker (the SDK's target_type says `other` for the last two). */
  rawType: string;
  url: string;
  frameId?: string;
  loaderId?: string;
  navSeq: number;
  /** Runtime on this session: never enabled, enabled, or disabled after it was (the console category switched off). */
  runtime: 'never' | 'on' | 'off';
  /** A Runtime.enable after a disable is in flight: the console calls and exceptions it replays are dropped. */
  replaying: boolean;
}

interface Pending {
  method?: string;
  url: string;
  response?: Protocol.Network.Response;
  resourceType?: string;
}

/** Requests followed at once per session (method and response kept until loadingFinished). */
const MAX_PENDING = 2048;
/** Stack frames kept per trace. */
const MAX_FRAMES = 16;
const ATTACH_TYPES = new Set(['page', 'iframe', 'worker', 'shared_worker', 'service_worker', 'background_page']);

function targetTypeOf(t: string): TargetType {
  return t === 'page' || t === 'background_page' || t === 'service_worker' || t === 'shared_worker' ? t : 'other';
}

export class CdpMonitor {
  private cdp: CdpClient | null = null;
  private offs: (() => void)[] = [];
  private readonly sessions = new Map<string, Session>();
  /** The domains of sessions just attached, being enabled (apply waits for them: see TelemetryBus.setCategories). */
  private readonly enabling = new Set<Promise<unknown>>();
  private readonly pending = new Map<string, Map<string, Pending>>();
  private attached = false;
  private launches = 0;

  constructor(
    private readonly bus: TelemetryBus,
    private readonly log: Logger,
  ) {
    bus.onSwitch((s) => this.apply(s)); // each command is bounded (timeoutMs): the PATCH answers once they are
  }

  private get cdpOn(): boolean {
    return this.bus.enabled('monitor');
  }

  /** A new Chromium run: its daemon session. Never throws (a failure is an event, not a failed launch). */
  async attach(cdp: CdpClient): Promise<void> {
    this.detach();
    this.cdp = cdp;
    this.launches++;
    const on = <E extends Parameters<CdpClient['on']>[0]>(event: E, fn: (p: EventParams<E>, s: string | undefined) => void): void => {
      this.offs.push(cdp.on(event, fn));
    };
    on('Target.attachedToTarget', (p, s) => this.onAttached(p, s));
    on('Target.detachedFromTarget', (p) => this.onDetached(p));
    on('Target.targetCrashed', (p) => this.onCrashed(p));
    // A page's events only from the sessions the monitor follows (not one it let go of meanwhile).
    const ours = <E extends Parameters<CdpClient['on']>[0]>(event: E, fn: (p: EventParams<E>, s: string | undefined) => void): void =>
      on(event, (p, s) => {
        if (s !== undefined && this.sessions.has(s)) fn(p, s);
      });
    // Not what a Runtime.enable after a disable sends again (see enableRuntime).
    const live = <E extends 'Runtime.consoleAPICalled' | 'Runtime.exceptionThrown'>(event: E, fn: (p: EventParams<E>, s: string) => void): void =>
      ours(event, (p, s) => {
        if (this.sessions.get(s as string)?.replaying !== true) fn(p, s as string);
      });
    live('Runtime.consoleAPICalled', (p, s) => this.onConsole(p, s));
    live('Runtime.exceptionThrown', (p, s) => this.onException(p, s));
    ours('Network.requestWillBeSent', (p, s) => this.onRequest(p, s));
    ours('Network.responseReceived', (p, s) => this.onResponse(p, s));
    ours('Network.loadingFinished', (p, s) => this.onFinished(p, s));
    ours('Network.loadingFailed', (p, s) => this.onFailed(p, s));
    ours('Page.frameNavigated', (p, s) => this.onNavigated(p, s));
    ours('Page.domContentEventFired', (p, s) => this.onPageEvent('page_dom_content_loaded', 'Page.domContentEventFired', p.timestamp, s));
    ours('Page.loadEventFired', (p, s) => this.onPageEvent('page_load', 'Page.loadEventFired', p.timestamp, s));
    try {
      // Crashes of renderers are seen through target discovery (cheap: target info changes only).
      await cdp.send('Target.setDiscoverTargets', { discover: true });
      if (this.launches > 1 && this.cdpOn) this.bus.emit('monitor_reconnected', 'monitor', { kind: 'cdp' }, {});
      await this.apply(this.bus.categories());
    } catch (err) {
      this.log.warn({ event: 'telemetry_monitor_failed', err: (err as Error).message }, 'the telemetry monitor could not follow this Chromium');
      this.bus.emit('monitor_init_failed', 'monitor', { kind: 'cdp' }, { step: 'attach' });
    }
  }

  /** The run ended (Chromium exited or restarts). */
  runEnded(): void {
    if (this.cdp !== null && this.cdpOn) this.bus.emit('monitor_disconnected', 'monitor', { kind: 'cdp' }, { reason: 'chrome_restarted' });
    this.detach();
  }

  private detach(): void {
    for (const off of this.offs.splice(0)) off();
    this.sessions.clear();
    this.pending.clear();
    this.attached = false;
    this.cdp = null;
  }

  /** Follows the switches: auto-attach with any CDP category on, and each session's domains. */
  private async apply(s: CategorySwitches): Promise<void> {
    const cdp = this.cdp;
    if (cdp === null || cdp.isClosed) return;
    const want = s.console || s.network || s.page || s.interaction;
    try {
      if (want !== this.attached) {
        this.attached = want;
        await cdp.send('Target.setAutoAttach', { autoAttach: want, waitForDebuggerOnStart: false, flatten: true });
      }
      // The sessions auto-attach just reported are being set up by onAttached: waited for too.
      await Promise.all([...[...this.sessions.values()].map((sess) => this.enableDomains(sess, s)), ...this.enabling]);
    } catch (err) {
      if (!cdp.isClosed) this.log.debug({ event: 'telemetry_monitor_apply_failed', err: (err as Error).message }, 'telemetry switches not applied to every target');
    }
  }

  private async enableDomains(sess: Session, s: CategorySwitches): Promise<void> {
    const cdp = this.cdp;
    if (cdp === null) return;
    const opts = { sessionId: sess.sessionId, timeoutMs: 10_000 };
    const isPage = sess.rawType === 'page' || sess.rawType === 'iframe';
    const calls: Promise<unknown>[] = [s.console ? this.enableRuntime(cdp, sess, opts) : cdp.send('Runtime.disable', {}, opts)];
    if (!s.console && sess.runtime === 'on') sess.runtime = 'off';
    // No bodies are read: Chromium need not keep any for this session, nor post data.
    calls.push(s.network ? cdp.send('Network.enable', { maxTotalBufferSize: 0, maxResourceBufferSize: 0, maxPostDataSize: 0 }, opts) : cdp.send('Network.disable', {}, opts));
    if (isPage) calls.push(cdp.send(s.page ? 'Page.enable' : 'Page.disable', {}, opts));
    await Promise.allSettled(calls);
  }

  /**
   * Runtime.enable on a session. Chromium answers it after it has sent again every console message
   * and exception the page still keeps: at the first enable those are the page's calls before the
   * monitor followed it (reported), after a disable they were reported before or made while the
   * console category was off (dropped until the answer comes).
   */
  private enableRuntime(cdp: CdpClient, sess: Session, opts: { sessionId: string; timeoutMs: number }): Promise<unknown> {
    const again = sess.runtime === 'off';
    sess.runtime = 'on';
    if (!again) return cdp.send('Runtime.enable', {}, opts);
    sess.replaying = true;
    return cdp.send('Runtime.enable', {}, opts).finally(() => {
      sess.replaying = false;
    });
  }

  private onAttached(p: Protocol.Target.AttachedToTargetEvent, parent: string | undefined): void {
    const cdp = this.cdp;
    if (cdp === null) return;
    const info = p.targetInfo;
    if (!ATTACH_TYPES.has(info.type)) return;
    const sess: Session = { sessionId: p.sessionId, targetId: info.targetId, targetType: targetTypeOf(info.type), rawType: info.type, url: info.url, navSeq: 0, runtime: 'never', replaying: false };
    this.sessions.set(p.sessionId, sess);
    if (info.type === 'page' && parent === undefined) {
      const cut: Cut = { truncated: false };
      const data: Record<string, unknown> = { target_id: info.targetId, target_type: 'page', url: redactUrl(info.url, cut), title: redactText(info.title, cut, 512) };
      if (info.openerId !== undefined) data.opener_id = info.openerId;
      this.emit('page_tab_opened', 'page', 'Target.attachedToTarget', data, cut);
    }
    // Frames (out-of-process iframes) and dedicated workers of this target, flat, on this session.
    const s = this.bus.categories();
    const opts = { sessionId: p.sessionId, timeoutMs: 10_000 };
    const enabling = Promise.allSettled([this.enableDomains(sess, s), info.type === 'page' || info.type === 'iframe' ? cdp.send('Target.setAutoAttach', { autoAttach: true, waitForDebuggerOnStart: false, flatten: true }, opts) : null]);
    this.enabling.add(enabling);
    void enabling.finally(() => this.enabling.delete(enabling));
  }

  private onDetached(p: Protocol.Target.DetachedFromTargetEvent): void {
    const sess = this.sessions.get(p.sessionId);
    this.sessions.delete(p.sessionId);
    this.pending.delete(p.sessionId);
    if (sess?.rawType === 'page') this.emit('page_tab_closed', 'page', 'Target.detachedFromTarget', { target_id: sess.targetId, target_type: 'page', session_id: sess.sessionId }, { truncated: false });
  }

  private onCrashed(p: Protocol.Target.TargetCrashedEvent): void {
    const sess = [...this.sessions.values()].find((s) => s.targetId === p.targetId);
    const cut: Cut = { truncated: false };
    const data: Record<string, unknown> = { target_id: p.targetId, status: p.status, error_code: p.errorCode };
    if (sess !== undefined) Object.assign(data, { target_type: sess.targetType, url: redactUrl(sess.url, cut) });
    this.emit('page_crashed', 'system', 'Target.targetCrashed', data, cut);
  }

  private context(sessionId: string | undefined, cut: Cut): Record<string, unknown> {
    const sess = sessionId === undefined ? undefined : this.sessions.get(sessionId);
    if (sess === undefined) return {};
    const ctx: Record<string, unknown> = { session_id: sess.sessionId, target_id: sess.targetId, target_type: sess.targetType, nav_seq: sess.navSeq };
    if (sess.frameId !== undefined) ctx.frame_id = sess.frameId;
    if (sess.loaderId !== undefined) ctx.loader_id = sess.loaderId;
    if (sess.url !== '') ctx.url = redactUrl(sess.url, cut);
    return ctx;
  }

  private emit(type: string, category: EventCategory, cdpEvent: string, data: Record<string, unknown>, cut: Cut): void {
    this.bus.emit(type, category, { kind: 'cdp', event: cdpEvent }, data, { truncated: cut.truncated });
  }

  private onConsole(p: Protocol.Runtime.ConsoleAPICalledEvent, s: string | undefined): void {
    if (!this.bus.enabled('console')) return;
    const cut: Cut = { truncated: false };
    if (p.args.length > MAX_ARGS) cut.truncated = true;
    const args = p.args.slice(0, MAX_ARGS).map((a) => redactText(remoteText(a), cut));
    const data: Record<string, unknown> = { ...this.context(s, cut), level: p.type, args, text: args[0] ?? '' };
    const stack = stackOf(p.stackTrace, cut);
    if (stack !== undefined) data.stack_trace = stack;
    this.emit(p.type === 'error' ? 'console_error' : 'console_log', 'console', 'Runtime.consoleAPICalled', data, cut);
  }

  private onException(p: Protocol.Runtime.ExceptionThrownEvent, s: string | undefined): void {
    if (!this.bus.enabled('console')) return;
    const cut: Cut = { truncated: false };
    const d = p.exceptionDetails;
    const description = d.exception?.description?.split('\n')[0];
    const text = description !== undefined ? `${d.text} ${description}` : d.text;
    const data: Record<string, unknown> = { ...this.context(s, cut), text: redactText(text, cut), line: d.lineNumber, column: d.columnNumber };
    if (d.url !== undefined) data.source_url = redactUrl(d.url, cut);
    const stack = stackOf(d.stackTrace, cut);
    if (stack !== undefined) data.stack_trace = stack;
    this.emit('console_error', 'console', 'Runtime.exceptionThrown', data, cut);
  }

  private pendingOf(s: string | undefined): Map<string, Pending> {
    const key = s ?? '';
    let m = this.pending.get(key);
    if (m === undefined) this.pending.set(key, (m = new Map()));
    return m;
  }

  private onRequest(p: Protocol.Network.RequestWillBeSentEvent, s: string | undefined): void {
    if (!this.bus.enabled('network')) return;
    const cut: Cut = { truncated: false };
    const pending = this.pendingOf(s);
    const prev = pending.get(p.requestId);
    const data: Record<string, unknown> = {
      ...this.context(s, cut),
      url: redactUrl(p.request.url, cut),
      request_id: p.requestId,
      method: p.request.method,
      headers: redactHeaders(p.request.headers, cut),
      initiator_type: p.initiator.type,
      is_redirect: p.redirectResponse !== undefined,
    };
    if (p.frameId !== undefined) data.frame_id = p.frameId;
    if (p.loaderId !== '') data.loader_id = p.loaderId;
    if (p.type !== undefined) data.resource_type = p.type;
    if (p.documentURL !== undefined) data.document_url = redactUrl(p.documentURL, cut);
    if (p.redirectResponse !== undefined && prev !== undefined) data.redirect_url = redactUrl(prev.url, cut);
    this.emit('network_request', 'network', 'Network.requestWillBeSent', data, cut);
    if (pending.size >= MAX_PENDING) pending.delete(pending.keys().next().value as string);
    pending.set(p.requestId, { method: p.request.method, url: p.request.url, resourceType: p.type });
  }

  private onResponse(p: Protocol.Network.ResponseReceivedEvent, s: string | undefined): void {
    const pending = this.pendingOf(s);
    const entry = pending.get(p.requestId);
    if (entry !== undefined) entry.response = p.response;
    else if (pending.size < MAX_PENDING) pending.set(p.requestId, { url: p.response.url, response: p.response, resourceType: p.type });
  }

  private onFinished(p: Protocol.Network.LoadingFinishedEvent, s: string | undefined): void {
    const pending = this.pendingOf(s);
    const entry = pending.get(p.requestId);
    pending.delete(p.requestId);
    if (entry?.response === undefined || !this.bus.enabled('network')) return;
    const r = entry.response;
    const cut: Cut = { truncated: false };
    const data: Record<string, unknown> = {
      ...this.context(s, cut),
      url: redactUrl(r.url, cut),
      request_id: p.requestId,
      status: r.status,
      status_text: cutString(r.statusText, cut, 256),
      mime_type: r.mimeType,
      headers: redactHeaders(r.headers, cut),
    };
    if (entry.method !== undefined) data.method = entry.method;
    if (entry.resourceType !== undefined) data.resource_type = entry.resourceType;
    this.emit('network_response', 'network', 'Network.loadingFinished', data, cut);
  }

  private onFailed(p: Protocol.Network.LoadingFailedEvent, s: string | undefined): void {
    const pending = this.pendingOf(s);
    const entry = pending.get(p.requestId);
    pending.delete(p.requestId);
    if (!this.bus.enabled('network')) return;
    const cut: Cut = { truncated: false };
    const data: Record<string, unknown> = { ...this.context(s, cut), request_id: p.requestId, error_text: redactText(p.errorText, cut, 512), resource_type: p.type };
    if (entry !== undefined) data.url = redactUrl(entry.url, cut);
    if (p.canceled !== undefined) data.canceled = p.canceled;
    this.emit('network_loading_failed', 'network', 'Network.loadingFailed', data, cut);
  }

  private onNavigated(p: Protocol.Page.FrameNavigatedEvent, s: string | undefined): void {
    const sess = s === undefined ? undefined : this.sessions.get(s);
    const f = p.frame;
    if (sess !== undefined && f.parentId === undefined) {
      sess.navSeq++;
      sess.url = f.url;
      sess.frameId = f.id;
      sess.loaderId = f.loaderId;
    }
    if (!this.bus.enabled('page')) return;
    const cut: Cut = { truncated: false };
    const data: Record<string, unknown> = { frame_id: f.id, loader_id: f.loaderId, url: redactUrl(f.url, cut) };
    if (f.parentId !== undefined) data.parent_frame_id = f.parentId;
    if (sess !== undefined) Object.assign(data, { session_id: sess.sessionId, target_id: sess.targetId, target_type: sess.targetType });
    this.emit('page_navigation', 'page', 'Page.frameNavigated', data, cut);
  }

  private onPageEvent(type: string, cdpEvent: string, timestamp: number, s: string | undefined): void {
    if (!this.bus.enabled('page')) return;
    const cut: Cut = { truncated: false };
    this.emit(type, 'page', cdpEvent, { ...this.context(s, cut), cdp_timestamp: timestamp }, cut);
  }
}

/** A console argument as text: its value, else its description (objects, errors), else its type. */
function remoteText(a: Protocol.Runtime.RemoteObject): string {
  if (a.type === 'string') return String(a.value);
  if (a.unserializableValue !== undefined) return a.unserializableValue;
  if (a.value !== undefined) return typeof a.value === 'string' ? a.value : JSON.stringify(a.value);
  return a.description ?? a.type;
}

function stackOf(st: Protocol.Runtime.StackTrace | undefined, cut: Cut): Record<string, unknown> | undefined {
  if (st === undefined) return undefined;
  if (st.callFrames.length > MAX_FRAMES) cut.truncated = true;
  const out: Record<string, unknown> = {
    callFrames: st.callFrames.slice(0, MAX_FRAMES).map((f) => ({ functionName: cutString(f.functionName, cut, 256), scriptId: f.scriptId, url: redactUrl(f.url, cut), lineNumber: f.lineNumber, columnNumber: f.columnNumber })),
  };
  if (st.description !== undefined) out.description = cutString(st.description, cut, 256);
  return out;
}
