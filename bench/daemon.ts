// The processes a benchmark runs besides Chromium: the daemon, on the kit's launcher (its own
// process group and temp state dir, log level info; cleanup() ends it, anything left on its state
// dir, and removes the dir), and peer servers: node programs in their own group that print
// `{"event":"listening","port":N}`. Both are registered with the kit's cleanup registry.
import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { checkRunning, onCleanup } from '../test/kit/cleanup.js';
import { startDaemon as startKitDaemon, type Daemon, type StartOptions } from '../test/kit/daemon.js';
import { signalGroup } from '../test/kit/procs.js';
import { exitOf } from '../test/kit/wait.js';

export { TEST_TOKEN, type Daemon, type LogLine } from '../test/kit/daemon.js';

/** The daemon (no Chromium unless `autostart`), listening. */
export function startDaemon(opts: Pick<StartOptions, 'env' | 'autostart'> = {}): Promise<Daemon> {
  // BROWSERD_BENCH_NODE_OPTIONS (e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`): the daemon's NODE_OPTIONS, to profile it under a benchmark.
  const nodeOptions = process.env.BROWSERD_BENCH_NODE_OPTIONS;
  const env = nodeOptions === undefined ? opts.env : { ...opts.env, NODE_OPTIONS: nodeOptions };
  return startKitDaemon({ ...opts, env, detached: true, logLevel: 'info', keepLogs: 5000, prefix: 'browserd-bench-' });
}

export interface PeerServer {
  port: number;
  pid: number;
  /** ms from the spawn to its `listening` line. */
  readyMs: number;
  stop(): Promise<void>;
}

/** Runs `node …args` (its own process group) until it prints its port; `stop()` kills its group. */
export async function startPeerServer(args: string[]): Promise<PeerServer> {
  checkRunning();
  const t0 = performance.now();
  const proc = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'], detached: true });
  const pid = proc.pid as number;
  const exited = exitOf(proc);
  const kill = async (): Promise<void> => {
    signalGroup(pid, 'SIGKILL');
    await exited;
  };
  const unregister = onCleanup(kill);
  try {
    const port = await new Promise<number>((resolve, reject) => {
      let buf = '';
      proc.stdout?.setEncoding('utf8').on('data', (c: string) => {
        buf += c;
        const m = /"port":(\d+)/.exec(buf);
        if (m) resolve(Number(m[1]));
      });
      void exited.then(() => reject(new Error(`node ${args.join(' ').slice(0, 80)} exited before listening`)));
    });
    return {
      port,
      pid,
      readyMs: performance.now() - t0,
      stop: async () => {
        unregister();
        await kill();
      },
    };
  } catch (err) {
    unregister();
    await kill();
    throw err;
  }
}
