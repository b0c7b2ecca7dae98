// A fake systemd notify socket for the systemd tests, and the daemon started the way the unit
// starts it (systemd/notify-exec.pl, then node in the same process).
//
// The receiver is a small python3 program: node cannot bind AF_UNIX datagram sockets, and python3
// can also report each datagram's SCM_CREDENTIALS, i.e. the pid the kernel saw send it, which is
// what systemd checks under NotifyAccess=main. (python3 is on the test machines; the daemon itself
// does not need it.)
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { repoRoot, startDaemon, type Daemon, type StartOptions } from '../kit/daemon.js';

export const notifyExec = path.join(repoRoot, 'systemd', 'notify-exec.pl');

const RECEIVER = String.raw`
import json, socket, struct, sys
name = sys.argv[1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("\0" + name[1:] if name.startswith("@") else name)
s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
print(json.dumps({"bound": name}), flush=True)
while True:
    data, anc, _, _ = s.recvmsg(65536, socket.CMSG_SPACE(12))
    pid = None
    for level, kind, raw in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
            pid = struct.unpack("iII", raw[:12])[0]
    print(json.dumps({"pid": pid, "data": data.decode("utf-8", "replace")}), flush=True)
`;

export interface Notification {
  /** The sender's pid as the kernel stamped it. */
  pid: number | null;
  raw: string;
  fields: Record<string, string>;
}

export class NotifyReceiver {
  readonly messages: Notification[] = [];
  private waiters: { pred: (m: Notification[]) => boolean; resolve: () => void }[] = [];
  private stderr = '';

  private constructor(
    readonly address: string,
    private readonly proc: ChildProcess,
  ) {}

  /** `address`: a path, or `@name` for the abstract namespace. Resolves once it is bound. */
  static start(address: string): Promise<NotifyReceiver> {
    const proc = spawn('python3', ['-c', RECEIVER, address], { stdio: ['ignore', 'pipe', 'pipe'] });
    const r = new NotifyReceiver(address, proc);
    return new Promise((resolve, reject) => {
      let buf = '';
      let bound = false;
      proc.stderr?.setEncoding('utf8').on('data', (c: string) => (r.stderr += c));
      proc.once('error', reject);
      proc.once('exit', (code) => {
        if (!bound) reject(new Error(`notify receiver exited (${code}): ${r.stderr}`));
      });
      proc.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
        buf += chunk;
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = JSON.parse(buf.slice(0, nl)) as { bound?: string; pid?: number | null; data?: string };
          buf = buf.slice(nl + 1);
          if (line.bound !== undefined) {
            bound = true;
            resolve(r);
            continue;
          }
          r.push({ pid: line.pid ?? null, raw: line.data ?? '', fields: parseFields(line.data ?? '') });
        }
      });
    });
  }

  /** Resolves once `pred` holds for the messages so far. */
  waitFor(pred: (messages: Notification[]) => boolean, what: string, timeoutMs = 60_000): Promise<void> {
    if (pred(this.messages)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`not received within ${timeoutMs} ms: ${what}; got ${JSON.stringify(this.messages.map((m) => m.raw))}`)),
        timeoutMs,
      );
      this.waiters.push({
        pred,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      });
    });
  }

  /** Index of the first message with `key=value` (value omitted: any), or -1. */
  indexOf(key: string, value?: string): number {
    return this.messages.findIndex((m) => m.fields[key] !== undefined && (value === undefined || m.fields[key] === value));
  }

  count(key: string, value?: string): number {
    return this.messages.filter((m) => m.fields[key] !== undefined && (value === undefined || m.fields[key] === value)).length;
  }

  close(): void {
    this.proc.kill('SIGKILL');
  }

  private push(m: Notification): void {
    this.messages.push(m);
    this.waiters = this.waiters.filter((w) => {
      if (!w.pred(this.messages)) return true;
      w.resolve();
      return false;
    });
  }
}

/** sd_notify's format: newline-separated KEY=VALUE. */
function parseFields(raw: string): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const line of raw.split('\n')) {
    const eq = line.indexOf('=');
    if (eq > 0) fields[line.slice(0, eq)] = line.slice(eq + 1);
  }
  return fields;
}

/**
 * Starts the daemon as browserd.service does: `perl notify-exec.pl node main.js` (one process:
 * perl execs node), with the given systemd variables. `viaWrapper: false` runs node directly.
 */
export function startUnderSystemd(
  opts: StartOptions & { systemdEnv: Record<string, string>; viaWrapper?: boolean },
): Promise<Daemon> {
  return startDaemon({
    ...opts,
    env: { ...opts.systemdEnv, ...opts.env },
    wrapper: opts.viaWrapper === false ? [] : ['perl', notifyExec],
  });
}
