// Proxy checks: the default check (BROWSERD_PROXY_CHECK_URLS in turn, the exit IP from the first
// answer that holds one) and the url check (the name looked up and guarded, then the pinned
// address). Both reach the proxy through the one dialer (upstream/dial.ts) the forwarding proxy uses. A run is keyed by (proxy, url): two checks of one proxy and one url (or both without
// url) at once share one run; checks with different urls are different runs. At most
// `maxConcurrentChecks` runs at once: the slot is taken before anything else, name lookups
// included, and one deadline covers the lookup and every phase of the tunnel.
import ipaddr from 'ipaddr.js';
import type { Config } from '../../core/config.js';
import type { Logger } from '../../core/log.js';
import type { Metrics } from '../../core/metrics.js';
import { OperationFailedError } from '../../core/errors.js';
import { Slots } from '../../core/slots.js';
import { bypasses } from '../store/bypass.js';
import type { Resolver } from './resolve.js';
import { resolveTarget, type CheckUrl, type GuardedTarget } from './ssrf.js';
import type { StoredProxy } from '../store/store.js';
import { CheckFailure, type CheckCause } from '../upstream/dial.js';
import { fetchThrough } from './tunnel.js';
import { upstreamFor, type Upstream } from '../upstream/upstream.js';

/** How much of a check URL's answer is read to find the exit IP. */
const CHECK_BODY_LIMIT_BYTES = 64 * 1024;

interface DefaultOutcome {
  available: boolean;
  /** The exit IP of the first answer that held one; null when none did. */
  ip: string | null;
  /** Why the proxy is unavailable (the last failure seen). */
  failure: { code: CheckCause; message: string } | null;
}

interface CheckerDeps {
  config: Config;
  log: Logger;
  metrics: Metrics;
  /** How a url check's host name is looked up. */
  resolver: Resolver;
}

export class ProxyChecker {
  private readonly running = new Map<string, Promise<unknown>>();
  /** One per run (not per caller: callers of one key share its run and its slot). */
  private readonly slots: Slots;
  private readonly stopping = new AbortController();
  private readonly stopReason = 'the daemon is stopping';

  /** The test build only (core/test-hooks.ts): direct url checks go to 127.0.0.1:<port>. */
  private readonly directToPort: number | undefined;

  constructor(private readonly deps: CheckerDeps) {
    this.directToPort = deps.config.testHooks.directToPort;
    this.slots = new Slots({ what: 'proxy checks', max: deps.config.proxies.maxConcurrentChecks });
  }

  /**
   * Runs `work` once per key at a time: a second caller with the same key gets the same promise.
   * A new key past the limit is refused with 429.
   */
  shared<T>(key: string, log: Logger, work: () => Promise<T>): Promise<T> {
    const existing = this.running.get(key);
    if (existing !== undefined) {
      log.debug({ event: 'proxy_check_joined', key }, 'joined a check of this proxy that is already running');
      return existing as Promise<T>;
    }
    const release = this.slots.take();
    let run: Promise<T>;
    try {
      run = work().finally(() => {
        this.running.delete(key);
        release();
      });
    } catch (err) {
      release();
      throw err;
    }
    this.running.set(key, run);
    return run;
  }

  /** Where the check of `proxy` connects; 422 provider_not_configured (counted and logged) when nowhere. */
  upstream(proxy: StoredProxy, log: Logger, kind: 'default' | 'url'): Upstream {
    try {
      return upstreamFor(proxy, this.deps.config.proxies.providers);
    } catch (err) {
      if (err instanceof OperationFailedError) this.record(log, proxy, kind, 'provider_not_configured', Date.now(), {});
      throw err;
    }
  }

  /** The default check through the proxy. */
  async checkDefault(proxy: StoredProxy, upstream: Upstream, log: Logger): Promise<DefaultOutcome> {
    const started = Date.now();
    const deadline = started + this.deps.config.proxies.checkTimeoutMs;
    let reached = false;
    let failure: DefaultOutcome['failure'] = null;
    for (const raw of this.deps.config.proxies.checkUrls) {
      const url = new URL(raw);
      const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
      try {
        const res = await fetchThrough(upstream, {
          url,
          connectHost: url.hostname.replace(/^\[|\]$/g, ''),
          port,
          deadline,
          signal: this.stopping.signal,
          bodyLimitBytes: CHECK_BODY_LIMIT_BYTES,
        });
        if (res.status < 200 || res.status > 299) {
          const who = res.viaProxyAnswer ? `the proxy (or ${url.host} through it)` : url.host;
          failure = { code: 'target_unreachable', message: `${who} answered ${res.status}${res.statusText ? ` ${res.statusText}` : ''} to ${url.href}` };
          continue;
        }
        reached = true;
        const ip = exitIp(res.body);
        if (ip !== null) return this.finishDefault(proxy, log, started, { available: true, ip, failure: null });
      } catch (err) {
        if (!(err instanceof CheckFailure)) throw err;
        failure = { code: err.code, message: err.message };
        if (err.atProxy) break;
      }
    }
    const none = { code: 'target_unreachable' as const, message: 'no check URL answered 2xx through the proxy' };
    return this.finishDefault(proxy, log, started, { available: reached, ip: null, failure: reached ? null : (failure ?? none) });
  }

