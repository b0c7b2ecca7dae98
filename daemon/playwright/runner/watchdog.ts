// The runner never outlives the daemon: a worker thread (its own event loop, so a `while (true)`
// in the code does not stop it) checks every half second that the runner's parent is still the
// daemon that started it, and otherwise kills the runner's whole process group. The daemon's own
// stop ends its runners directly; this covers a daemon killed with SIGKILL.
import { Worker } from 'node:worker_threads';

const WATCHDOG = `
const { workerData } = require('node:worker_threads');
setInterval(() => {
  if (process.ppid === workerData) return;
  try { process.kill(-process.pid, 'SIGKILL'); } catch {}
  process.kill(process.pid, 'SIGKILL');
}, 500);
`;

export function startOrphanWatchdog(): void {
  const worker = new Worker(WATCHDOG, { eval: true, workerData: process.ppid, env: {}, stdout: true, stderr: true });
  worker.on('error', () => {});
  worker.unref();
}
