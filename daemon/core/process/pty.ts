// The second way the daemon starts a child: on a pseudo-terminal (@lydell/node-pty, prebuilt
// binaries, loaded once at daemon start). The child leads its own session, and the terminal is its
// controlling terminal (forkpty: setsid + TIOCSCTTY), so pid = pgid = sid, Ctrl-C written as \x03
// reaches the foreground job and job control works. Its face matches launch.ts's Child: pid,
// pgid, exit, output (one stream: a terminal merges stdout and stderr), and an input whose write
// callbacks fire only once the kernel took the bytes.
//
// Why the input is not node-pty's write(): node-pty writes through a libuv TTY handle, which
// libuv keeps in blocking-write mode for a pty master (it cannot reopen one), and on the
// non-blocking master fd node-pty sets up that becomes a busy loop on EAGAIN: a child that does
// not read its terminal would freeze the daemon's event loop. PtyInput writes with write(2) on the
// non-blocking fd instead: what the kernel accepts is counted, the rest waits for a retry timer
// (the kernel offers no writable event for it here), and the callback fires once every byte is in
// the terminal's input queue. The fd is never touched after node-pty closed it (its number may
// belong to another file by then).
//
// Why the output is read once more before node-pty closes it: when the child has exited but the
// terminal has not closed within 200 ms (a grandchild holds it, or the daemon was not scheduled in
// time on a loaded machine), node-pty destroys its socket from a timer. libuv runs timers before it
// polls, so a daemon descheduled for longer would destroy the socket with the child's last output
// still unread in the kernel. The socket's destroy() therefore reads what the terminal holds first
// (non-blocking, until EAGAIN or EIO).
//
// Why the master is held open until the child's exit: a read of the master fails with EIO as soon
// as every process of the session closed its terminal fds, and node-pty then closes the master.
// Closing a master hangs the terminal up, and the kernel sends SIGHUP to the session it still
// controls. A program that closes its standard fds before it exits (coreutils' cat closes stdin,
// stdout and stderr on its way out) is between its last close() and its _exit() at that moment:
// the hang-up killed it, and it was reported as ended by SIGHUP instead of its exit code (about one
// run in five with cat and `hello\n^D` on an idle machine, more under load). So an EIO that comes
// while the child lives is held: reading stops, the master stays open, and the socket is destroyed
// (the output ends) once node-pty's waitpid reported the exit. A child that closed its terminal
// and goes on running is not hung up by the daemon; kill ends it as any other.
import { readSync, writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import { constants as osConstants } from 'node:os';
import { PassThrough, Writable, type Readable } from 'node:stream';
import type * as NodePty from '@lydell/node-pty';
import { argvAs, killGroupNow, SpawnError, type ExitInfo } from './launch.js';
import type { SwitchTo } from '../users.js';

export const PTY_PACKAGE = '@lydell/node-pty';
/** Retries of a write the terminal's full input queue refused: from 1 ms, doubling, at most this. */
const PTY_RETRY_MAX_MS = 25;

type PtyModule = typeof NodePty;
let ptyModule: PtyModule | null = null;

/** The PTY module cannot be loaded: the daemon does not start (exit 2, like a bad setting). */
export class PtyUnavailableError extends Error {
  constructor(
    readonly pkg: string,
    cause: unknown,
  ) {
    super(
      `${pkg} cannot be loaded, so no process could get a terminal (allocate_tty): ${(cause as Error)?.message ?? String(cause)}. ` +
        `Install the dependencies with npm ci (not --omit=optional: the binary for ${process.platform}-${process.arch} is an optional package).`,
      { cause },
    );
    this.name = 'PtyUnavailableError';
  }
}

/** Loads the native module now (at daemon start), so that a broken install fails the start, not a request. */
export function loadPty(pkg = PTY_PACKAGE): void {
  if (ptyModule !== null && pkg === PTY_PACKAGE) return;
  try {
    const mod = createRequire(import.meta.url)(pkg) as PtyModule;
    if (typeof mod?.spawn !== 'function') throw new Error('it exports no spawn()');
    ptyModule = mod;
  } catch (err) {
    throw new PtyUnavailableError(pkg, err);
  }
}

interface PtySpec {
  /** An absolute path (node-pty's child cannot report a failed exec other than by exit code 1). */
  command: string;
  args: readonly string[];
  env: Record<string, string>;
  cwd: string;
  cols: number;
  rows: number;
  /** Called synchronously once the child exists, before anything awaits; a throw ends the child (SIGKILL) and fails the launch. */
  onSpawn?(pid: number): void;
  /** Run as this user (launch.ts argvAs: through setpriv); needs root or CAP_SETUID and CAP_SETGID. */
  user?: SwitchTo;
}

interface PtyChild {
  readonly pid: number;
  /** = pid = sid: the child leads its own session and process group. */
  readonly pgid: number;
  readonly spawnedAt: Date;
  /** The terminal's input (the master side): write callbacks fire once the bytes are in the kernel. */
  readonly input: PtyInput;
  /** Everything the terminal prints (stdout and stderr of the session, and the echo). */
  readonly output: Readable;
  readonly exit: Promise<ExitInfo>;
  readonly exitInfo: ExitInfo | null;
  /** Resolves once the output has ended (the terminal closed). */
  readonly outputEnded: Promise<void>;
  /** Resolves if the session closed the terminal while the child lived: the master is then held open until the exit. */
  readonly closedBeforeExit: Promise<void>;
  readonly size: { rows: number; cols: number };
  /** TIOCSWINSZ (the kernel sends SIGWINCH to the foreground job); false once the terminal is closed. */
  resize(rows: number, cols: number): boolean;
}

/** node-pty's UnixTerminal: its master fd and the socket over it (not in its typings; checked at spawn). */
interface UnixTerminalInternals {
  fd: number;
  _socket: Readable;
  /** Set (true) by node-pty's exit callback when the exit comes before the socket closed. */
  _boundClose: boolean;
}

/** Reads what the terminal's master holds now (non-blocking fd) into `out`: until EAGAIN, EIO or end. */
function drainTerminal(fd: number, out: PassThrough): void {
  const buf = Buffer.allocUnsafe(64 * 1024);
  for (;;) {
    let n: number;
    try {
      n = readSync(fd, buf, 0, buf.length, null);
    } catch {
      return; // EAGAIN: nothing more now; EIO: the terminal closed
    }
    if (n <= 0) return;
    out.write(Buffer.from(buf.subarray(0, n)));
  }
}

/** The input side of a terminal; see the file comment. */
class PtyInput extends Writable {
  private unsent = 0;
  private timer: NodeJS.Timeout | null = null;
  /** The callback of the write waiting for room, failed if the input is destroyed first. */
  private waiting: ((err?: Error | null) => void) | null = null;

  constructor(
    private readonly fd: number,
    /** true once node-pty closed the fd. */
    private readonly isClosed: () => boolean,
  ) {
    super({ decodeStrings: true });
  }

  /** Bytes of the write in progress not yet taken by the kernel (as a socket handle's writeQueueSize). */
  get writeQueueSize(): number {
    return this.unsent;
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (err?: Error | null) => void): void {
    let offset = 0;
    let delay = 1;
    const attempt = (): void => {
      this.timer = null;
      this.waiting = null;
      if (this.isClosed()) {
        this.unsent = 0;
        return callback(Object.assign(new Error('the terminal is closed'), { code: 'EIO' }));
      }
      try {
        while (offset < chunk.length) offset += writeSync(this.fd, chunk, offset, chunk.length - offset);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EAGAIN') {
          this.unsent = chunk.length - offset;
          this.waiting = callback;
          this.timer = setTimeout(attempt, delay);
          delay = Math.min(delay * 2, PTY_RETRY_MAX_MS);
          return;
        }
        this.unsent = 0;
        return callback(err as Error);
      }
      this.unsent = 0;
      callback();
    };
    attempt();
  }

  override _final(callback: (err?: Error | null) => void): void {
    callback(); // a terminal has no one-way close: ending the input only stops writing
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    const waiting = this.waiting;
    this.waiting = null;
    this.unsent = 0;
    waiting?.(Object.assign(new Error('the terminal is closed'), { code: 'EIO' }));
    callback(err);
  }
}

