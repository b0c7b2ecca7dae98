// One daemon per state dir: an exclusive flock(2) on <state>/browserd.lock for the daemon's whole
// life. The kernel releases it when the daemon's descriptor closes — at exit, however it ends (kill
// -9 included) — so a stale lock cannot exist. Node has no flock binding: the lock is taken by
// util-linux's flock(1) (Essential on Debian) on a descriptor the daemon opened and hands down; a
// flock belongs to the open file description, which the daemon keeps open, so it outlives the
// helper. The descriptor is close-on-exec: no child inherits it.
import { spawnSync } from 'node:child_process';
import { closeSync, ftruncateSync, openSync, readFileSync, writeSync } from 'node:fs';
import path from 'node:path';

const LOCK_FILE = 'browserd.lock';

/** The state dir is held by another daemon. */
export class StateDirLockedError extends Error {
  constructor(
    readonly lockFile: string,
    readonly holderPid: number | null,
  ) {
    super(`${lockFile} is locked by another browserd${holderPid !== null ? ` (pid ${holderPid})` : ''}: one daemon per state dir`);
    this.name = 'StateDirLockedError';
  }
}

interface StateLock {
  file: string;
  /** Releases the lock (exit does it too). Idempotent. */
  release(): void;
}

/** Takes the lock or throws StateDirLockedError (or an Error when flock(1) cannot run). */
export function lockStateDir(stateDir: string): StateLock {
  const file = path.join(stateDir, LOCK_FILE);
  const fd = openSync(file, 'a+', 0o600);
  const r = spawnSync('flock', ['--exclusive', '--nonblock', '3'], { stdio: ['ignore', 'ignore', 'pipe', fd], timeout: 10_000 });
  if (r.error !== undefined || (r.status !== 0 && r.status !== 1)) {
    closeSync(fd);
    const why = r.error?.message ?? `flock exited ${r.status ?? r.signal}: ${r.stderr.toString().trim()}`;
    throw new Error(`cannot lock ${file}: ${why} (browserd needs flock from util-linux)`);
  }
  if (r.status === 1) {
    closeSync(fd);
    const holder = Number(readFileSync(file, 'utf8').trim());
    throw new StateDirLockedError(file, Number.isInteger(holder) && holder > 0 ? holder : null);
  }
  ftruncateSync(fd, 0);
  writeSync(fd, `${process.pid}\n`, 0);
  let released = false;
  return {
    file,
    release() {
      if (released) return;
      released = true;
      closeSync(fd);
    },
  };
}
