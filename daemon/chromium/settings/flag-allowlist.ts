// The Chromium flags a client may set (PATCH /browsers/{id}/chromium/flags, configure's `flags`,
// and the flags kept in the settings store, re-checked at every launch): an allowlist. Each entry
// has a one-line reason and a grammar for its value. Everything else is refused, because many of
// Chromium's switches run a command or load code as the agent user (--renderer-cmd-prefix,
// --utility-cmd-prefix, --gpu-launcher, --browser-subprocess-path, --load-extension,
// --disable-extensions-except, ...; the list with its source: docs/security.md), or take over what
// the daemon owns (the profile, DevTools, the proxy and host resolution, the viewport, the sandbox).
// No accepted flag takes a path: the only paths Chromium gets are the daemon's own (its profile,
// its extensions), set by the daemon in chromium/flags.ts. The operator's BROWSERD_CHROMIUM_FLAGS
// are trusted (the operator's environment already runs the daemon) and are not held to this list.
// To accept another flag: add it here with its reason and value grammar, and to the table in
// docs/browser-configuration.md; never one that takes a path, a command or a host mapping.

/** How a flag's value is written: no value, one of a set, or text matching a pattern. */
export type ValueGrammar =
  | { kind: 'none' }
  | { kind: 'enum'; values: readonly string[] }
  | { kind: 'pattern'; re: RegExp; says: string };

export interface AllowedFlag {
  why: string;
  value: ValueGrammar;
}

const NONE: ValueGrammar = { kind: 'none' };
const LANG = '[A-Za-z]{2,3}(?:-[A-Za-z0-9]{1,8}){0,4}';
const FEATURE_LIST: ValueGrammar = { kind: 'pattern', re: /^[A-Za-z0-9_]{1,100}(?:,[A-Za-z0-9_]{1,100}){0,63}$/, says: 'a comma-separated list of feature names (letters, digits, _; no parameters)' };
const ORIGIN = 'https?://[A-Za-z0-9.-]{1,253}(?::[0-9]{1,5})?';

/** The flags a client may set, by name. A null-prototype object: `__proto__` and the like are no names. */
export const ALLOWED_FLAGS: Readonly<Record<string, AllowedFlag>> = Object.freeze(
  Object.assign(Object.create(null) as Record<string, AllowedFlag>, {
    '--lang': { why: 'the UI and Accept-Language locale', value: { kind: 'pattern', re: new RegExp(`^${LANG}$`), says: 'a BCP 47 language tag (de, en-US)' } },
    '--accept-lang': { why: 'the languages pages are asked for', value: { kind: 'pattern', re: new RegExp(`^${LANG}(?:,${LANG}){0,15}$`), says: 'a comma-separated list of BCP 47 tags' } },
    '--user-agent': { why: 'the User-Agent pages and servers see', value: { kind: 'pattern', re: /^[\x20-\x7e]{1,512}$/, says: 'printable ASCII, 1-512 characters' } },
    '--force-dark-mode': { why: 'pages and the UI in the dark color scheme', value: NONE },
    '--force-prefers-reduced-motion': { why: 'prefers-reduced-motion for pages', value: NONE },
    '--force-device-scale-factor': { why: 'the device pixel ratio pages see', value: { kind: 'pattern', re: /^(?:0?\.[0-9]{1,4}|[1-4](?:\.[0-9]{1,4})?)$/, says: 'a number from 0.01 to 4' } },
    '--force-color-profile': { why: 'the same colors on every machine (screenshots)', value: { kind: 'enum', values: ['srgb', 'display-p3-d65', 'generic-rgb', 'color-spin-gamma24'] } },
    '--font-render-hinting': { why: 'the same text rendering on every machine (screenshots)', value: { kind: 'enum', values: ['none', 'slight', 'medium', 'full'] } },
    '--hide-scrollbars': { why: 'screenshots without scrollbars', value: NONE },
    '--mute-audio': { why: 'pages play no sound', value: NONE },
    '--autoplay-policy': { why: 'whether media may play without a user gesture', value: { kind: 'enum', values: ['no-user-gesture-required', 'user-gesture-required', 'document-user-activation-required'] } },
    '--enable-features': { why: 'turn on named Chromium features (in-process switches, no paths)', value: FEATURE_LIST },
    '--disable-features': { why: 'turn off named Chromium features', value: FEATURE_LIST },
    '--enable-blink-features': { why: 'turn on named web-platform features', value: FEATURE_LIST },
    '--disable-blink-features': { why: 'turn off named web-platform features (AutomationControlled)', value: FEATURE_LIST },
    '--blink-settings': { why: 'Blink settings pages run with (imagesEnabled=false)', value: { kind: 'pattern', re: /^[A-Za-z0-9_]{1,100}=[A-Za-z0-9_.]{1,100}(?:,[A-Za-z0-9_]{1,100}=[A-Za-z0-9_.]{1,100}){0,31}$/, says: 'a comma-separated list of name=value (letters, digits, _ and .)' } },
    '--disable-notifications': { why: 'no notification permission prompts', value: NONE },
    '--deny-permission-prompts': { why: 'every permission prompt answered no', value: NONE },
    '--disable-popup-blocking': { why: 'pages may open windows without a gesture', value: NONE },
    '--disable-prompt-on-repost': { why: 'no dialog when reloading a POST', value: NONE },
    '--disable-search-engine-choice-screen': { why: 'no search engine dialog on a fresh profile', value: NONE },
    '--ignore-certificate-errors': { why: 'test sites with self-signed certificates (pages only; the daemon\'s own connections are unaffected)', value: NONE },
    '--allow-running-insecure-content': { why: 'http subresources on https pages', value: NONE },
    '--unsafely-treat-insecure-origin-as-secure': { why: 'secure-context APIs for named http origins', value: { kind: 'pattern', re: new RegExp(`^${ORIGIN}(?:,${ORIGIN}){0,15}$`), says: 'a comma-separated list of http(s)://host[:port] origins' } },
    '--use-fake-ui-for-media-stream': { why: 'camera and microphone prompts answered yes', value: NONE },
    '--use-fake-device-for-media-stream': { why: 'a synthetic camera and microphone (no file: the built-in pattern)', value: NONE },
    '--disable-dev-shm-usage': { why: 'shared memory in /tmp where /dev/shm is small', value: NONE },
    '--disable-renderer-backgrounding': { why: 'background tabs keep full priority', value: NONE },
    '--disable-background-timer-throttling': { why: 'timers of background tabs are not slowed', value: NONE },
    '--disable-backgrounding-occluded-windows': { why: 'hidden windows keep rendering', value: NONE },
    '--disable-ipc-flooding-protection': { why: 'pages may navigate or post messages at a high rate', value: NONE },
    '--disable-hang-monitor': { why: 'no "page unresponsive" dialog', value: NONE },
    '--disable-client-side-phishing-detection': { why: 'no phishing classifier on pages', value: NONE },
    '--enable-automation': { why: 'navigator.webdriver true and the automation infobar', value: NONE },
  }),
);

