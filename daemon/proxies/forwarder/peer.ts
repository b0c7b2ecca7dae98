// Who is on the other end of a loopback connection: the uid owning the peer's socket. The forwarding
// proxy accepts a connection only when the peer's socket belongs to the agent user's uid (Chromium
// runs as that uid, BROWSERD_AGENT_USER); any other local user's connection is closed unanswered,
// so the forwarder is no relay for them. The uid of a socket is the effective uid of the process
// that created it; the peer's socket is the one whose own end is the connection's remote address
// and whose other end is the connection's local address (both with ports).
//
// Two ways to ask the kernel, both exact (no cache, nothing that could go stale):
// - sock_diag (sock-diag.ts, a native module): one netlink request for that 4-tuple, answered from
//   the kernel's connection hash; ~20 µs. Used whenever the module is built and the kernel answers.
// - /proc/net/tcp and /proc/net/tcp6, the fallback. The kernel generates these files by walking
//   its whole established hash (every bucket, empty or not: ~4 ms per full read on the test machine
//   with 262,144 buckets and 100 sockets; more with many TIME_WAIT sockets), a page of text per
//   read. So reads are shared and stop early (TableReader): lookups that arrive while a pass over
//   the table runs are answered from it, the pass ends as soon as every waiting lookup is answered,
//   and a connection not found in a pass that began before it was accepted is looked for again in
//   the next pass. A client socket of family AF_INET6 that connected to an IPv4 address is listed in
//   tcp6 with IPv4-mapped addresses, so tcp6 is read when tcp has no entry.
// No entry (the peer already closed, or neither way works) means no uid: refused.
import { open } from 'node:fs/promises';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { loadSocketOwners, type SocketOwners } from './sock-diag.js';

const PROC_TABLES = ['/proc/net/tcp', '/proc/net/tcp6'] as const;

export interface Endpoint {
  address: string;
  port: number;
}

/** The 4 bytes of an IPv4 address as /proc prints them: one 32-bit word in host order (little-endian here), `%08X`. */
function hexWords(bytes: number[]): string {
  let out = '';
  for (let i = 0; i < bytes.length; i += 4) {
    for (let j = 3; j >= 0; j--) out += (bytes[i + j] as number).toString(16).padStart(2, '0');
  }
  return out.toUpperCase();
}

function ipv4Bytes(address: string): number[] {
  return address.split('.').map(Number);
}

