// Starts the real daemon (dist/daemon/main.js) on a random port with its own state dir, and
// gives tests its URL, token, parsed log lines and ways to stop or kill it.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { after } from 'node:test';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const mainJs = path.join(repoRoot, 'dist', 'daemon', 'browserd.js');
export const fixtures = path.join(repoRoot, 'fixtures');

export const TEST_TOKEN = 'test-token-0123456789abcdef';

export type LogLine = Record<string, unknown> & { msg?: string; event?: string };

export interface StartOptions {
  env?: Record<string, string | undefined>;
  /** Reuse a state dir (daemon restart tests); default: a new temp dir, removed by cleanup(). */
  stateDir?: string;
  /** Default true: no Chromium unless the test wants one. */
  noBrowser?: boolean;
  /** Default TEST_TOKEN; null starts without BROWSERD_TOKEN. */
  token?: string | null;
  /** Wait for `listening` (default true). */
  waitListening?: boolean;
  /** A command the daemon is started through (`perl notify-exec.pl`, `setpriv …`): it ends by exec'ing node. */
  wrapper?: string[];
}

export class Daemon {
  readonly logs: LogLine[] = [];
  stderr = '';
  url = '';
  private exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private waiters: { pred: (l: LogLine) => boolean; resolve: (l: LogLine) => void }[] = [];

  constructor(
    readonly proc: ChildProcess,
    readonly stateDir: string,
    readonly token: string | null,
    private readonly ownsStateDir: boolean,
  ) {
    let buf = '';
    proc.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      buf += chunk;
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        let parsed: LogLine;
        try {
          parsed = JSON.parse(line) as LogLine;
        } catch {
          parsed = { msg: line, event: 'non_json' };
        }
        this.logs.push(parsed);
        this.waiters = this.waiters.filter((w) => {
          if (!w.pred(parsed)) return true;
          w.resolve(parsed);
          return false;
        });
      }
    });
    proc.stderr?.setEncoding('utf8').on('data', (c: string) => (this.stderr += c));
    this.exited = new Promise((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal })));
  }

  get pid(): number {
    return this.proc.pid as number;
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

  waitExit(): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    return this.exited;
  }

  /** fetch against the daemon with the bearer token (unless headers say otherwise). */
  fetch(pathname: string, init: RequestInit & { json?: unknown } = {}): Promise<Response> {
    const headers = new Headers(init.headers);
    if (!headers.has('authorization') && this.token !== null) headers.set('authorization', `Bearer ${this.token}`);
    let body = init.body;
    if (init.json !== undefined) {
      headers.set('content-type', 'application/json');
      body = JSON.stringify(init.json);
    }
    return fetch(this.url + pathname, { ...init, headers, body });
  }

  /** SIGTERM and wait for exit. */
  async stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill('SIGTERM');
    return this.exited;
  }

  /** Stops (SIGKILL after 20 s) and removes the state dir this helper made. */
  async cleanup(): Promise<void> {
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      this.proc.kill('SIGTERM');
      const timer = setTimeout(() => this.proc.kill('SIGKILL'), 20_000);
      await this.exited;
      clearTimeout(timer);
    }
    rmSync(`${this.stateDir}-downloads`, { recursive: true, force: true });
    if (this.ownsStateDir) rmSync(this.stateDir, { recursive: true, force: true });
  }
}

/** Every temp folder this test file made: removed when its process exits, after every hook (daemons stopped). */
const made: string[] = [];
process.on('exit', () => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A new temp folder, removed when the test file is done. */
export function tempDir(prefix = 'browserd-test-'): string {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

/** A temp root removed after the file's tests; each call of the result gives a new empty folder in it. */
export function scratchDirs(prefix: string): () => string {
  const root = tempDir(prefix);
  after(() => rmSync(root, { recursive: true, force: true }));
  let n = 0;
  return () => {
    const d = path.join(root, `case-${n++}`);
    mkdirSync(d, { recursive: true });
    return d;
  };
}

export async function startDaemon(opts: StartOptions = {}): Promise<Daemon> {
  const stateDir = opts.stateDir ?? tempDir();
  const token = opts.token === undefined ? TEST_TOKEN : opts.token;
  // Chromium's downloads folder beside the state dir, of this daemon alone (not a shared /tmp/browserd-downloads).
  const downloadsDir = `${stateDir}-downloads`;
  const env: Record<string, string | undefined> = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    BROWSERD_LISTEN: '127.0.0.1:0',
    BROWSERD_STATE_DIR: stateDir,
    BROWSERD_DOWNLOADS_DIR: downloadsDir,
    BROWSERD_LOG_LEVEL: 'debug',
    BROWSERD_BROWSER_AUTOSTART: opts.noBrowser === false ? 'true' : 'false',
    ...(token !== null ? { BROWSERD_TOKEN: token } : {}),
    ...opts.env,
  };
  for (const k of Object.keys(env)) if (env[k] === undefined) delete env[k];
  const argv = [...(opts.wrapper ?? []), process.execPath, mainJs];
  const proc = spawn(argv[0] as string, argv.slice(1), { env: env as NodeJS.ProcessEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  const daemon = new Daemon(proc, stateDir, token, opts.stateDir === undefined);
  if (opts.waitListening !== false) {
    const line = await daemon.waitLog((l) => l.event === 'listening', 30_000);
    daemon.url = `http://${String(line.address)}`;
  }
  return daemon;
}
