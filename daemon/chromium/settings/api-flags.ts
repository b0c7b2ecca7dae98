// Chromium flags set through the API (PATCH /browsers/{id}/chromium/flags, configure): each checked
// for shape, never one the daemon owns (those of BROWSERD_CHROMIUM_FLAGS, and those the daemon
// sets from its own settings: the proxy, the viewport, the sandbox), merged by name.
import { flagName, flagShapeProblem, OWNED_FLAGS, ownedBy } from '../../core/flags-parse.js';

/** At most this many flags set through the API. */
export const MAX_API_FLAGS = 64;

/** Flags the daemon sets from its own settings, each with why the API may not set them. */
export const API_OWNED_FLAGS: Readonly<Record<string, string>> = {
  '--proxy-server': 'the proxy is the daemon\'s forwarding proxy (PATCH /browsers/{id} proxy_id)',
  '--proxy-bypass-list': 'the proxy is the daemon\'s forwarding proxy',
  '--proxy-pac-url': 'the proxy is the daemon\'s forwarding proxy',
  '--no-proxy-server': 'the proxy is the daemon\'s forwarding proxy',
  '--proxy-auto-detect': 'the proxy is the daemon\'s forwarding proxy',
  '--force-webrtc-ip-handling-policy': 'WebRTC is kept to proxied candidates',
  '--host-resolver-rules': 'names are resolved by the daemon\'s forwarding proxy, where the egress policy judges them (docs/egress.md)',
  '--host-rules': 'a host mapping would send a request elsewhere than the forwarding proxy judged (docs/egress.md)',
  '--window-size': 'the viewport is set with PATCH /browsers/{id} viewport',
  '--window-position': 'the viewport is set with PATCH /browsers/{id} viewport',
  '--screen-info': 'the viewport is set with PATCH /browsers/{id} viewport',
  '--kiosk': 'the viewport is set with PATCH /browsers/{id} viewport',
  '--start-fullscreen': 'the viewport is set with PATCH /browsers/{id} viewport',
  '--app': 'a window without tabs breaks the viewport and the tab routes',
  '--no-sandbox': 'the sandbox is the operator\'s decision, not a client\'s',
  '--disable-setuid-sandbox': 'the sandbox is the operator\'s decision, not a client\'s',
  '--single-process': 'the daemon supervises Chromium\'s process tree',
  '--enable-logging': 'Chromium\'s output is the daemon\'s log stream (set BROWSERD_CHROMIUM_FLAGS)',
};

export interface FlagProblems {
  refused: string[];
  invalid: string[];
}

export function checkApiFlags(flags: readonly string[], field = 'flags'): FlagProblems {
  const out: FlagProblems = { refused: [], invalid: [] };
  flags.forEach((flag, i) => {
    const shape = flagShapeProblem(flag);
    if (shape !== null) return void out.invalid.push(`${field}[${i}]: "${flag.slice(0, 100)}" ${shape}`);
    const owned = ownedBy(flag, OWNED_FLAGS);
    if (owned !== undefined) return void out.refused.push(`${flagName(flag)}: refused, owned by the daemon (the profile, DevTools, extension loading, headless mode)`);
    const why = API_OWNED_FLAGS[flagName(flag)];
    if (why !== undefined) out.refused.push(`${flagName(flag)}: refused, ${why}`);
  });
  return out;
}

/** The flags after a merge: a flag replaces the one of the same name; `remove` drops names. */
export function mergeFlags(cur: readonly string[], add: readonly string[], remove: readonly string[] = []): string[] {
  const drop = new Set([...remove.map(flagName), ...add.map(flagName)]);
  const kept = cur.filter((f) => !drop.has(flagName(f)));
  const seen = new Set<string>();
  const added: string[] = [];
  for (const f of [...add].reverse()) {
    if (seen.has(flagName(f))) continue; // the last of a name in one request wins
    seen.add(flagName(f));
    added.unshift(f);
  }
  return [...kept, ...added];
}
