// The peer of browserd's Chromium handling: the same binary with the same flags (imported from the
// daemon's flags module), started by hand with its own temp profile, ready when its
// "DevTools listening on ws://…" line was seen and Browser.getVersion answered on that endpoint.
// Also a minimal CDP client for the browser endpoint (the peer of the extension activation).
import { spawn, type ChildProcess } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';
import { chromiumEnv, chromiumFlags } from '../daemon/chromium/flags.js';
import { CHROMIUM, checkRunning, exitOf, onCleanup, stopGroup } from './lib.js';

const DEVTOOLS_RE = /DevTools listening on (ws:\/\/\S+)/;

export interface HandChromium {
  proc: ChildProcess;
  pid: number;
  wsUrl: string;
  /** ms from spawn to ready. */
  readyMs: number;
  /** SIGTERM to its group; resolves once every member is gone. Idempotent. */
  stop(): Promise<void>;
}

/** The flags browserd would pass for this profile (headless, root → --no-sandbox), plus `extra`. */
export function daemonFlags(profileDir: string, opts: { extensionPaths?: string[]; extraFlags?: string[] } = {}): string[] {
  // The peer speaks DevTools over a port (the most direct way for a client), the daemon over its pipe.
  return chromiumFlags({
    profileDir,
    headless: true,
    extraFlags: opts.extraFlags ?? [],
    extras: { extensionPaths: opts.extensionPaths ?? [], allowBackgroundNetworking: false },
    isRoot: process.getuid?.() === 0,
    proxyPort: null,
  }).map((f) => (f === '--remote-debugging-pipe' ? '--remote-debugging-port=0' : f));
}

/** Spawns Chromium in its own process group and waits until it is ready (DevTools line + Browser.getVersion). */
export async function startChromium(args: string[], timeoutMs = 60_000): Promise<HandChromium> {
  checkRunning();
  const t0 = performance.now();
  const proc = spawn(CHROMIUM, args, { env: chromiumEnv(process.env, (args.find((a) => a.startsWith('--user-data-dir=')) ?? '--user-data-dir=/tmp').slice('--user-data-dir='.length), process.env.TMPDIR ?? '/tmp'), detached: true, stdio: ['ignore', 'ignore', 'pipe'] });
  const pid = proc.pid as number;
  const exited = exitOf(proc);
  let stopping: Promise<void> | null = null;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      unregister();
      await stopGroup(pid, { exited });
    })();
    return stopping;
  };
  const unregister = onCleanup(stop);
  try {
    const wsUrl = await new Promise<string>((resolve, reject) => {
      let buf = '';
      let tail = '';
      const timer = setTimeout(() => reject(new Error(`Chromium not ready within ${timeoutMs} ms: ${tail}`)), timeoutMs);
      proc.stderr?.setEncoding('utf8').on('data', (c: string) => {
        buf += c;
        tail = (tail + c).slice(-2000);
        const m = DEVTOOLS_RE.exec(buf);
        if (m) {
          clearTimeout(timer);
          resolve(m[1] as string);
        }
        if (buf.length > 100_000) buf = buf.slice(-1000);
      });
      void exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`Chromium exited before it was ready: ${tail}`));
      });
    });
    proc.stderr?.removeAllListeners('data');
    proc.stderr?.resume();
    for (;;) {
      try {
        const c = await CdpConnection.connect(wsUrl);
        try {
          await c.send('Browser.getVersion');
        } finally {
          c.close();
        }
        break;
      } catch (err) {
        if (performance.now() - t0 > timeoutMs) throw err;
        await sleep(20);
      }
    }
    return { proc, pid, wsUrl, readyMs: performance.now() - t0, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

type Listener = (method: string, params: Record<string, unknown>) => void;

/** A CDP connection with request/answer matching and an event listener. */
export class CdpConnection {
  private next = 1;
  private readonly pending = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();
  private readonly listeners = new Set<Listener>();

  private constructor(private readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const msg = JSON.parse(String(data)) as { id?: number; method?: string; params?: Record<string, unknown>; result?: unknown; error?: { message?: string } };
      if (msg.id === undefined) {
        for (const l of this.listeners) l(msg.method ?? '', msg.params ?? {});
        return;
      }
      const p = this.pending.get(msg.id);
      if (!p) return;
      this.pending.delete(msg.id);
      if (msg.error) p.reject(new Error(msg.error.message ?? 'CDP error'));
      else p.resolve(msg.result ?? {});
    });
    ws.on('close', () => {
      for (const p of this.pending.values()) p.reject(new Error('CDP connection closed'));
      this.pending.clear();
    });
  }

  static connect(url: string, headers: Record<string, string> = {}): Promise<CdpConnection> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, { perMessageDeflate: false, headers, maxPayload: 256 * 1024 * 1024 });
      ws.once('open', () => resolve(new CdpConnection(ws)));
      ws.once('error', reject);
    });
  }

  send<T = Record<string, unknown>>(method: string, params: Record<string, unknown> = {}): Promise<T> {
    const id = this.next++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.ws.send(JSON.stringify({ id, method, params }));
    });
  }

  on(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  close(): void {
    this.ws.terminate();
  }
}
