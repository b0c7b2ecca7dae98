// The native module dist/daemon/sock-diag.node (native/sock-diag.c, built by scripts/native.mjs):
// the owner of one TCP socket, asked of the kernel by the connection's exact 4-tuple over the
// sock_diag netlink interface — a hash lookup, microseconds, whatever the number of sockets. The
// forwarding proxy's peer check (peer.ts) uses it, and falls back to /proc/net/tcp without it.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

export interface SocketOwners {
  /** The uid owning the socket whose own end is local:localPort and other end remote:remotePort; -1 when none. Throws when the interface fails. */
  uidOf(local: string, localPort: number, remote: string, remotePort: number): number;
}

/** Where the module is: beside the bundle (dist/daemon/browserd.js), or two folders up from tsc's output of this file. */
const CANDIDATES = ['./sock-diag.node', '../../sock-diag.node'];

/** The module, or why it cannot be had (not built, or it does not load in this Node). */
export function loadSocketOwners(): { owners: SocketOwners } | { owners: null; why: string } {
  const file = CANDIDATES.map((c) => fileURLToPath(new URL(c, import.meta.url))).find((f) => existsSync(f));
  if (file === undefined) return { owners: null, why: 'dist/daemon/sock-diag.node was not built (no C compiler at build time)' };
  try {
    const mod = createRequire(import.meta.url)(file) as Partial<SocketOwners>;
    if (typeof mod.uidOf !== 'function') return { owners: null, why: `${file} has no uidOf` };
    return { owners: mod as SocketOwners };
  } catch (err) {
    return { owners: null, why: `${file} does not load: ${(err as Error).message}` };
  }
}
