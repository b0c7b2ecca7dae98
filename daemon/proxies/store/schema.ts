// The Proxy of the seed shape (Kernel's proxies API): what POST /proxies takes, what every route
// returns, and the rules of each field. `type` discriminates `config`; every rule is one check
// per field, so a bad field gives exactly one `details` entry. Values are normalized on the way in
// (country and state upper case, city lower case), so targeting and comparisons see one form.
import { X509Certificate } from 'node:crypto';
import ipaddr from 'ipaddr.js';
import { z } from 'zod';
import { lazy } from '../../core/lazy.js';
import { bypassHostsSchema } from './bypass.js';
import { isCountryCode } from './countries.js';

export const PROXY_TYPES = ['datacenter', 'isp', 'residential', 'mobile', 'custom'] as const;
export type ProxyType = (typeof PROXY_TYPES)[number];
const PROXY_PROTOCOLS = ['http', 'https'] as const;
const PROXY_STATUSES = ['available', 'unavailable'] as const;
/** Why a check failed: `inner_error.code` of a url check, `last_check_error.code` of a default check. */
const CHECK_CAUSES = ['proxy_unreachable', 'proxy_auth_failed', 'target_unreachable', 'tls_failed', 'timeout'] as const;

/** Every size limit of a Proxy's fields. */
const FIELD_LIMITS = {
  nameMaxChars: 255,
  hostMaxChars: 253,
  usernameMaxChars: 255,
  /** Kernel's documented minimum for a custom proxy password. */
  passwordMinChars: 5,
  passwordMaxChars: 255,
  caBundleMaxBytes: 64 * 1024,
  caBundleMaxCerts: 32,
  cityMaxChars: 64,
} as const;

