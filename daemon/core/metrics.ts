// Every Prometheus metric of the daemon, in one registry (not prom-client's global one,
// so tests and several daemons in one process never collide). Modules receive `Metrics`
// and only increment or observe; nothing here knows about HTTP.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export interface Metrics {
  registry: Registry;
  httpDuration: Histogram<'method' | 'route' | 'status'>;
  chromiumRestarts: Counter<'reason'>;
  chromiumReady: Gauge;
  extensionActivations: Counter<'mode' | 'outcome'>;
  extensionActivationDuration: Histogram<'mode'>;
  stdinBytes: Counter;
  proxyChecks: Counter<'outcome'>;
  forwarderConnections: Counter<'upstream' | 'outcome'>;
  forwarderBytes: Counter<'upstream' | 'direction'>;
  forwarderRefused: Counter<'reason'>;
  forwarderClients: Gauge;
  processesLive: Gauge;
  idempotencyKeys: Gauge;
  idempotencyBytes: Gauge;
  idempotencyReplays: Counter;
  computerActions: Counter<'action' | 'outcome'>;
  computerPageLookups: Counter<'how'>;
  cdpMalformed: Counter<'reason'>;
  playwrightExecutions: Counter<'outcome'>;
  playwrightDuration: Histogram;
  playwrightRunners: Gauge;
  logStreams: Gauge<'source'>;
  fsBytes: Counter<'direction'>;
  fsWatches: Gauge;
  curlTabs: Gauge<'state'>;
  sseDropped: Counter<'stream'>;
  /**
   * Registers a pool of the memory budget (docs/memory.md): `read` gives its bytes held now, read at
   * every scrape as browserd_memory_pool_bytes{pool}. A later registration of the same pool replaces it.
   */
  memoryPool(pool: string, read: () => number): void;
  unhandledRejections: Counter;
  sessionTokenChecks: Counter<'outcome'>;
}

