// The real daemon for the benchmarks: dist/daemon/main.js in its own process group, with its own
// temp state dir, on 127.0.0.1:0 with BROWSERD_TOKEN; its JSON log lines parsed (each stamped with
// the time it was read); stop() ends it, anything left on its state dir, and removes the dir.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { checkRunning, exitOf, killNaming, mainJs, onCleanup, signalGroup, within } from './lib.js';

export const BENCH_TOKEN = 'bench-token-0123456789abcdef';

export type LogLine = Record<string, unknown> & { event?: string; msg?: string };

export interface DaemonOptions {
  env?: Record<string, string | undefined>;
  /** Default false: no Chromium until a restart. */
  autostart?: boolean;
}

export class BenchDaemon {
  readonly logs: LogLine[] = [];
  url = '';
  private stderr = '';
  private readonly exited: Promise<void>;
  private waiters: { pred: (l: LogLine) => boolean; resolve: (l: LogLine) => void }[] = [];
  private stopping: Promise<void> | null = null;
  private readonly unregister: () => void;

  constructor(
    readonly proc: ChildProcess,
    readonly stateDir: string,
    readonly spawnedAt: number,
  ) {
    let buf = '';
    proc.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      buf += chunk;
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const raw = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        let line: LogLine;
        try {
          line = JSON.parse(raw) as LogLine;
        } catch {
          line = { event: 'non_json', msg: raw };
        }
        line.at_ms = performance.now();
        this.logs.push(line);
        if (this.logs.length > 5000) this.logs.splice(0, 1000);
        this.waiters = this.waiters.filter((w) => {
          if (!w.pred(line)) return true;
          w.resolve(line);
          return false;
        });
      }
    });
    proc.stderr?.setEncoding('utf8').on('data', (c: string) => (this.stderr = (this.stderr + c).slice(-4000)));
    this.exited = exitOf(proc);
    this.unregister = onCleanup(() => this.stop());
  }

  get pid(): number {
    return this.proc.pid as number;
  }

  /** The first log line (past or future) that matches. */
  waitLog(pred: (l: LogLine) => boolean, timeoutMs = 60_000): Promise<LogLine> {
    const past = this.logs.find(pred);
    if (past) return Promise.resolve(past);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`daemon log line not seen within ${timeoutMs} ms; stderr: ${this.stderr}`)), timeoutMs);
      this.waiters.push({
        pred,
        resolve: (l) => {
          clearTimeout(timer);
          resolve(l);
        },
      });
      void this.exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`the daemon exited; stderr: ${this.stderr}`));
      });
    });
  }

  fetch(pathname: string, init: RequestInit & { json?: unknown } = {}): Promise<Response> {
    const headers = new Headers(init.headers);
    headers.set('authorization', `Bearer ${BENCH_TOKEN}`);
    let body = init.body;
    if (init.json !== undefined) {
      headers.set('content-type', 'application/json');
      body = JSON.stringify(init.json);
    }
    return fetch(this.url + pathname, { ...init, headers, body });
  }

  /** fetch, and the parsed JSON body; throws unless the status is `want`. */
  async call<T>(pathname: string, init: RequestInit & { json?: unknown } = {}, want = 200): Promise<T> {
    const res = await this.fetch(pathname, init);
    const text = await res.text();
    if (res.status !== want) throw new Error(`${init.method ?? 'GET'} ${pathname}: ${res.status} ${text.slice(0, 500)}`);
    return (text === '' ? undefined : JSON.parse(text)) as T;
  }

  /** SIGTERM (the daemon stops its Chromium), SIGKILL to its group after 20 s, then whatever is left on its state dir; removes the state dir. Idempotent. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      this.unregister();
      if (this.proc.exitCode === null && this.proc.signalCode === null) {
        this.proc.kill('SIGTERM');
        await within(this.exited, 20_000);
        signalGroup(this.pid, 'SIGKILL');
        await this.exited;
      }
      killNaming(this.stateDir);
      rmSync(this.stateDir, { recursive: true, force: true });
      rmSync(`${this.stateDir}-downloads`, { recursive: true, force: true });
    })();
    return this.stopping;
  }
}

/** Starts the daemon (own process group, own temp state dir, 127.0.0.1:0) and waits for `listening`. */
export async function startDaemon(opts: DaemonOptions = {}): Promise<BenchDaemon> {
  const stateDir = mkdtempSync(path.join(tmpdir(), 'browserd-bench-'));
  const env: Record<string, string | undefined> = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    BROWSERD_LISTEN: '127.0.0.1:0',
    BROWSERD_STATE_DIR: stateDir,
    BROWSERD_DOWNLOADS_DIR: `${stateDir}-downloads`,
    BROWSERD_LOG_LEVEL: 'info',
    BROWSERD_TOKEN: BENCH_TOKEN,
    BROWSERD_BROWSER_AUTOSTART: opts.autostart === true ? 'true' : 'false',
    ...opts.env,
  };
  for (const k of Object.keys(env)) if (env[k] === undefined) delete env[k];
  checkRunning();
  const spawnedAt = performance.now();
  const proc = spawn(process.execPath, [mainJs], { env: env as NodeJS.ProcessEnv, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const d = new BenchDaemon(proc, stateDir, spawnedAt);
  try {
    const line = await d.waitLog((l) => l.event === 'listening', 30_000);
    d.url = `http://${String(line.address)}`;
  } catch (err) {
    await d.stop();
    throw err;
  }
  return d;
}
