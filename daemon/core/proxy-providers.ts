// The managed proxies' provider file (BROWSERD_PROXY_PROVIDERS_FILE): for each managed proxy type,
// the gateway of the service's proxy provider and its account. Read once at start, on the daemon's
// side (docs/security.md); a bad file stops the start naming the setting.
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { lazy } from './lazy.js';
import { ConfigError } from './config-error.js';

export const MANAGED_PROXY_TYPES = ['datacenter', 'isp', 'residential', 'mobile'] as const;
export type ManagedProxyType = (typeof MANAGED_PROXY_TYPES)[number];

const gatewaySchema = lazy(() => z.object({
  host: z.string().min(1),
  port: z.number().int().min(1).max(65535),
  protocol: z.enum(['http', 'https']).default('http'),
  username: z.string().default(''),
  password: z.string().default(''),
}));
export type ProxyGateway = z.infer<ReturnType<typeof gatewaySchema>>;
const providersSchema = lazy(() => z.partialRecord(z.enum(MANAGED_PROXY_TYPES), gatewaySchema()));

/** The provider file's gateways; {} without the setting. */
export function parseProviders(file: string | undefined): Partial<Record<ManagedProxyType, ProxyGateway>> {
  if (file === undefined) return {};
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new ConfigError('BROWSERD_PROXY_PROVIDERS_FILE', `cannot read ${file} as JSON: ${(err as Error).message}`);
  }
  const parsed = providersSchema().safeParse(json);
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    throw new ConfigError('BROWSERD_PROXY_PROVIDERS_FILE', `${first?.path.join('.') || '(root)'}: ${first?.message}`);
  }
  return parsed.data;
}