const SIGNAL_NAMES = new Map<number, NodeJS.Signals>(Object.entries(osConstants.signals).map(([name, n]) => [n, name as NodeJS.Signals]));

/** Starts `spec.command` on a new terminal. Synchronous: the child exists when this returns. */
export function launchPty(spec: PtySpec): PtyChild {
  if (ptyModule === null) throw new Error(`${PTY_PACKAGE} was not loaded at start (loadPty)`);
  const argv = argvAs(spec);
  let term: NodePty.IPty;
  try {
    term = ptyModule.spawn(argv.command, argv.args, {
      name: spec.env.TERM ?? 'xterm-256color',
      cols: spec.cols,
      rows: spec.rows,
      cwd: spec.cwd,
      env: spec.env,
      encoding: null,
    });
  } catch (err) {
    throw new SpawnError(spec.command, (err as NodeJS.ErrnoException).code, err);
  }
  const pid = term.pid;
  const internals = term as unknown as UnixTerminalInternals;
  const socket = internals._socket;
  if (typeof internals.fd !== 'number' || typeof socket?.on !== 'function' || typeof internals._boundClose !== 'boolean') {
    killGroupNow(pid);
    throw new Error(`${PTY_PACKAGE} has changed: no master fd or socket on its terminal`);
  }
  try {
    spec.onSpawn?.(pid);
  } catch (err) {
    killGroupNow(pid);
    throw err;
  }
  // node-pty rethrows socket errors other than EIO unless a second listener is there.
  socket.on('error', () => {});
  const closed = (): boolean => socket.destroyed;
  const input = new PtyInput(internals.fd, closed);
  input.on('error', () => {});
  // The output: what the socket reads, then what the terminal still held when the socket was destroyed.
  const output = new PassThrough();
  socket.on('data', (d: Buffer) => output.write(d));
  const destroySocket = socket.destroy.bind(socket);
  // An EIO while the child lives is held until its exit (see the file comment): the read error
  // already stopped reading, and the master stays open.
  let childExited = false;
  let held: { err: Error } | null = null;
  let closedEarly!: () => void;
  const closedBeforeExit = new Promise<void>((resolve) => (closedEarly = resolve));
  socket.destroy = (err?: Error): Readable => {
    if (socket.destroyed) return destroySocket(err);
    if (!childExited && (err as NodeJS.ErrnoException | undefined)?.code === 'EIO') {
      if (held === null) closedEarly();
      held = { err: err as Error };
      return socket;
    }
    held = null;
    drainTerminal(internals.fd, output);
    return destroySocket(err);
  };
  // node-pty's waitpid callback sets _boundClose when the exit comes before the socket closed; it
  // then waits (at most 200 ms) for the socket's close before it reports the exit.
  let boundClose = internals._boundClose;
  Object.defineProperty(term, '_boundClose', {
    configurable: true,
    get: () => boundClose,
    set: (value: boolean) => {
      boundClose = value;
      childExited = true;
      if (held === null) return;
      const { err } = held;
      process.nextTick(() => socket.destroy(err));
    },
  });
  const outputEnded = new Promise<void>((resolve) => {
    output.once('end', () => resolve());
    if (socket.destroyed) output.end();
    else socket.once('close', () => output.end());
  });
  let exitInfo: ExitInfo | null = null;
  // node-pty reports the exit once the terminal closed (or 200 ms after the child's end).
  const exit = new Promise<ExitInfo>((resolve) => {
    term.onExit(({ exitCode, signal }) => {
      const sig = signal ? (SIGNAL_NAMES.get(signal) ?? null) : null;
      exitInfo = { code: sig === null ? exitCode : null, signal: sig, at: new Date() };
      input.destroy();
      resolve(exitInfo);
    });
  });
  const size = { rows: spec.rows, cols: spec.cols };
  return {
    pid,
    pgid: pid,
    spawnedAt: new Date(),
    input,
    output,
    exit,
    get exitInfo() {
      return exitInfo;
    },
    outputEnded,
    closedBeforeExit,
    size,
    resize(rows: number, cols: number): boolean {
      if (closed()) return false;
      term.resize(cols, rows);
      size.rows = rows;
      size.cols = cols;
      return true;
    },
  };
}
