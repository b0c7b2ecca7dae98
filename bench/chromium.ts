// The peer of browserd's Chromium handling: the same binary with the same flags (imported from the
// daemon's flags module), started by hand with its own temp profile, ready when its
// "DevTools listening on ws://…" line was seen and Browser.getVersion answered on that endpoint
// (the daemon's own CDP client, straight to the port). With --remote-debugging-pipe among its flags
// (pipeFlags) it speaks DevTools over fds 3 and 4 as the daemon's Chromium does, ready when
// Browser.getVersion answers over the pipe, and `pipe` is that client.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Readable, Writable } from 'node:stream';
import type { Channel } from '../daemon/cdp/channel.js';
import { CdpClient } from '../daemon/cdp/client.js';
import { CdpPipe } from '../daemon/cdp/pipe.js';
import { chromiumEnv, chromiumFlags } from '../daemon/chromium/flags.js';
import { agentIds } from '../test/kit/agent.js';
import { checkRunning, onCleanup } from '../test/kit/cleanup.js';
import { stopGroup } from '../test/kit/procs.js';
import { exitOf, until } from '../test/kit/wait.js';
import { CHROMIUM } from './lib.js';

const DEVTOOLS_RE = /DevTools listening on (ws:\/\/\S+)/;

export interface HandChromium {
  proc: ChildProcess;
  pid: number;
  /** The DevTools endpoint; '' in pipe mode. */
  wsUrl: string;
  /** Pipe mode: the client on the DevTools pipe (closed with the process). */
  pipe: CdpClient | null;
  /** ms from spawn to ready. */
  readyMs: number;
  /** SIGTERM to its group; resolves once every member is gone. Idempotent. */
  stop(): Promise<void>;
}

/** The flags browserd would pass for this profile (headless, root → --no-sandbox), plus `extra`. */
export function daemonFlags(profileDir: string, opts: { extensionPaths?: string[]; extraFlags?: string[]; asAgent?: boolean } = {}): string[] {
  // The peer speaks DevTools over a port (the most direct way for a client), the daemon over its pipe.
  return chromiumFlags({
    profileDir,
    headless: true,
    extraFlags: opts.extraFlags ?? [],
    extras: { extensionPaths: opts.extensionPaths ?? [], allowBackgroundNetworking: false },
    // A hand-started Chromium as root cannot have its sandbox; as the agent user (asAgent) it has it, as the daemon's.
    noSandbox: process.getuid?.() === 0 && opts.asAgent !== true,
    proxyPort: null,
  }).map((f) => (f === '--remote-debugging-pipe' ? '--remote-debugging-port=0' : f));
}

/** `args` with DevTools over the pipe (fds 3 and 4) instead of a port, as the daemon runs Chromium. */
export function pipeFlags(args: string[]): string[] {
  return args.map((f) => (f === '--remote-debugging-port=0' ? '--remote-debugging-pipe' : f));
}

/** The daemon's CDP client on a Chromium's DevTools pipe (the framing is the daemon's CdpPipe; no multiplexer). */
function pipeClient(out: Writable, input: Readable): Promise<CdpClient> {
  return CdpClient.overChannel(async (sink) => {
    const pipe = new CdpPipe(out, input, 256 * 1024 * 1024, {
      message: (data) => sink.message(data),
      tooBig: () => undefined,
      closed: () => sink.ended({ message: 'the DevTools pipe closed' }),
    });
    // The four calls CdpClient makes on a channel; a raw pipe has no other client to count.
    return { send: (text: string) => pipe.send(text), close: () => pipe.close(), reportMalformed: () => undefined, browserCommands: () => 0 } as unknown as Channel;
  });
}

/** Spawns Chromium in its own process group and waits until it is ready (DevTools line + Browser.getVersion). */
export async function startChromium(args: string[], timeoutMs = 60_000, opts: { asAgent?: boolean } = {}): Promise<HandChromium> {
  checkRunning();
  const profileDir = (args.find((a) => a.startsWith('--user-data-dir=')) ?? '--user-data-dir=/tmp').slice('--user-data-dir='.length);
  // asAgent: as the daemon starts it, the agent user through setpriv with no capability kept (its
  // profile's parent folder must be the agent's: agentTempDir), with its temp files beside the profile.
  const { uid, gid } = opts.asAgent === true ? agentIds() : { uid: 0, gid: 0 };
  const [command, argv] = opts.asAgent === true ? ['setpriv', [`--reuid=${uid}`, `--regid=${gid}`, '--clear-groups', '--inh-caps=-all', CHROMIUM, ...args]] : [CHROMIUM, args];
  const tmp = opts.asAgent === true ? path.dirname(profileDir) : (process.env.TMPDIR ?? '/tmp');
  const t0 = performance.now();
  const overPipe = args.includes('--remote-debugging-pipe');
  const proc = spawn(command, argv, { env: chromiumEnv(process.env, profileDir, tmp), detached: true, stdio: overPipe ? ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] : ['ignore', 'ignore', 'pipe'] });
  const pid = proc.pid as number;
  const exited = exitOf(proc);
  let stopping: Promise<void> | null = null;
  let pipe: CdpClient | null = null;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      unregister();
      pipe?.close();
      await stopGroup(pid, { exited });
    })();
    return stopping;
  };
  const unregister = onCleanup(stop);
  try {
    if (overPipe) {
      pipe = await pipeClient(proc.stdio[3] as Writable, proc.stdio[4] as Readable);
      proc.stderr?.resume();
      const client = pipe;
      // Chromium reads the pipe once DevTools is up: the first command's answer is the ready signal.
      const first = await Promise.race([client.send('Browser.getVersion', {}, { timeoutMs }).then(() => 'ready' as const), exited.then(() => 'exited' as const)]);
      if (first === 'exited') throw new Error('Chromium exited before it was ready');
      return { proc, pid, wsUrl: '', pipe: client, readyMs: performance.now() - t0, stop };
    }
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
    const answers = async (): Promise<boolean> => {
      const c = await CdpClient.overWebSocket(wsUrl).catch(() => null);
      try {
        return (await c?.send('Browser.getVersion')) !== undefined;
      } catch {
        return false;
      } finally {
        c?.close();
      }
    };
    await until(`Browser.getVersion answered at ${wsUrl}`, answers, Math.max(0, timeoutMs - (performance.now() - t0)), 20);
    return { proc, pid, wsUrl, pipe: null, readyMs: performance.now() - t0, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
