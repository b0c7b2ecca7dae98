// The runner never outlives the daemon: a worker thread (its own event loop, so a `while (true)`
// in the code does not stop it) checks every half second that the runner's parent is still the
// daemon that started it, and otherwise removes the runner's own TMPDIR (the daemon that would
// have removed it is gone) and kills the runner's whole process group. The daemon's own stop ends
// its runners directly; this covers a daemon killed with SIGKILL.
import { Worker } from 'node:worker_threads';

const WATCHDOG = `
const { workerData } = require('node:worker_threads');
const { rmSync } = require('node:fs');
setInterval(() => {
  if (process.ppid === workerData.ppid) return;
  if (workerData.tmp) try { rmSync(workerData.tmp, { recursive: true, force: true }); } catch {}
  try { process.kill(-process.pid, 'SIGKILL'); } catch {}
  process.kill(process.pid, 'SIGKILL');
}, 500);
`;

/** The runner's TMPDIR, when it is the one the daemon made for it (never a folder it did not make). */
function ownTmp(): string | null {
  const tmp = process.env.TMPDIR;
  return tmp !== undefined && /\/browserd-runner-[^/]+$/.test(tmp) ? tmp : null;
}

export function startOrphanWatchdog(): void {
  const worker = new Worker(WATCHDOG, { eval: true, workerData: { ppid: process.ppid, tmp: ownTmp() }, env: {}, stdout: true, stderr: true });
  worker.on('error', () => {});
  worker.unref();
}
