// The telemetry module: the bus (ring, seqs, category switches), its routes, the DevTools monitor
// of each Chromium run, and the daemon's own events, in the SDK's shapes where the SDK has one:
// `api_call` per request, `cdp_connect` / `cdp_disconnect`, `service_crashed`; and browserd's own
// `chromium_started`, `chromium_exited`, `download_started` / `download_finished`, `process_exited`,
// `extension_installed`, `proxy_switched` (category system or control; see docs/telemetry.md).
import type { Browser, BrowserSnapshot, BrowserState } from '../chromium/types.js';
import type { Module, ModuleContext } from '../module.js';
import { operationIdOf } from '../http/openapi.js';
import type { Route } from '../http/router.js';
import { TelemetryBus } from './bus.js';
import type { EventCategory, EventSource } from './event.js';
import { CdpMonitor } from './monitor.js';
import { redactUrl } from './redact.js';
import { telemetryRoutes } from './routes.js';
import { activeTelemetry, telemetryUpdatePart } from './update.js';

export type { TelemetryBus } from './bus.js';

/** A request the HTTP server finished (HttpServer's onRequestDone). */
export interface RequestDone {
  method: string;
  /** The matched route's path pattern, or `unmatched`. */
  route: string;
  status: number;
  ms: number;
  reqId: string;
  keyId: string | undefined;
}


/** What the other modules tell the telemetry (given to them as a dependency). */
export interface TelemetrySink {
  /** A daemon event of browserd's own type (process exits, extension installs, proxy switches). */
  emit(type: string, category: EventCategory, source: EventSource, data: Record<string, unknown>): void;
  download(event: 'download_started' | 'download_finished', d: { id: string; url: string; state: string; suggested_filename: string; received_bytes: number; total_bytes: number }): void;
}

export interface Telemetry extends Module, TelemetrySink {
  readonly routes: Route[];
  readonly bus: TelemetryBus;
  /** Every request the HTTP server finished (its onRequestDone). */
  requestDone(r: RequestDone): void;
}

/** Follows the browser from its making: the monitor on every run, its launches, exits and crashes, and its CDP clients. */
export function createTelemetry(ctx: ModuleContext, deps: { browser: Browser }): Telemetry {
  const { config } = ctx;
  const log = ctx.log.child({ module: 'telemetry' });
  const bus = new TelemetryBus({ maxEvents: config.telemetry.ringEvents, maxBytes: config.telemetry.ringBytes, maxEventBytes: config.telemetry.eventMaxBytes });
  const monitor = new CdpMonitor(bus, log);
  const api: EventSource = { kind: 'kernel_api' };
  const chromium: EventSource = { kind: 'local_process', event: 'chromium' };
  let lastState: BrowserState | null = null;
  let lastPid: number | null = null;

  // The supervisor records an exit (last_exit) before or during the state change that follows it:
  // each new last_exit is told once, before the next start.
  let lastExitAt: string | null = null;
  const onState = (state: BrowserState, snap: BrowserSnapshot): void => {
    const prev = lastState;
    lastState = state;
    if (state === prev) return;
    if (prev === 'ready') monitor.runEnded();
    const exit = snap.chromium.last_exit;
    if (exit !== null && exit.at !== lastExitAt) {
      lastExitAt = exit.at;
      bus.emit('chromium_exited', 'system', chromium, { pid: lastPid, code: exit.code, signal: exit.signal, reason: exit.reason });
      if (exit.reason === 'crash' || exit.reason === 'launch failed') {
        const data: Record<string, unknown> = { phase: exit.reason === 'crash' ? 'running' : 'startup', service_name: 'chromium' };
        if (lastPid !== null) data.pid = lastPid;
        bus.emit('service_crashed', 'system', chromium, data);
      }
    }
    if (state === 'failed') bus.emit('service_crashed', 'system', chromium, { phase: 'gave_up', service_name: 'chromium' });
    if (state === 'ready') {
      lastPid = snap.chromium.pid;
      bus.emit('chromium_started', 'system', chromium, { pid: snap.chromium.pid, version: snap.chromium.version, restarts: snap.chromium.restarts });
    }
  };

  deps.browser.use({
    name: 'telemetry',
    onLaunch: (cdp) => monitor.attach(cdp),
    onState,
    // The SDK's telemetry field: PATCH /browsers/{id} sets the switches, the record shows them.
    update: telemetryUpdatePart(bus),
    snapshot: () => ({ telemetry: activeTelemetry(bus) }),
    cdpClients: {
      connected(c) {
        const metadata: Record<string, string> = { remote_address: c.remote, chromium_pid: String(c.pid) };
        if (c.target !== undefined) metadata.target_id = c.target;
        bus.emit('cdp_connect', 'connection', { ...api, event: 'cdp_websocket', metadata });
      },
      closed(c) {
        bus.emit('cdp_disconnect', 'connection', { ...api, event: 'cdp_websocket', metadata: { remote_address: c.remote, close_code: String(c.code) } }, { reason: c.reason, duration_ms: Math.round(c.ms), message_count: c.messages });
      },
    },
  });

  const operationIds = new OperationIds();
  return {
    name: 'telemetry',
    bus,
    routes: telemetryRoutes({ bus, maxStreams: config.telemetry.maxStreams, stallMs: config.http.sseStallMs, onDrop: () => ctx.metrics.sseDropped.inc({ stream: 'telemetry' }) }),
    requestDone(r) {
      if (!bus.enabled('control')) return;
      const source: EventSource = { kind: 'kernel_api', event: `${r.method} ${r.route}` };
      if (r.keyId !== undefined) source.metadata = { key_id: r.keyId };
      bus.emit('api_call', 'control', source, { operation_id: r.route === 'unmatched' ? 'unmatched' : operationIds.of(r.method, r.route), status: r.status, duration_ms: Math.round(r.ms * 10) / 10, request_id: r.reqId });
    },
    download(event, d) {
      const cut = { truncated: false };
      bus.emit(event, 'system', { kind: 'cdp', event: event === 'download_started' ? 'Browser.downloadWillBegin' : 'Browser.downloadProgress' }, {
        download_id: d.id,
        url: redactUrl(d.url, cut),
        state: d.state,
        suggested_filename: d.suggested_filename,
        received_bytes: d.received_bytes,
        total_bytes: d.total_bytes,
      }, { truncated: cut.truncated });
    },
    emit: (type, category, source, data) => void bus.emit(type, category, source, data),
  };
}

/**
 * Each matched route's operationId, built once (by regular expressions) and then looked up: every
 * request's api_call event names it. Bounded by the routes and the methods Node's parser accepts.
 */
class OperationIds {
  private readonly ids = new Map<string, string>();

  of(method: string, route: string): string {
    const key = `${method} ${route}`;
    let id = this.ids.get(key);
    if (id === undefined) {
      id = operationIdOf(method, route);
      this.ids.set(key, id);
    }
    return id;
  }
}
