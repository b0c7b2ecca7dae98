// systemd integration: sd_notify (READY=1, STATUS=, STOPPING=1) and the watchdog (WATCHDOG=1),
// without a native module.
//
// How a datagram leaves node. systemd's notify socket is AF_UNIX/SOCK_DGRAM, which node cannot
// create (dgram is UDP only, net is stream only). The options weighed:
//  - spawning `systemd-notify` per message: the sender is then the helper, not the main PID, so the
//    unit needs NotifyAccess=all (any process in the cgroup, Chromium and the agents' processes
//    included, could then send READY=1, WATCHDOG=1 or MAINPID=), and a helper that exits before
//    systemd reads the datagram races systemd's lookup of its cgroup (messages get dropped);
//  - a long-lived helper process (perl, python3): also NotifyAccess=all; python3 is not on every VM;
//  - a native or install-script npm package: ruled out.
// Chosen: systemd/notify-exec.pl (perl-base is Essential on Debian, so always present) opens a
// connected, non-blocking datagram socket to $NOTIFY_SOCKET, clears its close-on-exec flag and
// exec()s node in the SAME process, passing the descriptor number in BROWSERD_NOTIFY_FD. Node then
// sends each message with one write(2) on that descriptor (fs.writeSync): the kernel stamps the
// datagram with node's own pid, which is the unit's main PID, so the unit keeps NotifyAccess=main,
// and a WATCHDOG=1 is written by the event loop itself — a wedged loop stops pinging and systemd
// restarts the service. Node marks inherited descriptors close-on-exec at startup, so Chromium and
// spawned processes do not inherit the socket; the systemd variables are removed from process.env.
import { closeSync, fstatSync, writeSync } from 'node:fs';
import type { Browser, BrowserSnapshot, BrowserState } from '../chromium/types.js';
import type { Logger } from './log.js';
import type { ApiAddress, Module } from '../module.js';

/** Set by systemd/notify-exec.pl: the descriptor of the datagram socket connected to NOTIFY_SOCKET. */
export const NOTIFY_FD_ENV = 'BROWSERD_NOTIFY_FD';
/** Removed from process.env once read, so no child process sees them. */
const SYSTEMD_ENV = ['NOTIFY_SOCKET', NOTIFY_FD_ENV, 'WATCHDOG_USEC', 'WATCHDOG_PID'] as const;
/** STATUS= is one line in `systemctl status`; longer texts are cut. */
const STATUS_MAX_CHARS = 200;

interface SystemdDeps {
  log: Logger;
  /** true when Chromium is autostarted: READY=1 then waits for it; else READY=1 follows `listening`. */
  waitForBrowser: boolean;
  /** Default process.env. The systemd variables are deleted from it. */
  env?: NodeJS.ProcessEnv;
  /** Default process.pid (for WATCHDOG_PID). */
  pid?: number;
  /** Where the API listens (told at serve()). */
  api?: ApiAddress;
}

interface Systemd extends Module {
  /** true when notifications can reach the service manager. */
  readonly notifying: boolean;
  /** ms between WATCHDOG=1 pings (half of WATCHDOG_USEC), or null when the watchdog is off. */
  readonly watchdogIntervalMs: number | null;
  /** STATUS= on every browser state change; its first `ready` (with `listening`) sends READY=1. */
  watchBrowser(browser: Pick<Browser, 'use' | 'snapshot'>): void;
  /** The HTTP port listens (the address as logged). */
  listening(address: string): void;
  /** STOPPING=1, once. Pings go on until close(), so a slow shutdown is not taken for a hang. */
  stopping(): void;
  /** Module steps: the API listens (ctx.api), the first signal (stopping). */
  serve(): void;
  beginShutdown(): void;
  /** Stops the pings and closes the socket. Idempotent. */
  close(): Promise<void>;
  destroy(): void;
}