export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'browserd_' });
  const pools = new Map<string, () => number>();
  new Gauge({
    name: 'browserd_memory_pool_bytes',
    help: 'Bytes held by each pool of the memory budget (docs/memory.md): process_output (replay buffers, real bytes), stdin_queue, exec_output, cdp_client_queue',
    labelNames: ['pool'],
    registers: [registry],
    collect() {
      for (const [pool, read] of pools) this.set({ pool }, read());
    },
  });
  return {
    memoryPool: (pool, read) => void pools.set(pool, read),
    registry,
    httpDuration: new Histogram({
      name: 'browserd_http_request_duration_seconds',
      help: 'HTTP request durations by route template, method and status',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    }),
    chromiumRestarts: new Counter({
      name: 'browserd_chromium_restarts_total',
      help: 'Chromium restarts by reason (crash, request, extensions, policy)',
      labelNames: ['reason'],
      registers: [registry],
    }),
    chromiumReady: new Gauge({
      name: 'browserd_chromium_ready',
      help: '1 when Chromium answers DevTools, else 0',
      registers: [registry],
    }),
    extensionActivations: new Counter({
      name: 'browserd_extension_activations_total',
      help: 'Extension activations by mode (live, restart, policy) and outcome (ok, failed)',
      labelNames: ['mode', 'outcome'],
      registers: [registry],
    }),
    extensionActivationDuration: new Histogram({
      name: 'browserd_extension_activation_duration_seconds',
      help: 'Time from the start of an activation until every extension is verified, by mode',
      labelNames: ['mode'],
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30],
      registers: [registry],
    }),
    stdinBytes: new Counter({
      name: 'browserd_stdin_bytes_total',
      help: 'Bytes written into the stdin pipes of spawned processes',
      registers: [registry],
    }),
    proxyChecks: new Counter({
      name: 'browserd_proxy_checks_total',
      help: 'Proxy checks by outcome (available, unavailable, or the inner error code of a url check)',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    forwarderConnections: new Counter({
      name: 'browserd_forwarder_connections_total',
      help: 'Connections the forwarding proxy opened for the browser, by upstream (a proxy id, direct, or other past 16 ids) and outcome (ok or the failure cause)',
      labelNames: ['upstream', 'outcome'],
      registers: [registry],
    }),
    forwarderBytes: new Counter({
      name: 'browserd_forwarder_bytes_total',
      help: 'Bytes the forwarding proxy relayed, by upstream (a proxy id, direct, or other) and direction (sent: browser to upstream, received: upstream to browser)',
      labelNames: ['upstream', 'direction'],
      registers: [registry],
    }),
    forwarderRefused: new Counter({
      name: 'browserd_forwarder_refused_total',
      help: "Connections or requests the forwarding proxy refused, by reason (peer_uid, own_port, bad_request)",
      labelNames: ['reason'],
      registers: [registry],
    }),
    forwarderClients: new Gauge({
      name: 'browserd_forwarder_client_connections',
      help: 'Open connections of the browser to the forwarding proxy',
      registers: [registry],
    }),
    processesLive: new Gauge({
      name: 'browserd_processes_live',
      help: 'Spawned or exec processes whose process group still has a living member',
      registers: [registry],
    }),
    idempotencyKeys: new Gauge({
      name: 'browserd_idempotency_keys',
      help: 'Idempotency keys kept (running or answered, within their TTL)',
      registers: [registry],
    }),
    idempotencyBytes: new Gauge({
      name: 'browserd_idempotency_bytes',
      help: 'Bytes of answers kept for idempotency-key replays',
      registers: [registry],
    }),
    idempotencyReplays: new Counter({
      name: 'browserd_idempotency_replays_total',
      help: 'Requests answered from an earlier request with the same Idempotency-Key',
      registers: [registry],
    }),
    computerActions: new Counter({
      name: 'browserd_computer_actions_total',
      help: 'Computer-control requests by action (click_mouse, screenshot, batch, …) and outcome (ok or the error code)',
      labelNames: ['action', 'outcome'],
      registers: [registry],
    }),
    computerPageLookups: new Counter({
      name: 'browserd_computer_page_lookups_total',
      help: 'Lookups of the page the computer controls act on, by how it was found (probed: every open page asked; kept: nothing changed since the last probe)',
      labelNames: ['how'],
      registers: [registry],
    }),
    cdpMalformed: new Counter({
      name: 'browserd_cdp_malformed_messages_total',
      help: 'Messages from Chromium that were dropped as not DevTools messages, by reason (not_json, bad_shape, unknown_id)',
      labelNames: ['reason'],
      registers: [registry],
    }),
    playwrightExecutions: new Counter({
      name: 'browserd_playwright_executions_total',
      help: 'Playwright executions by outcome (ok, error, timeout, runner_exited, abandoned, unavailable, limit)',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    playwrightDuration: new Histogram({
      name: 'browserd_playwright_execution_duration_seconds',
      help: 'Time from the request to the answer of a Playwright execution (runner start included when one was started)',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 600],
      registers: [registry],
    }),
    playwrightRunners: new Gauge({
      name: 'browserd_playwright_runners',
      help: 'Playwright runner processes alive',
      registers: [registry],
    }),
    logStreams: new Gauge({
      name: 'browserd_log_streams',
      help: 'Log streams open, by source (browserd, chromium, path)',
      labelNames: ['source'],
      registers: [registry],
    }),
    fsBytes: new Counter({
      name: 'browserd_fs_bytes_total',
      help: 'Bytes of file content moved by the files API: read (read_file) and written (write_file)',
      labelNames: ['direction'],
      registers: [registry],
    }),
    fsWatches: new Gauge({
      name: 'browserd_fs_watches',
      help: 'Folder watches alive',
      registers: [registry],
    }),
    curlTabs: new Gauge({
      name: 'browserd_curl_tabs',
      help: "The hidden tabs of requests through the browser, by state: in_use (a request's, or being closed: its last commands not yet answered) and idle (kept warm for the next request)",
      labelNames: ['state'],
      registers: [registry],
    }),
    sseDropped: new Counter({
      name: 'browserd_sse_readers_dropped_total',
      help: 'Event stream readers dropped for taking none of a write for BROWSERD_SSE_STALL_MS, by stream (process_output, fs_watch, logs, telemetry)',
      labelNames: ['stream'],
      registers: [registry],
    }),
    unhandledRejections: new Counter({
      name: 'browserd_unhandled_rejections_total',
      help: 'Promises rejected with no handler (a bug: each is logged at error with its stack; the daemon goes on)',
      registers: [registry],
    }),
    sessionTokenChecks: new Counter({
      name: 'browserd_session_token_checks_total',
      help: 'Session tokens (JWTs) presented, by outcome: cached (verified before, its exp and nbf checked again), verified (its signature checked), refused',
      labelNames: ['outcome'],
      registers: [registry],
    }),
  };
}
