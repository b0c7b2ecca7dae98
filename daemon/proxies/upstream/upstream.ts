// Where a check connects: a custom proxy is its own host; a managed type (datacenter, isp,
// residential, mobile) goes through the gateway of BROWSERD_PROXY_PROVIDERS_FILE for its type,
// with the targeting in the username.
import type { ManagedProxyType, ProxyGateway } from '../../core/config.js';
import { OperationFailedError } from '../../core/errors.js';
import type { StoredProxy } from '../store/store.js';

export interface Upstream {
  host: string;
  port: number;
  /** https: TLS to the proxy (verified against `ca`, else the system CAs). */
  protocol: 'http' | 'https';
  /** Basic proxy auth is sent when a username is set. */
  username?: string;
  password?: string;
  /** PEM trust anchors for TLS to the proxy. */
  ca?: string;
}

/**
 * Targeting fields in the fixed order they are appended to the gateway username, each as
 * `-<field>-<value>` with the value lower case (asn as its number): `user-country-us-state-co-city-denver`.
 * The deprecated residential `os` is not sent.
 */
const TARGETING_ORDER = ['country', 'state', 'city', 'zip', 'asn', 'carrier'] as const;

function targetingUsername(base: string, config: Record<string, unknown>): string {
  const parts = base === '' ? [] : [base];
  for (const field of TARGETING_ORDER) {
    const value = config[field];
    if (typeof value !== 'string' || value === '') continue;
    const v = field === 'asn' ? value.replace(/^AS/i, '') : value.toLowerCase();
    parts.push(field, v);
  }
  return parts.join('-');
}

export function upstreamFor(proxy: StoredProxy, providers: Partial<Record<ManagedProxyType, ProxyGateway>>): Upstream {
  if (proxy.type === 'custom') {
    const c = proxy.config as { host: string; port: number; username?: string; password?: string; ca_bundle?: string };
    return { host: c.host, port: c.port, protocol: proxy.protocol, username: c.username, password: c.password, ca: c.ca_bundle };
  }
  const gateway = providers[proxy.type];
  if (gateway === undefined) {
    throw new OperationFailedError('proxy_check_failed', `no gateway is configured for ${proxy.type} proxies`, {
      code: 'provider_not_configured',
      message: `BROWSERD_PROXY_PROVIDERS_FILE names no gateway for the type ${proxy.type}`,
    });
  }
  const username = targetingUsername(gateway.username, proxy.config);
  return {
    host: gateway.host,
    port: gateway.port,
    protocol: gateway.protocol,
    username: username === '' ? undefined : username,
    password: gateway.password,
  };
}
