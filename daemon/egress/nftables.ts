// The agent's processes under the policy: nftables rules keyed on the agent user's uid (`meta
// skuid`) in a table of the daemon's own, `inet browserd_egress`. While the policy is filtered,
// a socket of that uid may send only
//   - to the loopback services the daemon names (its forwarding proxy, its API when it listens on
//     loopback: the Playwright runners connect there), by address and port;
//   - packets of connections already allowed, or that reach the agent from outside (a server the
//     agent runs answers: conntrack `established,related`);
// and everything else is rejected at once (TCP reset, ICMP unreachable: no hang). So Chromium and
// every process of the agent reach the world only through the forwarding proxy, where the policy
// is judged; the processes the API starts get the proxy variables for that (index.ts).
// The table is replaced whole in one nft transaction (never a moment without rules), and removed
// when the policy is not filtered. It stays when the daemon stops: the agent then has no way out
// until the next start installs the rules with the new ports (fails closed).
// Without nft on PATH, or without CAP_NET_ADMIN, nothing is installed and the policy's answer says
// `processes: "not enforced"` with why.
import { launch, killGroupNow } from '../core/process/launch.js';
import { findOnPath, DEFAULT_PATH } from '../core/which.js';

export const NFT_TABLE = 'browserd_egress';
/** How long one nft run may take. */
const NFT_TIMEOUT_MS = 10_000;

export interface Service {
  address: string;
  port: number;
}

export type ProcessesStatus = { state: 'enforced' } | { state: 'not enforced'; reason: string } | { state: 'not filtered' };

/** The ruleset text of the table for `uid` (the agent user) and the loopback `services` it may reach. */
export function ruleset(uid: number, services: readonly Service[]): string {
  const lines = [
    `table inet ${NFT_TABLE} {`,
    '  chain output {',
    '    type filter hook output priority 0; policy accept;',
    `    meta skuid != ${uid} accept`,
    '    ct state established,related accept',
  ];
  for (const s of services) {
    const family = s.address.includes(':') ? 'ip6' : 'ip';
    lines.push(`    ${family} daddr ${s.address} tcp dport ${s.port} accept`);
  }
  lines.push('    meta l4proto tcp reject with tcp reset', '    reject', '  }', '}');
  return lines.join('\n');
}

/** Runs nft with `script` on stdin (the daemon's launcher); resolves with why it failed, null on success. */
async function nft(bin: string, script: string): Promise<string | null> {
  let child;
  try {
    child = await launch({ command: bin, args: ['-f', '-'], env: { PATH: process.env.PATH || DEFAULT_PATH } });
  } catch (err) {
    return (err as Error).message;
  }
  let err = '';
  child.stdout.resume();
  child.stderr.setEncoding('utf8').on('data', (c: string) => (err = (err + c).slice(-2000)));
  child.stdin?.end(script);
  const timer = setTimeout(() => killGroupNow(child.pgid), NFT_TIMEOUT_MS);
  const exit = await child.exit;
  clearTimeout(timer);
  await child.outputEnded;
  if (exit.code === 0) return null;
  return err.trim() || `nft exited with ${exit.code ?? exit.signal}`;
}

export class Nftables {
  private readonly bin: string | null;

  constructor(private readonly mode: 'auto' | 'off') {
    this.bin = mode === 'off' ? null : findOnPath('nft', process.env.PATH || DEFAULT_PATH);
  }

  /** Installs (replaces) the table for `uid`; the status says whether it holds. */
  async install(uid: number, services: readonly Service[]): Promise<ProcessesStatus> {
    if (this.mode === 'off') return { state: 'not enforced', reason: 'BROWSERD_EGRESS_NFTABLES=false' };
    if (this.bin === null) return { state: 'not enforced', reason: 'nft is not installed (apt-get install nftables)' };
    // `add` then `delete` makes the delete succeed whether or not the table was there; all one transaction.
    const err = await nft(this.bin, `add table inet ${NFT_TABLE}\ndelete table inet ${NFT_TABLE}\n${ruleset(uid, services)}\n`);
    if (err === null) return { state: 'enforced' };
    const reason = /Operation not permitted|EPERM/i.test(err) ? `nft may not change the rules (no CAP_NET_ADMIN): ${err}` : `nft failed: ${err}`;
    return { state: 'not enforced', reason };
  }

  /** Removes the table (not filtered); null on success, else why. */
  async remove(): Promise<string | null> {
    if (this.bin === null) return null;
    return nft(this.bin, `add table inet ${NFT_TABLE}\ndelete table inet ${NFT_TABLE}\n`);
  }
}