function ipv6Bytes(address: string): number[] | null {
  // Canonical expansion through the URL parser, then the eight groups.
  let host: string;
  try {
    host = new URL(`http://[${address}]/`).hostname.slice(1, -1);
  } catch {
    return null;
  }
  const [head, tail] = host.includes('::') ? (host.split('::') as [string, string]) : [host, ''];
  const h = head === '' ? [] : head.split(':');
  const t = tail === '' ? [] : tail.split(':');
  const groups = [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  return groups.flatMap((g) => {
    const n = parseInt(g, 16);
    return [n >> 8, n & 0xff];
  });
}

/**
 * The spellings of `address:port` in /proc/net/tcp{,6} (`0100007F:1F90`): IPv4 in tcp, and in
 * tcp6 as IPv4-mapped; IPv6 (an IPv4-mapped one also as its IPv4) likewise.
 */
function procSpellings(ep: Endpoint): string[] {
  const port = ep.port.toString(16).toUpperCase().padStart(4, '0');
  let v4: number[] | null = null;
  let v6: number[] | null = null;
  if (net.isIPv4(ep.address)) {
    v4 = ipv4Bytes(ep.address);
  } else {
    v6 = ipv6Bytes(ep.address);
    if (v6 !== null && v6.slice(0, 10).every((b) => b === 0) && v6[10] === 0xff && v6[11] === 0xff) v4 = v6.slice(12);
  }
  const out: string[] = [];
  if (v4 !== null) {
    out.push(`${hexWords(v4)}:${port}`);
    out.push(`${hexWords([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, ...v4])}:${port}`);
  }
  if (v6 !== null) out.push(`${hexWords(v6)}:${port}`);
  return [...new Set(out)];
}

/** One socket line of /proc/net/tcp{,6} (`sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid …`); null for the header or a short line. */
function socketLine(line: string): { local: string; remote: string; uid: number | null } | null {
  const f = line.trim().split(/\s+/);
  if (f.length < 8 || !(f[0] as string).endsWith(':')) return null;
  const uid = Number(f[7]);
  return { local: f[1] as string, remote: f[2] as string, uid: Number.isInteger(uid) ? uid : null };
}

interface Waiting {
  locals: Set<string>;
  remotes: Set<string>;
  acceptedAt: number;
  resolve(uid: number | null): void;
}

/** Reads one table in passes; each pass answers every lookup that waits on it, and stops once none waits. */
class TableReader {
  private queued: Waiting[] = [];
  private running: { started: number; waiting: Waiting[] } | null = null;

  constructor(private readonly file: string) {}

  lookup(peer: Endpoint, us: Endpoint, acceptedAt: number): Promise<number | null> {
    return new Promise((resolve) => {
      const w: Waiting = { locals: new Set(procSpellings(peer)), remotes: new Set(procSpellings(us)), acceptedAt, resolve };
      if (this.running !== null) {
        this.running.waiting.push(w);
      } else {
        this.queued.push(w);
        void this.pass();
      }
    });
  }

  private async pass(): Promise<void> {
    const run = { started: performance.now(), waiting: this.queued.splice(0) };
    this.running = run;
    const buf = Buffer.alloc(READ_CHUNK_BYTES);
    let rest = '';
    const scan = (line: string): void => {
      const socket = socketLine(line);
      if (socket === null) return;
      const hits = run.waiting.filter((w) => w.locals.has(socket.local) && w.remotes.has(socket.remote));
      if (hits.length === 0) return;
      run.waiting = run.waiting.filter((w) => !hits.includes(w));
      for (const w of hits) w.resolve(socket.uid);
    };
    try {
      const fh = await open(this.file, 'r');
      try {
        // Stops as soon as every lookup is answered: the kernel generates the rest only when read.
        while (run.waiting.length > 0) {
          const { bytesRead } = await fh.read(buf, 0, buf.length, null);
          if (bytesRead === 0) break;
          const lines = (rest + buf.toString('latin1', 0, bytesRead)).split('\n');
          rest = lines.pop() ?? '';
          for (const line of lines) scan(line);
        }
        if (rest !== '') scan(rest);
      } finally {
        await fh.close();
      }
    } catch {
      // No table (no /proc): nobody is found.
    }
    this.running = null;
    // Not found: final for a connection older than this pass; a newer one may be in the part already read.
    for (const w of run.waiting) {
      if (w.acceptedAt <= run.started) w.resolve(null);
      else this.queued.push(w);
    }
    if (this.queued.length > 0) void this.pass();
  }
}

/** How much of a table is asked for at once (the kernel hands out about a page per read anyway). */
const READ_CHUNK_BYTES = 64 * 1024;

export interface PeerLookupOptions {
  /** The /proc tables of the fallback. */
  tables?: readonly string[];
  /** The sock_diag module; default: loaded (sock-diag.ts); null: the /proc tables only. */
  owners?: SocketOwners | null;
  /** Told once when sock_diag fails at run time and the /proc tables take over. */
  onFallback?: (why: string) => void;
}

/**
 * The uid owning the other end of a loopback connection: by sock_diag when it can, else from the
 * /proc tables with shared, early-stopping reads (one pass of a table serves every lookup waiting
 * while it runs and ends as soon as all of them are answered). One instance per server.
 */
export class PeerLookup {
  private readonly readers: TableReader[];
  private owners: SocketOwners | null;
  /** How lookups are made now: 'sock_diag' or 'proc'. */
  method: 'sock_diag' | 'proc';
  /** Why not by sock_diag (null when it is). */
  fallbackReason: string | null = null;

  constructor(private readonly opts: PeerLookupOptions = {}) {
    this.readers = (opts.tables ?? PROC_TABLES).map((t) => new TableReader(t));
    if (opts.owners !== undefined) {
      this.owners = opts.owners;
      if (opts.owners === null) this.fallbackReason = 'sock_diag not used';
    } else {
      const loaded = loadSocketOwners();
      this.owners = loaded.owners;
      if (loaded.owners === null) this.fallbackReason = loaded.why;
    }
    this.method = this.owners === null ? 'proc' : 'sock_diag';
  }

  /** The uid owning the other end of `socket`, accepted at `acceptedAt` (performance.now()); null when not found. */
  async uidOf(socket: net.Socket, acceptedAt: number): Promise<number | null> {
    const { remoteAddress, remotePort, localAddress, localPort } = socket;
    if (remoteAddress === undefined || remotePort === undefined || localAddress === undefined || localPort === undefined) return null;
    if (this.owners !== null) {
      try {
        // The peer's socket: its own end is our remote end.
        const uid = this.owners.uidOf(remoteAddress, remotePort, localAddress, localPort);
        return uid < 0 ? null : uid;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ERR_INVALID_ARG') {
          // The interface itself failed (e.g. a kernel without inet_diag): the tables from now on.
          this.owners = null;
          this.method = 'proc';
          this.fallbackReason = (err as Error).message;
          this.opts.onFallback?.(this.fallbackReason);
        }
        // An address the module cannot ask about (not the forwarder's own IPv4 loopback): the tables, this once.
      }
    }
    for (const reader of this.readers) {
      const uid = await reader.lookup({ address: remoteAddress, port: remotePort }, { address: localAddress, port: localPort }, acceptedAt);
      if (uid !== null) return uid;
    }
    return null;
  }
}
