// The daemon process's own steps around its modules (main.ts wires them): hardening before anything
// else, the settings (or exit 2), the one state-dir lock, the bugs that escape every handler, and
// the work once it listens (the compile cache, the start's garbage).
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { ConfigError, loadConfig, type Config } from './config.js';
import { createLogger, flushLogs, type Logger } from './log.js';
import type { Metrics } from './metrics.js';
import { removeStaleTemps } from './fs-atomic.js';
import { lockStateDir, StateDirLockedError } from './state-lock.js';
import { NOTIFY_FD_ENV } from './systemd.js';
import { collectAfterStart, START_GC_DELAY_MS } from './start-gc.js';
import { compileCacheState, saveCompileCache } from './compile-cache.js';
import { closeStrayFds, inheritableFds, makeNonDumpable } from './harden.js';
import { coverInChildren } from './process/launch.js';
import { PtyUnavailableError } from './process/pty.js';

export const EXIT_BAD_SETTING = 2;
/** Restartable (the unit's RestartPreventExitStatus is 2): e.g. the port is still held by the previous instance. */
export const EXIT_RETRY = 1;

/** Before anything else: no descriptor of the daemon's reaches a child, and /proc/<daemon> is root's. What it did, to log once there is a logger. */
export function harden(): { strayFds: number[]; nonDumpable: boolean } {
  const notifyFd = Number(process.env[NOTIFY_FD_ENV]);
  const strayFds = closeStrayFds(new Set(Number.isInteger(notifyFd) ? [notifyFd] : []));
  coverInChildren(inheritableFds());
  return { strayFds, nonDumpable: makeNonDumpable() };
}

/** The settings and the logger (its `tap` sees every line), or exit 2 naming the bad setting. */
export function settingsOrExit<T>(tapOf: (config: Config) => { tap: (line: string) => void } & T): { config: Config; log: Logger } & T {
  try {
    const config = loadConfig();
    const extra = tapOf(config);
    return { ...extra, config, log: createLogger(config.logLevel, undefined, extra.tap) };
  } catch (err) {
    exitBadSetting(createLogger('info'), err);
  }
}

/** A ConfigError is logged with its setting and exits 2; anything else is rethrown (a crash). */
export function exitBadSetting(log: Logger, err: unknown): never {
  if (!(err instanceof ConfigError)) throw err;
  log.fatal({ event: 'bad_setting', setting: err.setting }, err.message);
  process.exit(EXIT_BAD_SETTING);
}

/** `make()`, or exit 2 where it throws a ConfigError (a module's or the keys' bad setting); anything else is a crash. */
export function orExitBadSetting<T>(log: Logger, make: () => T): T {
  try {
    return make();
  } catch (err) {
    exitBadSetting(log, err);
  }
}

/** A module that cannot start: a bad setting or a missing dependency exits 2 (no restart), anything else is a crash. */
export function exitAtStart(log: Logger, name: string, err: unknown): never {
  if (err instanceof PtyUnavailableError) {
    log.fatal({ event: 'dependency_missing', module: name, package: err.pkg }, err.message);
    process.exit(EXIT_BAD_SETTING);
  }
  exitBadSetting(log, err);
}

/**
 * The package's version, from the package.json two folders above `entryUrl`: the daemon's entry,
 * main.js or the bundle, both in dist/daemon/ (a file of core/ cannot name it: in the bundle its
 * import.meta.url is the bundle's).
 */
export function packageVersion(entryUrl: string): string {
  return (JSON.parse(readFileSync(new URL('../../package.json', entryUrl), 'utf8')) as { version: string }).version;
}

/** The API's socket bound, or exit: 1 (restartable) while the port is still held (EADDRINUSE), else 2 (a bad BROWSERD_LISTEN). */
export async function listenOrExit(log: Logger, listen: () => Promise<AddressInfo>): Promise<AddressInfo> {
  return listen().catch((err: unknown) => {
    log.fatal({ event: 'listen_failed', setting: 'BROWSERD_LISTEN', err }, `BROWSERD_LISTEN: cannot listen: ${(err as Error).message}`);
    process.exit((err as NodeJS.ErrnoException).code === 'EADDRINUSE' ? EXIT_RETRY : EXIT_BAD_SETTING);
  });
}

/**
 * The steps once the settings are read: one daemon per state dir (the lock, held until exit and
 * released by the kernel however the daemon ends), what hardening did, the agent user's warning,
 * and the temp files of atomic writes a killed daemon left unfinished.
 */
