// What the tests and benchmarks leave behind, and when it goes: a registry of cleanups (every
// daemon, Chromium or peer a caller starts registers its stop; the benchmark runner runs them after
// each benchmark and on Ctrl-C), and temp folders, each registered there and also removed when the
// process exits (a test file's folders go after every hook of the file, its daemons stopped).
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

type Cleanup = () => Promise<void> | void;
const cleanups = new Set<Cleanup>();
let interrupted = false;

/** Registers `fn` to run at the next runCleanups() unless unregistered first; returns the unregister. */
export function onCleanup(fn: Cleanup): () => void {
  cleanups.add(fn);
  return () => cleanups.delete(fn);
}

/** Runs every registered cleanup (newest first) until none is left. */
export async function runCleanups(): Promise<void> {
  while (cleanups.size > 0) {
    for (const fn of [...cleanups].reverse()) {
      cleanups.delete(fn);
      try {
        await fn();
      } catch (err) {
        process.stderr.write(`cleanup failed: ${(err as Error).message}\n`);
      }
    }
  }
}

/** After a signal: nothing new may be started (its cleanup could be missed). */
export function interrupt(): void {
  interrupted = true;
}

/** Throws once the run was interrupted; called before every spawn of the kit and its callers. */
export function checkRunning(): void {
  if (interrupted) throw new Error('interrupted');
}

/** Temp folders not removed yet: whatever is left goes when the process exits. */
const made = new Set<string>();
process.on('exit', () => {
  for (const dir of made) {
    rmSync(dir, { recursive: true, force: true });
    for (const agent of [`${dir}-a`, `${dir}-agent`]) rmSync(agent, { recursive: true, force: true }); // see tempDir()
  }
});

function remove(dir: string): void {
  made.delete(dir);
  rmSync(dir, { recursive: true, force: true });
}

/** A new temp folder, removed by runCleanups() or at the latest when the process exits. */
export function tempDir(prefix = 'browserd-test-'): string {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  made.add(dir);
  // With it, the agent's folder a daemon (kit: `-a`) or loadConfig() (BROWSERD_AGENT_DIR's default `-agent`) makes beside a state dir here.
  onCleanup(() => {
    remove(dir);
    remove(`${dir}-a`);
    remove(`${dir}-agent`);
  });
  return dir;
}

/** A temp root; each call of the result gives a new empty folder in it (`case-0`, `case-1`, …). */
export function scratchDirs(prefix: string): () => string {
  const root = tempDir(prefix);
  let n = 0;
  return () => {
    const d = path.join(root, `case-${n++}`);
    mkdirSync(d, { recursive: true });
    return d;
  };
}