/** Why a name the daemon sets itself is not on the list (a better message than "not accepted"). */
const DAEMON_SETS: Readonly<Record<string, string>> = Object.freeze(
  Object.assign(Object.create(null) as Record<string, string>, {
    '--proxy-server': 'the proxy is the daemon\'s forwarding proxy (PATCH /browsers/{id} proxy_id)',
    '--proxy-bypass-list': 'the proxy is the daemon\'s forwarding proxy',
    '--proxy-pac-url': 'the proxy is the daemon\'s forwarding proxy',
    '--no-proxy-server': 'the proxy is the daemon\'s forwarding proxy',
    '--host-resolver-rules': 'host resolution goes through the daemon\'s forwarding proxy',
    '--host-rules': 'host resolution goes through the daemon\'s forwarding proxy',
    '--window-size': 'the viewport is set with PATCH /browsers/{id} viewport',
    '--user-data-dir': 'the profile is the daemon\'s',
    '--remote-debugging-pipe': 'DevTools is the daemon\'s pipe',
    '--load-extension': 'extensions are installed with POST /browsers/{id}/extensions',
    '--no-sandbox': 'the sandbox is the operator\'s decision, not a client\'s',
    '--headless': 'headless mode is the operator\'s (BROWSERD_HEADLESS)',
  }),
);

/** The flag's name (`--lang` of `--lang=de`). */
function nameOf(flag: string): string {
  const eq = flag.indexOf('=');
  return eq < 0 ? flag : flag.slice(0, eq);
}

/** Why `flag` (already shaped as --name[=value]) may not be set by a client, or null when it may. */
export function flagRefusal(flag: string): string | null {
  const name = nameOf(flag);
  const entry = Object.hasOwn(ALLOWED_FLAGS, name) ? ALLOWED_FLAGS[name] : undefined;
  if (entry === undefined) {
    const daemon = Object.hasOwn(DAEMON_SETS, name) ? DAEMON_SETS[name] : undefined;
    return daemon !== undefined
      ? `not accepted: ${daemon}`
      : 'not a flag this daemon accepts (only those of its list, each with its reason: docs/browser-configuration.md)';
  }
  const value = flag.length > name.length ? flag.slice(name.length + 1) : null;
  const g = entry.value;
  if (g.kind === 'none') return value === null ? null : 'takes no value';
  if (value === null) return g.kind === 'enum' ? `needs a value: one of ${g.values.join(', ')}` : `needs a value: ${g.says}`;
  if (g.kind === 'enum') return g.values.includes(value) ? null : `must be one of ${g.values.join(', ')}`;
  return g.re.test(value) ? null : `must be ${g.says}`;
}
