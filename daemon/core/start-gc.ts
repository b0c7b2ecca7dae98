// One full garbage collection shortly after the start, so that the daemon idles at the memory it
// needs rather than at the high-water mark of its start.
//
// Why: the start allocates a lot that is garbage once it is over (the bundle's top-level code, the
// route schemas being built, settings and stores parsed), and V8 grows its young generation for it
// (16 MiB reserved, 7 MiB resident at idle). Left alone, V8 keeps it: no major collection happens
// while the daemon idles, and its memory reducer only runs after one (86 MiB RSS still after 12 s).
// A plain major collection does not shrink the young generation either; V8's memory-reducing one
// does (gc's `last-resort` flavour, what V8 runs under memory pressure): young generation 7.1 → 0.3
// MiB resident, idle RSS 86 → 77 MiB (bench 7's measure). Its cost: one pause of the main thread,
// 70–200 ms measured on a 2-core machine at load 15–20, once, a second after `listening`.
//
// V8's collector is reached the usual way: `--expose-gc` set at run time, then `gc` taken from a
// fresh context (the flag is unset again at once, so the daemon's own global never has gc()).
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** How long after `listening` the collection runs (the start's own work has settled by then). */
export const START_GC_DELAY_MS = 1000;

type GcFunction = (opts?: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

/** Runs one major collection; its duration in ms, or null when V8's collector cannot be reached. */
export function collectNow(): number | null {
  let gc: GcFunction;
  try {
    setFlagsFromString('--expose-gc');
    gc = runInNewContext('gc') as GcFunction;
  } catch {
    return null;
  } finally {
    setFlagsFromString('--no-expose-gc');
  }
  if (typeof gc !== 'function') return null;
  const t0 = performance.now();
  gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  return performance.now() - t0;
}

/** Schedules the collection START_GC_DELAY_MS from now; the timer keeps nothing alive. */
export function collectAfterStart(done: (ms: number | null) => void): void {
  setTimeout(() => done(collectNow()), START_GC_DELAY_MS).unref();
}
