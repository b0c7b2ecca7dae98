// Chrome enterprise policies set through the API: their checks (the name in POLICY_TYPES with its
// JSON type; never one the daemon relies on) and the daemon's own file in the policy folder. The
// folder is shared by every Chromium on the machine: the daemon writes only POLICIES_FILE there
// (and the extension module its forcelist file), never another file.
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { syncDir, writeFileAtomic } from '../../core/fs-atomic.js';
import { POLICY_TYPES, type PolicyType } from './policy-table.js';

export const POLICIES_FILE = 'browserd-policies.json';
/** At most this many policies in the daemon's file; the file at most this many bytes. */
export const POLICY_LIMITS = { maxPolicies: 200, maxFileBytes: 1024 * 1024 } as const;

/** Policies that would break the daemon, each with why: refused with 422 naming them. */
export const REFUSED_POLICIES: Readonly<Record<string, string>> = {
  ExtensionInstallForcelist: 'extension installation is the daemon\'s (POST /browsers/{id}/extensions; its own forcelist file)',
  ExtensionInstallBlocklist: 'extension installation is the daemon\'s (it picks live, restart or policy activation from these)',
  ExtensionInstallAllowlist: 'extension installation is the daemon\'s',
  ExtensionInstallBlacklist: 'extension installation is the daemon\'s',
  ExtensionInstallWhitelist: 'extension installation is the daemon\'s',
  ExtensionInstallSources: 'extension installation is the daemon\'s (its loopback update server)',
  ExtensionAllowedTypes: 'extension installation is the daemon\'s',
  ExtensionSettings: 'extension installation is the daemon\'s',
  ExtensionDeveloperModeSettings: 'unpacked extensions are loaded over DevTools (Extensions.loadUnpacked)',
  BlockExternalExtensions: 'extension installation is the daemon\'s',
  ProxySettings: 'the browser\'s traffic goes through the daemon\'s forwarding proxy (PATCH /browsers/{id} proxy_id)',
  ProxyMode: 'the browser\'s traffic goes through the daemon\'s forwarding proxy',
  ProxyServer: 'the browser\'s traffic goes through the daemon\'s forwarding proxy',
  ProxyServerMode: 'the browser\'s traffic goes through the daemon\'s forwarding proxy',
  ProxyPacUrl: 'the browser\'s traffic goes through the daemon\'s forwarding proxy',
  ProxyBypassList: 'the browser\'s traffic goes through the daemon\'s forwarding proxy (bypass_hosts of the proxy)',
  WebRtcIPHandling: 'WebRTC is kept to proxied candidates so the exit IP is the proxy\'s',
  WebRtcUdpPortRange: 'WebRTC is kept to proxied candidates so the exit IP is the proxy\'s',
  DnsOverHttpsMode: 'names are resolved by the daemon\'s forwarding proxy, where the egress policy judges them (docs/egress.md)',
  DnsOverHttpsTemplates: 'names are resolved by the daemon\'s forwarding proxy, where the egress policy judges them (docs/egress.md)',
  DeveloperToolsAvailability: 'the daemon, its CDP endpoint and every client drive Chromium over DevTools',
  RemoteDebuggingAllowed: 'the daemon drives Chromium over its DevTools pipe',
  HeadlessMode: 'the daemon runs Chromium headless (BROWSERD_HEADLESS)',
  UserDataDir: 'the profile is the daemon\'s (in its state dir)',
  DiskCacheDir: 'the profile and its caches are the daemon\'s',
  DownloadDirectory: 'downloads go to the daemon\'s downloads folder (BROWSERD_DOWNLOADS_DIR)',
  PromptForDownloadLocation: 'downloads go to the daemon\'s downloads folder without a dialog',
  BrowserSignin: 'a forced sign-in blocks the browser at start',
  ForceBrowserSignin: 'a forced sign-in blocks the browser at start',
  BrowserAddPersonEnabled: 'the profile is the daemon\'s',
};

function typeOf(v: unknown): PolicyType | 'null' | 'other' {
  if (v === null) return 'null';
  if (typeof v === 'boolean') return 'boolean';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'other';
  if (typeof v === 'string') return 'string';
  if (Array.isArray(v)) return v.every((x) => typeof x === 'string') ? 'list' : 'other';
  if (typeof v === 'object') return 'dict';
  return 'other';
}

const TYPE_WORDS: Record<PolicyType, string> = { boolean: 'a boolean', integer: 'an integer', string: 'a string', list: 'a list of strings', dict: 'an object' };

export interface PolicyProblems {
  /** Policies the daemon relies on: `<name>: <why>`. */
  refused: string[];
  /** Unknown names and wrong types: `policies.<name>: <why>`. */
  invalid: string[];
}

/** Checks a merge (`null` removes a policy); every problem, not only the first. */
export function checkPolicies(patch: Record<string, unknown>): PolicyProblems {
  const out: PolicyProblems = { refused: [], invalid: [] };
  for (const [name, value] of Object.entries(patch)) {
    const why = Object.hasOwn(REFUSED_POLICIES, name) ? REFUSED_POLICIES[name] : undefined;
    if (why !== undefined) {
      out.refused.push(`${name}: refused, ${why}`);
      continue;
    }
    const want = Object.hasOwn(POLICY_TYPES, name) ? POLICY_TYPES[name] : undefined;
    if (want === undefined) {
      out.invalid.push(`policies.${name}: not a policy this daemon knows (names are case-sensitive; the list: docs/browser-configuration.md)`);
      continue;
    }
    const got = typeOf(value);
    if (got !== 'null' && got !== want) out.invalid.push(`policies.${name}: must be ${TYPE_WORDS[want]}, or null to remove it`);
  }
  return out;
}

/** The set after a merge: `null` removes, anything else sets. */
export function mergePolicies(cur: Record<string, unknown>, patch: Record<string, unknown>): Record<string, unknown> {
  const next: Record<string, unknown> = { ...cur };
  for (const [name, value] of Object.entries(patch)) {
    if (value === null) delete next[name];
    else next[name] = value;
  }
  return next;
}

/** Problems of a whole set against the limits. */
export function policyLimitProblems(set: Record<string, unknown>): string[] {
  const out: string[] = [];
  if (Object.keys(set).length > POLICY_LIMITS.maxPolicies) out.push(`policies: at most ${POLICY_LIMITS.maxPolicies} policies (this would make ${Object.keys(set).length})`);
  const bytes = Buffer.byteLength(JSON.stringify(set));
  if (bytes > POLICY_LIMITS.maxFileBytes) out.push(`policies: the policy file would be ${bytes} bytes, over ${POLICY_LIMITS.maxFileBytes}`);
  return out;
}

/** Writes one of the daemon's own policy files (atomically; default POLICIES_FILE), or removes it when the set is empty. */
export async function writePolicyFile(dir: string, set: Record<string, unknown>, name = POLICIES_FILE): Promise<void> {
  const file = path.join(dir, name);
  if (Object.keys(set).length === 0) {
    await rm(file, { force: true });
    await syncDir(dir);
    return;
  }
  await mkdir(dir, { recursive: true, mode: 0o755 });
  // World-readable: Chromium (as whatever user) reads it; it holds nothing secret.
  await writeFileAtomic(file, `${JSON.stringify(set, null, 2)}\n`, 0o644);
}
