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
  processesLive: Gauge;
  fsBytes: Counter<'direction'>;
  fsWatches: Gauge;
}

export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'browserd_' });
  return {
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
    processesLive: new Gauge({
      name: 'browserd_processes_live',
      help: 'Spawned or exec processes whose process group still has a living member',
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
  };
}
