// ChromeDriver, the daemon's child: started on first use, started again on the next use after it
// died, stopped with the daemon (or when Chromium restarts: its sessions belong to that run). It runs
// as the WebDriver user (BROWSERD_WEBDRIVER_USER: neither the agent user nor root) in a network
// namespace of its own (relay.ts), so its port and the DevTools endpoint it attaches to exist on no
// loopback another user can reach; the daemon talks to it over <dir>/webdriver.sock and serves it
// DevTools over <dir>/devtools.sock, <dir> being the WebDriver user's (0700).
import { chmodSync, chownSync, mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { BrowserUnavailableError, DependencyMissingError } from '../core/errors.js';
import type { Deadline } from '../core/deadline.js';
import type { Logger } from '../core/log.js';
import { endGroups } from '../core/process/group.js';
import { launch, type Child } from '../core/process/launch.js';
import { daemonUser, lookupUser, type SwitchTo } from '../core/users.js';
import { DEFAULT_PATH, findOnPath } from '../core/which.js';
import { DEVTOOLS_SOCKET, DRIVER_SOCKET } from './ports.js';

/** How long a starting ChromeDriver has to answer GET /status with ready: true. */
export const DRIVER_START_MS = 15_000;
/** SIGTERM to SIGKILL when ChromeDriver is stopped. */
const STOP_GRACE_MS = 2000;
const STATUS_POLL_MS = 50;

export interface DriverOptions {
  log: Logger;
  /** BROWSERD_CHROMEDRIVER, resolved (null: not installed). */
  chromedriver: string | null;
  /** BROWSERD_WEBDRIVER_USER. */
  userName: string;
  /** The agent user's uid: ChromeDriver never runs as it. */
  agentUid: number;
  /** Whether the daemon may start children as other users (else ChromeDriver runs as the daemon's user). */
  maySwitch: boolean;
  /** dist/daemon/webdriver/relay.js. */
  relayScript: string;
  /** Serves the DevTools endpoint on a Unix socket at this path. */
  serveDevtools(socketPath: string): Promise<net.Server>;
  /** ChromeDriver exited (any cause): its sessions are over. */
  onExit(): void;
}

/** Answers GET /status of the driver over its socket: ready or not (null: no answer). */
function driverReady(socketPath: string): Promise<boolean | null> {
  return new Promise((resolve) => {
    const req = http.get({ socketPath, path: '/status', timeout: 2000 }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (c: string) => (text += c));
      res.on('end', () => {
        try {
          resolve((JSON.parse(text) as { value?: { ready?: unknown } }).value?.ready === true);
        } catch {
          resolve(false);
        }
      });
      res.on('error', () => resolve(null));
    });
    req.on('error', () => resolve(null));
    req.on('timeout', () => req.destroy());
  });
}

export class ChromeDriver {
  private dir: string | null = null;
  private devtools: net.Server | null = null;
  private child: Child | null = null;
  private starting: Promise<Child> | null = null;
  private closed = false;

  constructor(private readonly opts: DriverOptions) {}

  /** The pid of the running ChromeDriver's relay (the group leader), or null. */
  get pid(): number | null {
    return this.child?.pid ?? null;
  }

  /** The socket of ChromeDriver's port, once it is running and ready (started when it is not). */
  async socket(deadline: Deadline): Promise<string> {
    if (this.closed) throw new BrowserUnavailableError('browserd is stopping', { retryable: false });
    if (this.child === null || this.child.exitInfo !== null) {
      this.starting ??= this.start(deadline).finally(() => (this.starting = null));
      this.child = await this.starting;
    }
    return path.join(this.dir as string, DRIVER_SOCKET);
  }

  /** Ends ChromeDriver (and every session of it); the next use starts another. */
  async stop(): Promise<void> {
    const child = this.child;
    this.child = null;
    if (child !== null) await endGroups([child.pgid], STOP_GRACE_MS);
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.starting?.catch(() => undefined);
    await this.stop();
    this.devtools?.close();
    if (this.dir !== null) rmSync(this.dir, { recursive: true, force: true });
  }

  destroy(): void {
    this.closed = true;
    if (this.child !== null) void endGroups([this.child.pgid], 0);
  }