export function createSystemd(deps: SystemdDeps): Systemd {
  const env = deps.env ?? process.env;
  const pid = deps.pid ?? process.pid;
  const { log } = deps;
  const vars = Object.fromEntries(SYSTEMD_ENV.map((k) => [k, env[k]])) as Record<(typeof SYSTEMD_ENV)[number], string | undefined>;
  for (const k of SYSTEMD_ENV) delete env[k];

  let fd = openNotifyFd(vars.NOTIFY_SOCKET, vars[NOTIFY_FD_ENV], log);
  const failures = new Set<string>();
  const send = (state: string): boolean => {
    if (fd === null) return false;
    try {
      writeSync(fd, state);
      return true;
    } catch (err) {
      // EAGAIN: the manager's queue is full (it is hung); ECONNREFUSED: it is gone. Logged once per code.
      const code = (err as NodeJS.ErrnoException).code ?? 'unknown';
      if (!failures.has(code)) {
        failures.add(code);
        log.warn({ event: 'sd_notify_failed', code, state: oneLine(state) }, 'a notification did not reach systemd');
      }
      return false;
    }
  };

  const watchdogIntervalMs = fd === null ? null : watchdogInterval(vars.WATCHDOG_USEC, vars.WATCHDOG_PID, pid, log);
  let watchdog: NodeJS.Timeout | null = null;
  if (watchdogIntervalMs !== null) {
    send('WATCHDOG=1');
    // On the main event loop on purpose: a loop that is wedged stops pinging. unref() only means the
    // timer alone does not keep the process alive; it still fires while the daemon runs.
    watchdog = setInterval(() => send('WATCHDOG=1'), watchdogIntervalMs).unref();
  }
  if (fd !== null) {
    log.info({ event: 'systemd', notify: true, watchdog_ms: watchdogIntervalMs, wait_for_browser: deps.waitForBrowser }, 'notifying systemd');
  }

  let address: string | null = null;
  let browserReady = !deps.waitForBrowser;
  let browserStatus = deps.waitForBrowser ? 'chromium starting' : 'chromium not autostarted (BROWSERD_BROWSER_AUTOSTART=false)';
  let readySent = false;
  let stoppingSent = false;

  const update = (): void => {
    const text = stoppingSent ? `stopping; ${browserStatus}` : address === null ? browserStatus : `${browserStatus}; API on ${address}`;
    const status = oneLine(text).slice(0, STATUS_MAX_CHARS);
    if (!readySent && !stoppingSent && address !== null && browserReady) {
      readySent = true;
      if (send(`READY=1\nSTATUS=${status}`)) log.info({ event: 'systemd_ready', status }, 'told systemd: ready');
      return;
    }
    if (send(`STATUS=${status}`)) log.debug({ event: 'sd_notify', status }, 'systemd status');
  };

  const onBrowser = (state: BrowserState, snap: BrowserSnapshot): void => {
    if (state === 'ready') browserReady = true;
    browserStatus = describe(state, snap);
    update();
  };

  const close = async (): Promise<void> => {
    if (watchdog !== null) clearInterval(watchdog);
    watchdog = null;
    if (fd !== null) {
      const f = fd;
      fd = null; // before closing: a later send must never write to a reused descriptor number
      try {
        closeSync(f);
      } catch {
        // already closed: nothing to release
      }
    }
  };

  const listening = (addr: string): void => {
    address = addr;
    update();
  };
  const stopping = (): void => {
    if (stoppingSent) return;
    stoppingSent = true;
    if (send('STOPPING=1\nSTATUS=stopping')) log.debug({ event: 'sd_notify', status: 'stopping' }, 'told systemd: stopping');
  };
  return {
    name: 'systemd',
    get notifying() {
      return fd !== null;
    },
    watchdogIntervalMs,
    watchBrowser(browser) {
      browser.use({ name: 'systemd', onState: onBrowser });
      const snap = browser.snapshot();
      if (snap.state === 'ready') onBrowser(snap.state, snap);
    },
    listening,
    stopping,
    serve() {
      const api = deps.api;
      if (api !== undefined && api.port !== null) listening(`${api.host.includes(':') ? `[${api.host}]` : api.host}:${api.port}`);
    },
    beginShutdown: stopping,
    close,
    destroy: () => void close(),
  };
}

/** The notify descriptor, or null (not under systemd, or not started through notify-exec.pl). */
function openNotifyFd(socket: string | undefined, rawFd: string | undefined, log: Logger): number | null {
  if (socket === undefined || socket === '') return null;
  if (rawFd === undefined || !/^\d+$/.test(rawFd)) {
    log.error(
      { event: 'sd_notify_unavailable', notify_socket: socket },
      `NOTIFY_SOCKET is set but ${NOTIFY_FD_ENV} is not: start browserd through systemd/notify-exec.pl ` +
        '(see systemd/browserd.service); systemd will not see READY=1 and will time the start out',
    );
    return null;
  }
  const fd = Number(rawFd);
  try {
    if (!fstatSync(fd).isSocket()) throw new Error(`descriptor ${fd} is not a socket`);
  } catch (err) {
    log.error({ event: 'sd_notify_unavailable', notify_socket: socket, fd, err }, `${NOTIFY_FD_ENV}=${fd} is not a usable socket`);
    return null;
  }
  return fd;
}

/** Half of WATCHDOG_USEC in ms (as sd_watchdog_enabled(3) advises), or null when it is not for us. */
function watchdogInterval(rawUsec: string | undefined, rawPid: string | undefined, pid: number, log: Logger): number | null {
  if (rawUsec === undefined || rawUsec === '') return null;
  if (rawPid !== undefined && rawPid !== '' && Number(rawPid) !== pid) {
    log.info({ event: 'watchdog_off', watchdog_pid: rawPid }, 'WATCHDOG_PID names another process: not pinging');
    return null;
  }
  const usec = /^\d+$/.test(rawUsec) ? Number(rawUsec) : NaN;
  if (!Number.isSafeInteger(usec) || usec <= 0) {
    log.warn({ event: 'watchdog_off', watchdog_usec: rawUsec }, 'WATCHDOG_USEC is not a positive whole number: not pinging');
    return null;
  }
  return Math.max(1, Math.floor(usec / 2000));
}

function describe(state: BrowserState, snap: BrowserSnapshot): string {
  switch (state) {
    case 'ready':
      return `chromium ready, pid ${snap.chromium.pid ?? '?'}`;
    case 'starting':
    case 'restarting':
      // reason: the crash or failed launch being retried; null for a requested restart.
      return `chromium ${state}${snap.reason ? `: ${snap.reason}` : ''}`;
    case 'failed':
      return `chromium failed: ${snap.reason ?? 'unknown reason'}`;
    case 'stopped':
      return 'chromium stopped';
  }
}

/** A notification field must not carry a newline (it would start a new field, e.g. READY=1). */
function oneLine(text: string): string {
  return text.replace(/[\r\n]+/g, ' ');
}
