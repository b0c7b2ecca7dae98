// The one shape of a module: what each area of daemon/ gives main.ts. main builds the list of
// modules once and runs every lifecycle step over it, in the list's order (stops in reverse); a
// module declares only the steps it has. Adding a module is its folder and one entry in main's list.
import type { AddressInfo } from 'node:net';
import { exitAtStart } from './core/boot.js';
import type { Config } from './core/config.js';
import type { Logger } from './core/log.js';
import type { Metrics } from './core/metrics.js';
import type { Route } from './http/router.js';

/** Where the API listens: BROWSERD_LISTEN's host and port (null for 0) until the daemon listens, then the bound address. */
export interface ApiAddress {
  readonly host: string;
  readonly port: number | null;
}

/** What every module is given, known before any module is made. */
export interface ModuleContext {
  readonly config: Config;
  readonly log: Logger;
  readonly metrics: Metrics;
  readonly api: ApiAddress;
}

export interface Module {
  /** The area's name (its folder). */
  readonly name: string;
  /** Its routes, added to the server's table. */
  readonly routes?: readonly Route[];
  /** Before the daemon listens, in list order: open stores, end what a killed daemon left, bind its own ports. */
  start?(): Promise<void>;
  /** Once the daemon listens (ctx.api is the bound address), in list order. */
  serve?(): void;
  /** The first signal, before the HTTP server drains, in list order: refuse new work, close long-lived connections. */
  beginShutdown?(): void;
  /** Graceful stop once the HTTP server has drained, in reverse list order. Idempotent. */
  close?(): Promise<void>;
  /** The second signal: stop now, in reverse list order. Idempotent. */
  destroy?(): void;
}

/** The listen address as the API port's owner updates it (main, once it listens). */
export class ListenAddress implements ApiAddress {
  host: string;
  port: number | null;

  constructor(listen: { host: string; port: number }) {
    this.host = listen.host;
    this.port = listen.port === 0 ? null : listen.port;
  }

  /** Once the daemon listens: the bound address. */
  bound(address: AddressInfo): void {
    this.host = address.address;
    this.port = address.port;
  }
}

/** Each module's start, in list order; a module that cannot start ends the process (core/boot.ts's exitAtStart). */
export async function startAll(modules: readonly Module[], log: Logger): Promise<void> {
  for (const m of modules) await m.start?.().catch((err: unknown) => exitAtStart(log, m.name, err));
}

/** Each module's serve, in list order, once the daemon listens (systemd's READY=1, Chromium's autostart). */
export function serveAll(modules: readonly Module[]): void {
  for (const m of modules) m.serve?.();
}

/** What the stop needs of the HTTP server. */
interface Drainable {
  close(deadlineMs: number): Promise<void>;
  destroy(): void;
}

/**
 * The stop of the whole list on SIGTERM and SIGINT: the first signal begins every module's shutdown
 * (list order), drains the HTTP server within `deadlineMs`, then closes the modules (reverse order),
 * logging any that does not stop cleanly, and exits 0; a second signal destroys everything now and
 * exits 1.
 */
export function stopOnSignals(modules: readonly Module[], server: Drainable, log: Logger, deadlineMs: number): void {
  let stopping = false;
  const shutdown = async (signal: string): Promise<void> => {
    if (stopping) {
      log.warn({ event: 'stopping', signal }, 'second signal: stopping now');
      server.destroy();
      for (const m of [...modules].reverse()) m.destroy?.();
      process.exit(1);
    }
    stopping = true;
    log.info({ event: 'stopping', signal, deadline_ms: deadlineMs }, 'stopping');
    for (const m of modules) m.beginShutdown?.();
    await server.close(deadlineMs);
    for (const m of [...modules].reverse()) {
      await m.close?.().catch((err: unknown) => log.error({ event: 'stop_error', module: m.name, err }, 'a module did not stop cleanly'));
    }
    log.info({ event: 'stopped' }, 'stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}