  /** Who ChromeDriver runs as: the WebDriver user, or the daemon's own user when the daemon cannot switch users. */
  private who(): { switchTo: SwitchTo | undefined; uid: number; gid: number } {
    if (!this.opts.maySwitch) {
      const me = daemonUser();
      return { switchTo: undefined, uid: me.uid, gid: me.gid };
    }
    const name = this.opts.userName;
    const user = lookupUser(name);
    if (user === null) {
      throw new DependencyMissingError(
        'webdriver_user',
        `no user "${name}" (BROWSERD_WEBDRIVER_USER) in /etc/passwd: create it (useradd --system --user-group --no-create-home --shell /usr/sbin/nologin ${name}; .ci/setup and systemd/install.sh do)`,
      );
    }
    if (user.uid === 0 || user.uid === this.opts.agentUid) {
      throw new DependencyMissingError('webdriver_user', `BROWSERD_WEBDRIVER_USER "${name}" is ${user.uid === 0 ? 'root' : 'the agent user'}: ChromeDriver needs a user of its own`);
    }
    return { switchTo: { uid: user.uid, gid: user.gid }, uid: user.uid, gid: user.gid };
  }

  private async start(deadline: Deadline): Promise<Child> {
    const { log } = this.opts;
    const chromedriver = this.opts.chromedriver;
    if (chromedriver === null) throw new DependencyMissingError('chromedriver', 'ChromeDriver is not installed: apt-get install chromium-driver (or set BROWSERD_CHROMEDRIVER)');
    const unshare = findOnPath('unshare', DEFAULT_PATH);
    const ip = findOnPath('ip', DEFAULT_PATH);
    if (unshare === null || ip === null) throw new DependencyMissingError(unshare === null ? 'unshare' : 'ip', `${unshare === null ? 'unshare(1) (util-linux)' : 'ip(8) (iproute2)'} is missing: ChromeDriver runs in a network namespace of its own`);
    const who = this.who();
    if (this.dir === null) {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'browserd-webdriver-'));
      chownSync(dir, who.uid, who.gid);
      chmodSync(dir, 0o700);
      const sock = path.join(dir, DEVTOOLS_SOCKET);
      this.devtools = await this.opts.serveDevtools(sock);
      // The folder keeps every other user out; ChromeDriver's user (in its namespace, unmapped from
      // the daemon's) must be able to connect.
      chmodSync(sock, 0o666);
      this.dir = dir;
    }
    const dir = this.dir;
    const child = await launch({
      command: unshare,
      args: ['--user', '--map-root-user', '--net', '--', process.execPath, this.opts.relayScript, dir, ip, chromedriver],
      env: { PATH: DEFAULT_PATH, HOME: dir, TMPDIR: dir, LANG: 'C.UTF-8' },
      user: who.switchTo,
      stdin: 'ignore',
    });
    for (const stream of [child.stdout, child.stderr]) {
      createInterface({ input: stream }).on('line', (line) => log.debug({ event: 'chromedriver_line', line: line.slice(0, 2000) }, 'chromedriver'));
    }
    log.info({ event: 'chromedriver_started', pid: child.pid, chromedriver, uid: who.uid, dir }, 'ChromeDriver started in its own network namespace');
    void child.exit.then((exit) => {
      if (this.child === child) this.child = null;
      void endGroups([child.pgid], 0); // what the relay leaves behind (ChromeDriver, if the relay died alone)
      log.info({ event: 'chromedriver_exited', pid: child.pid, code: exit.code, signal: exit.signal }, 'ChromeDriver exited');
      this.opts.onExit();
    });
    const sock = path.join(dir, DRIVER_SOCKET);
    for (;;) {
      if (child.exitInfo !== null) throw new BrowserUnavailableError(`ChromeDriver exited as it started (code ${child.exitInfo.code}, signal ${child.exitInfo.signal}); the daemon's log has its output (chromedriver_line)`);
      if ((await driverReady(sock)) === true) return child;
      if (deadline.expired) {
        await endGroups([child.pgid], 0);
        throw new BrowserUnavailableError(`ChromeDriver did not answer GET /status within ${DRIVER_START_MS / 1000} s`);
      }
      await deadline.sleep(STATUS_POLL_MS).catch(() => undefined);
    }
  }
}