const MOBILE_CARRIERS = [
  'a1', 'aircel', 'airtel', 'att', 'celcom', 'chinamobile', 'claro', 'comcast', 'cox', 'digi', 'dt', 'docomo', 'dtac',
  'etisalat', 'idea', 'kyivstar', 'meo', 'megafon', 'mtn', 'mtnza', 'mts', 'optus', 'orange', 'qwest', 'reliance_jio',
  'robi', 'sprint', 'telefonica', 'telstra', 'tmobile', 'tigo', 'tim', 'verizon', 'vimpelcom', 'vodacomza', 'vodafone',
  'vivo', 'zain', 'vivabo', 'telenormyanmar', 'kcelljsc', 'swisscom', 'singtel', 'asiacell', 'windit', 'cellc', 'ooredoo',
  'drei', 'umobile', 'cableone', 'proximus', 'tele2', 'mobitel', 'o2', 'bouygues', 'free', 'sfr', 'digicel',
] as const;

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;
const HOSTNAME_RE = /^(?=.{1,253}\.?$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$/;
const PEM_BLOCK_RE = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;

/** A string field with one rule: `why` names what is wrong when `ok` fails (one issue per field). */
function rule(ok: (v: string) => boolean, why: string): z.ZodString {
  return z.string({ error: (iss) => (iss.input === undefined ? 'is required' : 'must be a string') }).refine(ok, { message: why });
}

const country = lazy(() => rule((v) => /^[A-Za-z]{2}$/.test(v) && isCountryCode(v.toUpperCase()), 'must be an ISO 3166-1 alpha-2 country code such as US or DE')
  .transform((v) => v.toUpperCase())
  .meta({ description: 'ISO 3166-1 alpha-2 country code (any case; stored upper case)', examples: ['US'] }));
const city = lazy(() => rule(
  (v) => new RegExp(`^[A-Za-z0-9_]{1,${FIELD_LIMITS.cityMaxChars}}$`).test(v),
  `must be a city name without spaces or hyphens (letters, digits, _; at most ${FIELD_LIMITS.cityMaxChars}), e.g. sanfrancisco`,
)
  .transform((v) => v.toLowerCase())
  .meta({ description: 'City name without spaces (e.g. `sanfrancisco`); needs `country`. Stored lower case.' }));
const state = lazy(() => rule((v) => /^[A-Za-z]{2}$/.test(v), 'must be a two-letter state code such as CA')
  .transform((v) => v.toUpperCase())
  .meta({ description: 'Two-letter state code' }));
const ZIP_RE = /^\d{5}(?:-\d{4})?$/;
const zip = lazy(() => rule((v) => ZIP_RE.test(v), 'must be a US ZIP code (12345 or 12345-6789)').meta({ description: 'US ZIP code (5 digits or ZIP+4)' }));
const asn = lazy(() => rule((v) => /^AS[1-9]\d{0,9}$/i.test(v) && Number(v.slice(2)) <= 4294967295, 'must be AS followed by the AS number, e.g. AS7922')
  .transform((v) => v.toUpperCase())
  .meta({ description: 'Autonomous system number: `AS` and digits (see https://bgp.potaroo.net/cidr/autnums.html)' }));

/**
 * Cross-field rules run even when other fields failed (zod skips refinements after an aborting
 * issue such as a wrong type unless told otherwise), so every problem gets its own detail. They
 * see the object as parsed so far: a field that failed holds its raw input, so they check types.
 */
const alwaysOnObjects = { when: (payload: { value: unknown }) => typeof payload.value === 'object' && payload.value !== null && !Array.isArray(payload.value) };

/** Cross-field rules shared by residential and mobile targeting. */
function geoRules(c: Record<string, unknown>, ctx: z.RefinementCtx): void {
  if (c.city !== undefined && c.country === undefined) {
    ctx.addIssue({ code: 'custom', path: ['country'], message: 'is required when city is set' });
  }
  // Judged only when zip and country are valid themselves (else they have their own detail already).
  const country = typeof c.country === 'string' ? c.country.toUpperCase() : undefined;
  if (typeof c.zip === 'string' && ZIP_RE.test(c.zip) && country !== undefined && isCountryCode(country) && country !== 'US') {
    ctx.addIssue({ code: 'custom', path: ['zip'], message: `is a US ZIP code, but country is ${country}` });
  }
}

const countryDefaultUs = lazy(() => z.strictObject({ country: country().default('US') }));
const datacenterConfig = lazy(() => countryDefaultUs().meta({ description: 'Datacenter: `country` defaults to US' }));
const ispConfig = lazy(() => countryDefaultUs().meta({ description: 'ISP: `country` defaults to US' }));
/** The targeting fields of residential and mobile proxies (geoRules judges them together). */
const geoFields = lazy(() => ({ country: country().optional(), city: city().optional(), state: state().optional(), zip: zip().optional(), asn: asn().optional() }));
const residentialConfig = lazy(() => z
  .strictObject({
    ...geoFields(),
    os: z
      .enum(['windows', 'macos', 'android'], { message: 'must be windows, macos or android' })
      .optional()
      .meta({ deprecated: true, description: 'Deprecated: accepted and stored, logged as deprecated, not used for targeting' }),
  })
  .superRefine(geoRules, alwaysOnObjects));
const mobileConfig = lazy(() => z
  .strictObject({
    ...geoFields(),
    carrier: z.enum(MOBILE_CARRIERS, { message: 'is not a known mobile carrier' }).optional(),
  })
  .superRefine(geoRules, alwaysOnObjects));

function isHost(v: string): boolean {
  const bare = v.startsWith('[') && v.endsWith(']') ? v.slice(1, -1) : v;
  if (ipaddr.IPv6.isValid(bare) || ipaddr.IPv4.isValidFourPartDecimal(bare)) return true;
  return !v.startsWith('[') && HOSTNAME_RE.test(v) && !/^[\d.]+$/.test(v);
}

/** Why a PEM bundle is refused, or null: each block must parse as an X.509 certificate. */
function pemBundleProblem(pem: string): string | null {
  if (Buffer.byteLength(pem, 'utf8') > FIELD_LIMITS.caBundleMaxBytes) return `is over its limit of ${FIELD_LIMITS.caBundleMaxBytes} bytes`;
  const blocks = pem.match(PEM_BLOCK_RE) ?? [];
  if (blocks.length === 0) return 'holds no PEM certificate (-----BEGIN CERTIFICATE----- ... -----END CERTIFICATE-----)';
  if (blocks.length > FIELD_LIMITS.caBundleMaxCerts) return `holds more than ${FIELD_LIMITS.caBundleMaxCerts} certificates`;
  if (pem.replace(PEM_BLOCK_RE, '').trim() !== '') return 'holds text outside its PEM certificate blocks';
  for (let i = 0; i < blocks.length; i++) {
    try {
      new X509Certificate(blocks[i] as string);
    } catch {
      return `certificate ${i + 1} is not a valid X.509 certificate`;
    }
  }
  return null;
}

/** A response-only field: refused in input with its own detail. */
function derivedField(field: string, from: string) {
  return z
    .never({ error: `is derived from ${from} and cannot be set; send ${from} instead` })
    .optional()
    .meta({ description: `Response only (${field} is derived from ${from}); refused in input` });
}

export const customConfig = lazy(() => z
  .strictObject({
    host: rule(isHost, 'must be a host name or an IP address, without scheme or port')
      .transform((v) => (v.startsWith('[') ? v.slice(1, -1) : v))
      .meta({ description: `Proxy host name or IP address (at most ${FIELD_LIMITS.hostMaxChars} characters; IPv6 with or without brackets)` }),
    // Not z.int(): its issue aborts the whole object, and the cross-field rule below would be skipped.
    port: z
      .number({ message: 'must be a whole number from 1 to 65535' })
      .refine((v) => Number.isInteger(v) && v >= 1 && v <= 65535, 'must be a whole number from 1 to 65535')
      .meta({ type: 'integer', minimum: 1, maximum: 65535, description: 'Proxy port (1 to 65535)' }),
    username: rule(
      (v) => v.length >= 1 && v.length <= FIELD_LIMITS.usernameMaxChars && !v.includes(':') && !CONTROL.test(v),
      `must be 1 to ${FIELD_LIMITS.usernameMaxChars} characters without ":" or control characters`,
    )
      .optional()
      .meta({ description: `Username for proxy authentication (Basic; 1 to ${FIELD_LIMITS.usernameMaxChars} characters, no ":")` }),
    password: rule(
      (v) => v.length >= FIELD_LIMITS.passwordMinChars && v.length <= FIELD_LIMITS.passwordMaxChars && !CONTROL.test(v),
      `must be ${FIELD_LIMITS.passwordMinChars} to ${FIELD_LIMITS.passwordMaxChars} characters without control characters`,
    )
      .optional()
      .meta({
        writeOnly: true,
        description: `Password for proxy authentication (${FIELD_LIMITS.passwordMinChars} to ${FIELD_LIMITS.passwordMaxChars} characters; needs username); write-only: never returned, see has_password`,
      }),
    ca_bundle: z
      .string()
      .superRefine((v, ctx) => {
        const why = pemBundleProblem(v);
        if (why !== null) ctx.addIssue({ code: 'custom', message: why });
      })
      .optional()
      .meta({
        writeOnly: true,
        description: `PEM certificates that verify an https proxy instead of the system CAs (at most ${FIELD_LIMITS.caBundleMaxBytes} bytes and ${FIELD_LIMITS.caBundleMaxCerts} certificates, each parsed as X.509); write-only, see has_ca_bundle`,
      }),
    // Derived, never input: named here so that sending them is a detail at their own path.
    has_password: derivedField('has_password', 'password'),
    has_ca_bundle: derivedField('has_ca_bundle', 'ca_bundle'),
  })
  .superRefine((c: Record<string, unknown>, ctx) => {
    if (c.password !== undefined && c.username === undefined) ctx.addIssue({ code: 'custom', path: ['username'], message: 'is required when password is set' });
  }, alwaysOnObjects));


const name = lazy(() => rule(
  (v) => v.trim().length >= 1 && v.trim().length <= FIELD_LIMITS.nameMaxChars && !CONTROL.test(v),
  `must be 1 to ${FIELD_LIMITS.nameMaxChars} characters (after trimming) without control characters`,
)
  .transform((v) => v.trim())
  .meta({
    description: `Readable name of the proxy: trimmed, then 1 to ${FIELD_LIMITS.nameMaxChars} characters; names need not be unique (proxies are addressed by id)`,
  }));
const protocol = lazy(() => z
  .enum(PROXY_PROTOCOLS, { message: 'must be http or https' })
  .default('https')
  .meta({ description: 'Protocol to the proxy: `https` (default, TLS to the proxy) or `http`. Managed types reach their gateway as the provider file says.' }));

const typeField = <T extends ProxyType>(t: T) => z.literal(t);

/** POST /proxies. */
export const createProxySchema = lazy(() => z
  .discriminatedUnion(
    'type',
    [
      z.strictObject({ type: typeField('datacenter'), name: name().optional(), protocol: protocol(), bypass_hosts: bypassHostsSchema().optional(), config: datacenterConfig().default({ country: 'US' }) }),
      z.strictObject({ type: typeField('isp'), name: name().optional(), protocol: protocol(), bypass_hosts: bypassHostsSchema().optional(), config: ispConfig().default({ country: 'US' }) }),
      z.strictObject({ type: typeField('residential'), name: name().optional(), protocol: protocol(), bypass_hosts: bypassHostsSchema().optional(), config: residentialConfig().default({}) }),
      z.strictObject({ type: typeField('mobile'), name: name().optional(), protocol: protocol(), bypass_hosts: bypassHostsSchema().optional(), config: mobileConfig().default({}) }),
      z.strictObject({ type: typeField('custom'), name: name().optional(), protocol: protocol(), bypass_hosts: bypassHostsSchema().optional(), config: customConfig() }),
    ],
    { error: () => 'must be one of datacenter, isp, residential, mobile, custom' },
  )
  .meta({ description: 'A proxy; `type` decides the shape of `config`' }));

/** PATCH /proxies/{id}: the fields that may change; at least one. */
export const updateProxySchema = lazy(() => z
  .strictObject({ name: name().optional(), bypass_hosts: bypassHostsSchema().optional() })
  .refine((v) => v.name !== undefined || v.bypass_hosts !== undefined, { message: 'must set name or bypass_hosts (or both)' })
  .meta({ description: 'The new name and/or bypass_hosts; every other field of a proxy is fixed at creation (create a new proxy to change it)' }));

/** POST /proxies/{id}/check: an optional target. */
export const checkBodySchema = lazy(() => z.strictObject({
  url: z
    .string()
    .max(2048, 'must be at most 2048 characters')
    .optional()
    .meta({
      description:
        'Test reachability of this http(s) URL through the proxy instead of the default check URLs. Every address its host resolves to must be public; the tunnel goes to the address that was checked. Changes nothing stored.',
    }),
}));

// Responses: config without the write-only fields, with what is derived from them.
const customPublic = lazy(() => z.object({
  host: z.string(),
  port: z.number(),
  username: z.string().optional(),
  has_password: z.boolean(),
  has_ca_bundle: z.boolean(),
}));
const publicFields = lazy(() => ({
  id: z.string(),
  name: z.string().optional(),
  protocol: z.enum(PROXY_PROTOCOLS),
  status: z.enum(PROXY_STATUSES).optional().meta({ description: 'Health after the last check without url; absent until checked' }),
  last_checked: z.string().optional().meta({ description: 'ISO time of the last check without url' }),
  ip_address: z.string().optional().meta({ description: 'Exit IP address seen by the last check without url, when a check URL answered with one' }),
  bypass_hosts: z.array(z.string()).optional().meta({ description: 'Hosts reached directly instead of through this proxy (stored form); absent when none' }),
  last_check_error: z
    .object({
      code: z.enum(CHECK_CAUSES).meta({ description: 'The cause: proxy_unreachable, proxy_auth_failed, target_unreachable, tls_failed or timeout' }),
      message: z.string().meta({ description: 'What failed, naming the phase; for an https proxy that speaks plain HTTP it suggests `protocol: http`' }),
    })
    .optional()
    .meta({ description: 'Why the last check without url found the proxy unavailable: present while status is unavailable, removed when a check finds it available' }),
}));
const managedOut = <T extends ProxyType>(t: T, config: z.ZodType) => z.object({ ...publicFields(), type: z.literal(t), config });
export const proxySchema = lazy(() => z.discriminatedUnion('type', [
  managedOut('datacenter', z.object({ country: z.string() })),
  managedOut('isp', z.object({ country: z.string() })),
  managedOut('residential', z.object(residentialConfig().shape).partial()),
  managedOut('mobile', z.object(mobileConfig().shape).partial()),
  managedOut('custom', customPublic()),
]));
export const proxyListSchema = lazy(() => z.array(proxySchema()));
