// What the forwarding proxy makes visible: per-upstream connection and byte counters in /metrics,
// a log line per failed upstream connection (rate-limited), and the last error of the active
// upstream (`status()`, for GET and PATCH /browsers/{id}).
//
// Metric labels are bounded: `upstream` is `direct` or a proxy id, and once MAX_UPSTREAM_LABELS ids
// have a label of their own, further ids share `other`. Log lines of each event (upstream failures,
// refusals): at most LOG_BURST per LOG_WINDOW_MS; the next line written says how many were left out
// (`suppressed`), so a burst of one kind never hides the other.
import type { Duplex } from 'node:stream';
import type { Counter } from 'prom-client';
import type { Logger } from '../../core/log.js';
import type { Metrics } from '../../core/metrics.js';
import type { CheckCause } from '../upstream/dial.js';

const MAX_UPSTREAM_LABELS = 16;
const LOG_BURST = 20;
const LOG_WINDOW_MS = 1000;

export interface LastError {
  code: CheckCause;
  message: string;
  /** ISO time of the failure. */
  at: string;
}

export interface ForwarderStatus {
  /** The active proxy. */
  id: string;
  /** The last failure of a connection to it (of the proxy itself, not of a target behind it) since it became active; null when none. */
  last_error: LastError | null;
}

type Child = ReturnType<Counter<string>['labels']>;

export class ForwarderStats {
  private readonly labelled = new Set<string>();
  private lastError: LastError | null = null;
  private readonly windows = new Map<string, { start: number; count: number; suppressed: number }>();

  constructor(
    private readonly metrics: Metrics,
    private readonly log: Logger,
  ) {}

  /** The metric label of an upstream: `direct`, the proxy id, or `other`. */
  label(proxyId: string | null): string {
    if (proxyId === null) return 'direct';
    if (this.labelled.has(proxyId)) return proxyId;
    if (this.labelled.size >= MAX_UPSTREAM_LABELS) return 'other';
    this.labelled.add(proxyId);
    return proxyId;
  }

  /** A new proxy became active: its errors start afresh. */
  reset(): void {
    this.lastError = null;
  }

  lastErrorOfActive(): LastError | null {
    return this.lastError;
  }

  connected(label: string): void {
    this.metrics.forwarderConnections.inc({ upstream: label, outcome: 'ok' });
  }

  /** A connection to `target` through the upstream (or direct) failed. */
  failed(label: string, proxyId: string | null, target: string, err: { code: CheckCause; message: string; atProxy: boolean }): void {
    this.metrics.forwarderConnections.inc({ upstream: label, outcome: err.code });
    // The upstream's own failure (auth, TLS, refused, timeout): the API shows it. A target the upstream could not reach is the site's.
    if (proxyId !== null && err.atProxy) this.lastError = { code: err.code, message: err.message, at: new Date().toISOString() };
    this.warn({ event: 'forwarder_upstream_failed', proxy_id: proxyId ?? 'direct', cause: err.code, target }, `forwarding proxy: ${err.message}`);
  }

  /** A connection or request the forwarder does not carry. */
  refused(reason: 'peer_uid' | 'own_port' | 'bad_request' | 'network_policy', fields: Record<string, unknown>, msg: string): void {
    this.metrics.forwarderRefused.inc({ reason });
    this.warn({ event: 'forwarder_refused', reason, ...fields }, msg);
  }

  /** A warning line, at most LOG_BURST per LOG_WINDOW_MS of its event. */
  private warn(fields: Record<string, unknown> & { event: string }, msg: string): void {
    const now = Date.now();
    let w = this.windows.get(fields.event);
    if (w === undefined || now - w.start > LOG_WINDOW_MS) {
      w = { start: now, count: 0, suppressed: w?.suppressed ?? 0 };
      this.windows.set(fields.event, w);
    }
    if (++w.count > LOG_BURST) {
      w.suppressed++;
      return;
    }
    const suppressed = w.suppressed;
    w.suppressed = 0;
    this.log.warn({ ...fields, ...(suppressed > 0 ? { suppressed } : {}) }, msg);
  }

  clients(delta: number): void {
    this.metrics.forwarderClients.inc(delta);
  }

  /** Counts the bytes `stream` emits under `label` (sent: from the browser, received: from the upstream or target). Attach right after piping it. */
  /** Counts bytes handed over by hand (the exchanges' relay): one counter per direction of `label`. */
  byteCounter(label: string): (direction: 'sent' | 'received', n: number) => void {
    const sent = this.metrics.forwarderBytes.labels({ upstream: label, direction: 'sent' });
    const received = this.metrics.forwarderBytes.labels({ upstream: label, direction: 'received' });
    return (direction, n) => (direction === 'sent' ? sent : received).inc(n);
  }

  countBytes(label: string, direction: 'sent' | 'received', stream: Duplex | NodeJS.ReadableStream): void {
    const child: Child = this.metrics.forwarderBytes.labels({ upstream: label, direction });
    stream.on('data', (c: Buffer) => child.inc(c.length));
  }
}
