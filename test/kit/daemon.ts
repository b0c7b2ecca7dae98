// The real daemon (dist/daemon/browserd-test.js, the one-file test build: the shipped daemon but with
// BROWSERD_TEST_HOOKS, see test/kit/test-hooks.ts; `production: true` starts browserd.js) for tests and benchmarks: on 127.0.0.1:0 with its own temp
// state dir, `${stateDir}-downloads` and `${stateDir}-a` (the agent dir), its JSON log lines parsed as they come, fetch with the
// bearer token, and its end: stop() (SIGTERM), cleanup() (SIGKILL after 20 s, then the folders it
// made removed), registered with the cleanup registry so that a benchmark run never leaves one.
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { checkRunning, onCleanup, tempDir } from './cleanup.js';
import { killNaming, signalGroup } from './procs.js';
import { tally } from './tally.js';
import { exitOf, within } from './wait.js';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
/** The test build (scripts/bundle.mjs): what the tests and benchmarks start. */
export const mainJs = path.join(repoRoot, 'dist', 'daemon', 'browserd-test.js');
/** The production build, the one systemd/install.sh installs: it has no test hooks. */
export const productionJs = path.join(repoRoot, 'dist', 'daemon', 'browserd.js');
/** The daemon's code each of the two entries above imports (scripts/bundle.mjs): where the hooks are, or are not. */
export const mainCodeJs = path.join(repoRoot, 'dist', 'daemon', 'browserd-test-main.js');
export const productionCodeJs = path.join(repoRoot, 'dist', 'daemon', 'browserd-main.js');
/**
 * The compile cache every daemon of the kit shares (BROWSERD_COMPILE_CACHE_DIR, docs/startup.md):
 * the daemons of a run start as a deployed daemon restarts, from V8's cached bytecode. A test of the
 * cache itself passes its own folder (or '' for none) in `env`.
 */
export const kitCompileCache = path.join(repoRoot, 'node_modules', '.cache', 'browserd-compile-cache');
export const fixtures = path.join(repoRoot, 'fixtures');

export const TEST_TOKEN = 'test-token-0123456789abcdef';

/**
 * The agent dir the kit gives a daemon: beside its state dir, short (`-a`), since Chromium's socket
 * under <agent dir>/tmp must fit a Unix socket path (MAX_STATE_DIR_BYTES).
 */
export const agentDirOf = (stateDir: string): string => `${stateDir}-a`;

export type LogLine = Record<string, unknown> & { msg?: string; event?: string };
export type Exit = { code: number | null; signal: NodeJS.Signals | null };
export type FetchInit = RequestInit & { json?: unknown };

export interface StartOptions {
  env?: Record<string, string | undefined>;
  /** Reuse a state dir (daemon restart tests); default: a new temp dir, removed by cleanup(). */
  stateDir?: string;
  /** Default false: no Chromium unless the caller wants one. */
  autostart?: boolean;
  /** Default TEST_TOKEN; null starts without BROWSERD_TOKEN. */
  token?: string | null;
  /** The bearer fetch() sends, when it is not `token`: a key of the keys file (BROWSERD_KEYS_FILE). */
  bearer?: string;
  /** Wait for `listening` (default true); on failure the daemon is cleaned up and the error thrown. */
  waitListening?: boolean;
  /** A command the daemon is started through (`perl notify-exec.pl`, `setpriv …`): it ends by exec'ing node. */
  wrapper?: string[];
  /** BROWSERD_LOG_LEVEL, default debug. */
  logLevel?: string;
  /**
   * Its own process group (the benchmarks): cleanup() SIGKILLs the whole group, then anything
   * still naming the state dir (a Chromium the daemon could not end).
   */
  detached?: boolean;
  /** Keep only the newest lines past this many (long benchmark runs); default: every line. */
  keepLogs?: number;
  /** Prefix of the temp state dir. */
  prefix?: string;
  /** Start the production build (dist/daemon/browserd.js, no test hooks) instead of the test build. */
  production?: boolean;
}

/** An API key with its token in the clear: the keys file (BROWSERD_KEYS_FILE) stores the token's sha256. */
export interface ApiKey {
  id: string;
  token: string;
  scopes: string[];
  project?: string;
}