  /**
   * A url check: the name is looked up and every address judged (400 when one is not public),
   * then the tunnel goes to the checked address. Resolves when the target answered with an HTTP
   * response, else 422 with the cause (a lookup that fails or runs out of time included).
   */
  async checkUrl(proxy: StoredProxy, upstream: Upstream, checkUrl: CheckUrl, log: Logger): Promise<void> {
    const started = Date.now();
    const deadline = started + this.deps.config.proxies.checkTimeoutMs;
    let target: GuardedTarget | null = null;
    let direct = false;
    try {
      target = await resolveTarget(checkUrl, this.deps.resolver, { deadline, signal: this.stopping.signal });
      // A host the browser reaches directly (bypass_hosts) is checked the same way: straight to the checked address.
      direct = bypasses(target.hostname, proxy.bypass_hosts);
      const res = await fetchThrough(direct ? null : upstream, {
        url: target.url,
        connectHost: target.address,
        port: target.port,
        deadline,
        signal: this.stopping.signal,
        bodyLimitBytes: 0,
        ...(this.directToPort !== undefined ? { directToPort: this.directToPort } : {}),
      });
      // In absolute-form the proxy answers for the target: its own failure to reach it (tinyproxy 500, squid 503, 502, 504) cannot be told from the target's 5xx.
      if (res.viaProxyAnswer && res.status >= 500) {
        throw new CheckFailure('target_unreachable', `the proxy answered ${res.status}${res.statusText ? ` ${res.statusText}` : ''} for ${checkUrl.url.host} (through an HTTP proxy a 5xx cannot be told from the proxy's failure to reach the target)`, false);
      }
    } catch (err) {
      if (!(err instanceof CheckFailure)) throw err;
      this.record(log, proxy, 'url', err.code, started, { target: checkUrl.url.host, address: target?.address, route: direct ? 'direct' : 'proxy', cause: err.message });
      throw new OperationFailedError('proxy_check_failed', `the check of ${checkUrl.url.host} through proxy ${proxy.id} failed`, {
        code: err.code,
        message: err.message,
      });
    }
    this.record(log, proxy, 'url', 'ok', started, { target: target.url.host, address: target.address, route: direct ? 'direct' : 'proxy' });
  }

  /** Cancels every running check (they fail with `timeout`) and waits for them. Idempotent. */
  async close(): Promise<void> {
    this.stopping.abort(this.stopReason);
    await Promise.allSettled([...this.running.values()]);
  }

  destroy(): void {
    this.stopping.abort(this.stopReason);
  }

  private finishDefault(proxy: StoredProxy, log: Logger, started: number, outcome: DefaultOutcome): DefaultOutcome {
    this.record(log, proxy, 'default', outcome.available ? 'available' : 'unavailable', started, {
      ip_address: outcome.ip ?? undefined,
      cause_code: outcome.failure?.code,
      cause: outcome.failure?.message,
    });
    return outcome;
  }

  /** One metric and one log line per check; never a username or password. */
  private record(log: Logger, proxy: StoredProxy, kind: 'default' | 'url', outcome: string, started: number, extra: Record<string, unknown>): void {
    this.deps.metrics.proxyChecks.inc({ outcome });
    log.info({ event: 'proxy_check', proxy_id: proxy.id, type: proxy.type, kind, outcome, ms: Date.now() - started, ...extra }, 'proxy check');
  }
}

/** The exit IP in a check URL's answer: the whole body as an IP address, or JSON with `ip`. */
function exitIp(body: Buffer): string | null {
  const text = body.toString('utf8').trim();
  const asIp = (s: unknown): string | null =>
    typeof s === 'string' && (ipaddr.IPv4.isValidFourPartDecimal(s) || ipaddr.IPv6.isValid(s)) ? ipaddr.process(s).toString() : null;
  const direct = asIp(text);
  if (direct !== null) return direct;
  try {
    const json = JSON.parse(text) as unknown;
    return typeof json === 'object' && json !== null ? asIp((json as Record<string, unknown>).ip) : null;
  } catch {
    return null;
  }
}