export function prepare(config: Config, log: Logger, metrics: Metrics, hardened: { strayFds: number[]; nonDumpable: boolean }): void {
  catchStrays(log, metrics);
  try {
    lockStateDir(config.stateDir); // before anything in the state dir is read or written
  } catch (err) {
    if (err instanceof StateDirLockedError) {
      log.fatal({ event: 'state_dir_locked', setting: 'BROWSERD_STATE_DIR', holder_pid: err.holderPid, lock_file: err.lockFile }, err.message);
      process.exit(EXIT_RETRY);
    }
    log.fatal({ event: 'state_dir_lock_failed', setting: 'BROWSERD_STATE_DIR', err }, (err as Error).message);
    process.exit(EXIT_BAD_SETTING);
  }
  if (hardened.strayFds.length > 0) log.info({ event: 'stray_fds_closed', fds: hardened.strayFds }, 'closed descriptors the daemon inherited without close-on-exec');
  if (!hardened.nonDumpable) log.warn({ event: 'dumpable' }, 'the daemon could not make itself non-dumpable (it changes its egid for that: CAP_SETGID)');
  if (!config.agent.separated) {
    log.warn({ event: 'agent_not_separated', setting: 'BROWSERD_AGENT_USER', user: config.agent.user.name }, "the agent user is the daemon's own: Chromium and every process of the API can read the daemon's secrets");
  }
  // Atomic writes a killed daemon left unfinished (proxies.json, chromium-executables.json, ...).
  for (const name of removeStaleTemps(config.stateDir)) log.info({ event: 'store_temp_removed', file: name }, 'removed a temp file of an unfinished store write');
}

/** The `listening` line (with the compile cache's folder, or why there is none). */
export function logListening(config: Config, log: Logger, address: AddressInfo, version: string): void {
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const compileCache = compileCacheState(process.env);
  if (compileCache.dir === null && compileCache.setting !== null) {
    log.warn({ event: 'compile_cache_unused', setting: 'BROWSERD_COMPILE_CACHE_DIR', dir: compileCache.setting, reason: compileCache.why }, `the compile cache folder is not used (${compileCache.why}): every start compiles the daemon afresh`);
  }
  log.info({ event: 'listening', address: `${host}:${address.port}`, port: address.port, version, node: process.version, state_dir: config.stateDir, compile_cache: compileCache.dir }, 'listening');
}

/** Once the daemon serves: the compile cache for the next start, and the start's garbage collected. */
export function afterListening(config: Config, log: Logger): void {
  const compileCache = compileCacheState(process.env);
  // What the start compiled, for the next start, even if this daemon is then killed (before the collection below, same delay).
  setTimeout(() => {
    if (saveCompileCache()) log.debug({ event: 'compile_cache_saved', dir: compileCache.dir }, 'saved the compiled code of this start for the next');
  }, START_GC_DELAY_MS).unref();
  collectAfterStart((ms) => {
    log.debug({ event: 'start_gc', ms: ms === null ? null : Math.round(ms) }, ms === null ? "V8's collector could not be reached: the start's garbage stays until V8 collects it" : 'collected the garbage of the start');
  });
  config.testHooks.afterListening(); // the test build's faults for the crash policy above; nothing in the shipped one
}

// Bugs that escape every handler (docs/operations.md, "Crashes and stray rejections").
//
// A rejected promise nobody handles is logged at error with its stack and counted
// (browserd_unhandled_rejections_total), and the daemon goes on. Such a promise was not awaited:
// the operation it belonged to has already answered or ended, and no state of the daemon waits on
// it (the lifecycle lock, the process table and the stores settle in their owners' own try/finally).
// Exiting for it would end every browser session, process and upload of the VM for an error that
// has already done all its harm. The type-aware lint (no-floating-promises) keeps them rare.
//
// An uncaught exception is different: it unwound a synchronous stack part-way, so an invariant may
// be half-updated (a lock not released, a map entry half-written). One JSON line for the journal,
// then exit 1: systemd restarts, and the next start ends whatever this run left on the Chromium profile.
let strayLog: Logger | null = null;
let strayCount: Metrics['unhandledRejections'] | null = null;

/** From the start of the process (main imports this file first); with the daemon's logger and counter once they exist. */
export function catchStrays(log: Logger, metrics: Metrics): void {
  strayLog = log;
  strayCount = metrics.unhandledRejections;
}

process.on('unhandledRejection', (err: unknown) => {
  (strayLog ?? createLogger('error')).error({ event: 'unhandled_rejection', err }, 'a promise was rejected with no handler (a bug): logged, the daemon goes on');
  strayCount?.inc();
});
process.on('uncaughtException', (err: unknown) => {
  flushLogs(); // the lines before it first
  createLogger('fatal').fatal({ event: 'crash', kind: 'uncaughtException', err }, 'uncaughtException');
  process.exit(1);
});