/** Writes a keys file of `keys` (by default in a temp dir of its own) and returns its path. */
export function keysFile(keys: ApiKey[], file = path.join(tempDir('browserd-keys-'), 'keys.json')): string {
  const sha256 = (token: string): string => createHash('sha256').update(token).digest('hex');
  writeFileSync(file, JSON.stringify(keys.map(({ token, ...k }) => ({ ...k, sha256: sha256(token) }))));
  return file;
}

export class Daemon {
  readonly logs: LogLine[] = [];
  stderr = '';
  url = '';
  /** performance.now() when the `listening` line was read (spawnedAt: just before the spawn). */
  listeningAt = 0;
  private readonly exited: Promise<Exit>;
  private waiters: { pred: (l: LogLine) => boolean; resolve: (l: LogLine) => void }[] = [];
  private cleaning: Promise<void> | null = null;
  private readonly unregister: () => void;

  constructor(
    readonly proc: ChildProcess,
    readonly stateDir: string,
    readonly token: string | null,
    readonly spawnedAt: number,
    private readonly opts: { ownsStateDir: boolean; detached: boolean; keepLogs: number },
  ) {
    let buf = '';
    proc.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      buf += chunk;
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        this.received(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
      }
    });
    proc.stderr?.setEncoding('utf8').on('data', (c: string) => (this.stderr = (this.stderr + c).slice(-100_000)));
    this.exited = exitOf(proc);
    this.unregister = onCleanup(() => this.cleanup());
  }

  get pid(): number {
    return this.proc.pid as number;
  }

  private received(raw: string): void {
    let line: LogLine;
    try {
      line = JSON.parse(raw) as LogLine;
    } catch {
      line = { msg: raw, event: 'non_json' };
    }
    if (line.event === 'listening' && this.listeningAt === 0) this.listeningAt = performance.now();
    if (line.event === 'chromium_launched') tally('launch', 0);
    if (line.event === 'chromium_ready') tally('chromium', Number(line.ms) || 0);
    this.logs.push(line);
    if (this.logs.length > this.opts.keepLogs) this.logs.splice(0, this.logs.length - this.opts.keepLogs);
    this.waiters = this.waiters.filter((w) => {
      if (!w.pred(line)) return true;
      w.resolve(line);
      return false;
    });
  }

  /** Resolves with the first log line (past or future) that matches. */
  waitLog(pred: (l: LogLine) => boolean, timeoutMs = 60_000): Promise<LogLine> {
    const past = this.logs.find(pred);
    if (past) return Promise.resolve(past);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`log line not seen in ${timeoutMs} ms; stderr: ${this.stderr.slice(-2000)}`)), timeoutMs);
      this.waiters.push({
        pred,
        resolve: (l) => {
          clearTimeout(timer);
          resolve(l);
        },
      });
      void this.exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`daemon exited before the log line; last log lines: ${JSON.stringify(this.logs.slice(-3))}; stderr: ${this.stderr.slice(-2000)}`));
      });
    });
  }

  waitExit(): Promise<Exit> {
    return this.exited;
  }

  /** fetch against the daemon with the bearer token (unless headers say otherwise); `json` is sent as the body. */
  fetch(pathname: string, init: FetchInit = {}): Promise<Response> {
    const headers = new Headers(init.headers);
    if (!headers.has('authorization') && this.token !== null) headers.set('authorization', `Bearer ${this.token}`);
    let body = init.body;
    if (init.json !== undefined) {
      headers.set('content-type', 'application/json');
      body = JSON.stringify(init.json);
    }
    return fetch(this.url + pathname, { ...init, headers, body });
  }

  /** fetch, and the parsed JSON body; throws unless the status is `want`. */
  async call<T>(pathname: string, init: FetchInit = {}, want = 200): Promise<T> {
    const res = await this.fetch(pathname, init);
    const text = await res.text();
    if (res.status !== want) throw new Error(`${init.method ?? 'GET'} ${pathname}: ${res.status} ${text.slice(0, 500)}`);
    return (text === '' ? undefined : JSON.parse(text)) as T;
  }

  /** One series of /metrics, e.g. `browserd_curl_tabs{state="idle"}` (labels as the daemon writes them); 0 when absent. */
  async metric(series: string): Promise<number> {
    const res = await this.fetch('/metrics');
    const text = await res.text();
    if (res.status !== 200) throw new Error(`GET /metrics: ${res.status} ${text.slice(0, 500)}`);
    const line = text.split('\n').find((l) => l.startsWith(`${series} `));
    return line === undefined ? 0 : Number(line.slice(series.length + 1));
  }

  /** SIGTERM and wait for the exit. */
  async stop(): Promise<Exit> {
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      const t = performance.now();
      this.proc.kill('SIGTERM');
      void this.exited.then(() => tally('stop', performance.now() - t));
    }
    return this.exited;
  }

  /** The agent's folder (BROWSERD_AGENT_DIR): Chromium's profile and TMPDIR, beside the state dir. */
  get agentDir(): string {
    return agentDirOf(this.stateDir);
  }

  /** Stops it (SIGKILL after 20 s) and removes the folders this helper made. Idempotent. */
  cleanup(): Promise<void> {
    this.cleaning ??= (async () => {
      this.unregister();
      if (this.proc.exitCode === null && this.proc.signalCode === null) {
        const t = performance.now();
        this.proc.kill('SIGTERM');
        void this.exited.then(() => tally('stop', performance.now() - t));
        if (!(await within(this.exited, 20_000))) {
          if (this.opts.detached) signalGroup(this.pid, 'SIGKILL');
          else this.proc.kill('SIGKILL');
          await this.exited;
        }
      }
      if (this.opts.detached) killNaming(this.stateDir);
      rmSync(`${this.stateDir}-downloads`, { recursive: true, force: true });
      rmSync(this.agentDir, { recursive: true, force: true });
      if (this.opts.ownsStateDir) rmSync(this.stateDir, { recursive: true, force: true });
    })();
    return this.cleaning;
  }
}

