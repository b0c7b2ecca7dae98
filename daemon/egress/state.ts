// The policy in force and where it is applied: the checker the forwarding proxy asks, the
// daemon's managed-policy file that pins Chromium to the forwarding proxy, and the nftables rules
// that hold the agent's processes to it. Changes apply one at a time (a serial queue), each
// written to the store first; a failure to write the Chromium file or install the rules is logged
// and shown in the answer, never hidden.
import path from 'node:path';
import { removeStaleTemps } from '../core/fs-atomic.js';
import type { Logger } from '../core/log.js';
import { SerialQueue } from '../core/serial-queue.js';
import { writePolicyFile } from '../chromium/settings/policies.js';
import { Checker } from './checker.js';
import type { Nftables, ProcessesStatus, Service } from './nftables.js';
import type { EgressPolicy } from './policy.js';
import type { PolicyStore } from './store.js';

/** The daemon's managed-policy file of the egress policy, beside its other one (chromium/settings/policies.ts). */
export const EGRESS_POLICY_FILE = 'browserd-egress.json';

export interface StateDeps {
  store: PolicyStore;
  nft: Nftables;
  policyDir: string;
  /** The agent user's uid: Chromium's and the processes'. */
  uid: number;
  log: Logger;
  /** The forwarding proxy's port on 127.0.0.1 (null before it listens). */
  forwarderPort(): number | null;
  /** The loopback services the agent's sockets may reach besides the forwarding proxy (the API). */
  services(): Service[];
  /** A new policy is in force: connections opened under the old one end. */
  onChange(): void;
}

/** The managed policies that pin Chromium to the forwarding proxy. */
export function chromiumPolicies(port: number): Record<string, unknown> {
  return {
    // Managed policy outranks the command line and extensions (chrome.proxy): the forwarding proxy stays the only way out.
    ProxySettings: { ProxyMode: 'fixed_servers', ProxyServer: `http://127.0.0.1:${port}`, ProxyBypassList: '<-loopback>' },
    // WebRTC's UDP goes around any HTTP proxy: only proxied candidates.
    WebRtcIPHandling: 'disable_non_proxied_udp',
    // No resolver of Chromium's own: names go to the forwarding proxy, which resolves and judges them.
    DnsOverHttpsMode: 'off',
  };
}

export class EgressState {
  private checker: Checker;
  private processes: ProcessesStatus = { state: 'not filtered' };
  private readonly queue = new SerialQueue();

  constructor(private readonly deps: StateDeps) {
    this.checker = new Checker(deps.store.get());
    removeStaleTemps(deps.policyDir, EGRESS_POLICY_FILE);
  }

  get current(): Checker {
    return this.checker;
  }

  get policyFile(): string {
    return path.join(this.deps.policyDir, EGRESS_POLICY_FILE);
  }

  /** Writes the policy (store first), then applies it. */
  set(policy: EgressPolicy, log: Logger): Promise<void> {
    return this.queue.run(async () => {
      await this.deps.store.set(policy);
      this.checker = new Checker(policy);
      this.deps.onChange();
      log.info({ event: 'egress_policy_set', filtered: policy.filtered, allowed_hosts: policy.allowed_hosts.length, allow_private: policy.allow_private.length, blocked_hosts: policy.blocked_hosts.length }, 'egress policy changed');
      await this.applyLocked(log);
    });
  }

  /** Applies the stored policy again (at start, once the ports are known). */
  apply(): Promise<void> {
    return this.queue.run(() => this.applyLocked(this.deps.log));
  }

  private async applyLocked(log: Logger): Promise<void> {
    const { filtered } = this.checker.policy;
    const port = this.deps.forwarderPort();
    try {
      await writePolicyFile(this.deps.policyDir, filtered && port !== null ? chromiumPolicies(port) : {}, EGRESS_POLICY_FILE);
    } catch (err) {
      log.error({ event: 'egress_chromium_policy_failed', file: this.policyFile, err }, "the egress policy's managed-policy file could not be written: Chromium stays pinned by its --proxy-server flag only");
    }
    if (!filtered) {
      const err = await this.deps.nft.remove();
      if (err !== null && this.processes.state === 'enforced') log.error({ event: 'egress_nftables_remove_failed', err }, 'the nftables rules of the agent user could not be removed');
      this.processes = { state: 'not filtered' };
      return;
    }
    const services: Service[] = [...(port !== null ? [{ address: '127.0.0.1', port }] : []), ...this.deps.services()];
    this.processes = await this.deps.nft.install(this.deps.uid, services);
    if (this.processes.state === 'not enforced') {
      log.warn({ event: 'egress_processes_not_enforced', reason: this.processes.reason }, `the egress policy holds the browser, but not the agent's processes: ${this.processes.reason}`);
    } else {
      log.info({ event: 'egress_processes_enforced', uid: this.deps.uid, services }, "nftables rules hold the agent user's sockets to the forwarding proxy");
    }
  }

  answer(): Record<string, unknown> {
    const p = this.checker.policy;
    return {
      ...p,
      browser: p.filtered ? 'enforced' : 'not filtered',
      processes: this.processes.state,
      ...(this.processes.state === 'not enforced' ? { processes_reason: this.processes.reason } : {}),
      chromium_policy_file: this.policyFile,
    };
  }

  /** The proxy variables of a process the API starts while filtered (none otherwise). */
  processEnv(): Record<string, string> {
    const port = this.deps.forwarderPort();
    if (!this.checker.policy.filtered || port === null) return {};
    const proxy = `http://127.0.0.1:${port}`;
    const noProxy = 'localhost,127.0.0.1,::1';
    return { HTTP_PROXY: proxy, HTTPS_PROXY: proxy, ALL_PROXY: proxy, NO_PROXY: noProxy, http_proxy: proxy, https_proxy: proxy, all_proxy: proxy, no_proxy: noProxy };
  }

  close(): Promise<void> {
    return this.queue.drain();
  }
}
