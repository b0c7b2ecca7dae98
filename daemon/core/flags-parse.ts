// Splits BROWSERD_CHROMIUM_FLAGS the way a shell would split a simple word list:
// whitespace separates flags; single or double quotes group (and are removed), so
// --host-resolver-rules="MAP * ~NOTFOUND, EXCLUDE 127.0.0.1" stays one flag.
// No variables, globs or escapes beyond \" inside double quotes.

export function splitFlags(raw: string): string[] {
  const out: string[] = [];
  let cur = '';
  let inWord = false;
  let quote: '"' | "'" | null = null;
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i] as string;
    if (quote !== null) {
      if (c === quote) quote = null;
      else if (c === '\\' && quote === '"' && raw[i + 1] === '"') cur += raw[++i];
      else cur += c;
      continue;
    }
    if (c === '"' || c === "'") {
      quote = c;
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) out.push(cur);
      cur = '';
      inWord = false;
    } else {
      cur += c;
      inWord = true;
    }
  }
  if (quote !== null) throw new Error(`unterminated ${quote} quote`);
  if (inWord) out.push(cur);
  return out;
}

/**
 * Flags the daemon owns (the profile, DevTools, extension loading, headless mode): BROWSERD_CHROMIUM_FLAGS
 * may not set them, so the daemon keeps working. That is the only check of the operator's flags: the
 * operator's environment is trusted (whoever sets it already runs the daemon, as root), unlike a client
 * of the API, whose flags must be on the allowlist (chromium/settings/flag-allowlist.ts).
 */
export const OWNED_FLAGS: readonly string[] = ['--user-data-dir', '--remote-debugging-', '--disable-extensions', '--load-extension', '--headless'];

/** The longest flag accepted (name and value). */
export const MAX_FLAG_CHARS = 4096;
const FLAG_RE = /^--[a-z0-9][a-z0-9-]*[a-z0-9](?:=[^\0\r\n]*)?$/;

/** The flag's name (`--lang` of `--lang=de`). */
export function flagName(flag: string): string {
  const eq = flag.indexOf('=');
  return eq < 0 ? flag : flag.slice(0, eq);
}

/** The entry of `owned` that `flag` falls under (a prefix when it ends in `-`), or undefined. */
export function ownedBy(flag: string, owned: readonly string[]): string | undefined {
  return owned.find((o) => (o.endsWith('-') ? flag.startsWith(o) : flag === o || flag.startsWith(`${o}=`)));
}

/** Why `flag` is not shaped as a Chromium switch (`--name` or `--name=value`), or null. */
export function flagShapeProblem(flag: string): string | null {
  if (flag.length > MAX_FLAG_CHARS) return `is longer than ${MAX_FLAG_CHARS} characters`;
  if (!flag.startsWith('--')) return 'is not a --flag';
  if (!FLAG_RE.test(flag)) return 'is not --name or --name=value (name: lowercase letters, digits and dashes; value: no line breaks or NUL)';
  return null;
}
