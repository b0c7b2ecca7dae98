// A new session's capabilities (classic POST /session, BiDi session.new): what a client may ask of
// ChromeDriver, and the one thing the daemon adds. The browser is the daemon's Chromium, already
// running: a client cannot choose another binary, its arguments, extensions, a profile's files, a
// proxy or another debugger address (each would launch or reach another browser, or change the
// shared one's launch). Those are refused (400 bad_request, one detail per capability), never
// stripped, so a client never believes it got what it asked for. Every session gets
// goog:chromeOptions.debuggerAddress: ChromeDriver attaches to the daemon's Chromium.
import { BadRequestError } from '../core/errors.js';
import { DEBUGGER_ADDRESS } from './ports.js';

const CHROME_OPTIONS = 'goog:chromeOptions';

/** goog:chromeOptions a session may set: they shape ChromeDriver's own view, not the browser's launch. */
const ALLOWED_CHROME_OPTIONS = new Set(['mobileEmulation', 'perfLoggingPrefs', 'windowTypes', 'w3c', 'enableExtensionTargets']);

/** Why a refused goog:chromeOptions key is refused (others: not an option of an attached session). */
const REFUSED_WHY: Record<string, string> = {
  binary: 'the browser is the daemon\'s Chromium: a session cannot choose its binary',
  args: 'the browser is already running: its flags are the daemon\'s (PATCH /browsers/{id}/chromium/flags)',
  extensions: 'extensions are installed through POST /browsers/{id}/extensions',
  debuggerAddress: 'the daemon sets the debugger address: a session attaches to the daemon\'s Chromium only',
  excludeSwitches: 'the browser is already running: its flags are the daemon\'s',
  localState: 'the browser\'s profile is the daemon\'s',
  prefs: 'the browser\'s profile is the daemon\'s',
  detach: 'the browser is never ChromeDriver\'s to keep or end',
  minidumpPath: 'the browser is already running',
};

type Caps = Record<string, unknown>;

function isObject(v: unknown): v is Caps {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Problems of one capabilities object (`at` names it in the details). */
function problemsOf(caps: Caps, at: string): string[] {
  const problems: string[] = [];
  if ('proxy' in caps) problems.push(`${at}.proxy: the browser's proxy is the daemon's (PATCH /browsers/{id} proxy_id)`);
  const opts = caps[CHROME_OPTIONS];
  if (opts === undefined) return problems;
  if (!isObject(opts)) return [...problems, `${at}.${CHROME_OPTIONS}: must be an object`];
  for (const key of Object.keys(opts)) {
    if (ALLOWED_CHROME_OPTIONS.has(key)) continue;
    problems.push(`${at}.${CHROME_OPTIONS}.${key}: ${REFUSED_WHY[key] ?? `not an option of a session attached to the daemon's running Chromium (allowed: ${[...ALLOWED_CHROME_OPTIONS].join(', ')})`}`);
  }
  return problems;
}

function withDebugger(caps: Caps): Caps {
  const opts = isObject(caps[CHROME_OPTIONS]) ? caps[CHROME_OPTIONS] : {};
  return { ...caps, [CHROME_OPTIONS]: { ...opts, debuggerAddress: DEBUGGER_ADDRESS } };
}

/**
 * The W3C `capabilities` ({alwaysMatch, firstMatch}) checked and attached to the daemon's Chromium;
 * BadRequestError listing every refused capability. `at` is the field's name in the details.
 */
export function attachCapabilities(capabilities: unknown, at: string): Caps {
  const caps = capabilities ?? {};
  if (!isObject(caps)) throw BadRequestError.field(at, 'must be an object');
  const always = caps.alwaysMatch ?? {};
  const first = caps.firstMatch ?? [{}];
  const problems: string[] = [];
  if (!isObject(always)) problems.push(`${at}.alwaysMatch: must be an object`);
  if (!Array.isArray(first) || first.length === 0 || !first.every(isObject)) problems.push(`${at}.firstMatch: must be a non-empty array of objects`);
  if (problems.length > 0) throw new BadRequestError(problems);
  const firsts = first as Caps[];
  problems.push(...problemsOf(always as Caps, `${at}.alwaysMatch`));
  firsts.forEach((f, i) => problems.push(...problemsOf(f, `${at}.firstMatch[${i}]`)));
  if (problems.length > 0) throw new BadRequestError(problems);
  // goog:chromeOptions may be in alwaysMatch or in the firstMatch entries, not both (W3C merging): the address goes where the client put them.
  if (firsts.some((f) => CHROME_OPTIONS in f) && !(CHROME_OPTIONS in (always as Caps))) {
    return { ...caps, firstMatch: firsts.map(withDebugger) };
  }
  return { ...caps, alwaysMatch: withDebugger(always as Caps) };
}

/** A classic POST /session body: `capabilities` (W3C) checked and attached; a legacy `desiredCapabilities` checked alike. */
export function attachSessionBody(body: unknown): Caps {
  if (!isObject(body)) throw new BadRequestError(['body: must be a JSON object']);
  const out: Caps = { ...body, capabilities: attachCapabilities(body.capabilities, 'capabilities') };
  if (body.desiredCapabilities !== undefined) {
    if (!isObject(body.desiredCapabilities)) throw BadRequestError.field('desiredCapabilities', 'must be an object');
    const problems = problemsOf(body.desiredCapabilities, 'desiredCapabilities');
    if (problems.length > 0) throw new BadRequestError(problems);
    out.desiredCapabilities = withDebugger(body.desiredCapabilities);
  }
  return out;
}