export async function startDaemon(opts: StartOptions = {}): Promise<Daemon> {
  const stateDir = opts.stateDir ?? tempDir(opts.prefix);
  const token = opts.token === undefined ? TEST_TOKEN : opts.token;
  const env: Record<string, string | undefined> = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    BROWSERD_LISTEN: '127.0.0.1:0',
    BROWSERD_STATE_DIR: stateDir,
    // Chromium's downloads folder beside the state dir, of this daemon alone (not a shared /tmp/browserd-downloads).
    BROWSERD_DOWNLOADS_DIR: `${stateDir}-downloads`,
    // The agent's side (Chromium's profile and TMPDIR) beside it, of this daemon alone.
    BROWSERD_AGENT_DIR: agentDirOf(stateDir),
    BROWSERD_LOG_LEVEL: opts.logLevel ?? 'debug',
    BROWSERD_BROWSER_AUTOSTART: opts.autostart === true ? 'true' : 'false',
    BROWSERD_COMPILE_CACHE_DIR: kitCompileCache,
    ...(token !== null ? { BROWSERD_TOKEN: token } : {}),
    ...opts.env,
  };
  for (const k of Object.keys(env)) if (env[k] === undefined) delete env[k];
  checkRunning();
  const argv = [...(opts.wrapper ?? []), process.execPath, opts.production === true ? productionJs : mainJs];
  const detached = opts.detached === true;
  const spawnedAt = performance.now();
  const proc = spawn(argv[0] as string, argv.slice(1), { env: env as NodeJS.ProcessEnv, stdio: ['ignore', 'pipe', 'pipe'], detached });
  const daemon = new Daemon(proc, stateDir, opts.bearer ?? token, spawnedAt, { ownsStateDir: opts.stateDir === undefined, detached, keepLogs: opts.keepLogs ?? Infinity });
  if (opts.waitListening !== false) {
    try {
      const line = await daemon.waitLog((l) => l.event === 'listening', 30_000);
      daemon.url = `http://${String(line.address)}`;
      tally('daemon', daemon.listeningAt - spawnedAt);
    } catch (err) {
      await daemon.cleanup();
      throw err;
    }
  }
  return daemon;
}
